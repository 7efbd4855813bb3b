"""ClampOversizedMessages{max_part_tokens}: long text parts keep their head and tail, token-exact."""

from __future__ import annotations

from typing import Any

import orjson

from core.counting.counter import MessageCounter
from core.counting.tokenizers import HeuristicCounter
from core.engine.budget import FRACTION, TOKENS
from core.engine.workspace import Workspace
from core.strategies import placeholders
from core.strategies.base import Param, StrategyInfo

MIN_PART_TOKENS = 64


def clamp_text(text: str, max_tokens: int, counter: MessageCounter) -> str | None:
    """``text`` cut to at most ``max_tokens`` tokens (head, marker, tail), or None if it fits."""
    total = counter.count_text(text)
    if total <= max_tokens:
        return None
    encoder = counter.counter
    keep = max_tokens - counter.count_text(placeholders.cut(total))
    heuristic = isinstance(encoder, HeuristicCounter)
    tokens = [] if heuristic else encoder.encode(text)
    while keep > 0:
        head_n = (keep + 1) // 2
        tail_n = keep - head_n
        if isinstance(encoder, HeuristicCounter):  # (not `heuristic`: mypy narrows only an isinstance test)
            step = max(1, int(encoder.chars_per_token))
            head, tail = text[: head_n * step], text[len(text) - tail_n * step :] if tail_n else ""
        else:
            head = _decode(encoder, tokens[:head_n], trim_end=True)
            tail = _decode(encoder, tokens[len(tokens) - tail_n :], trim_end=False) if tail_n else ""
        kept = counter.count_text(head) + counter.count_text(tail)
        clamped = head + placeholders.cut(total - kept) + tail
        # Re-encoding across the joins can differ by a token or two: shrink until it fits.
        if counter.count_text(clamped) <= max_tokens:
            return clamped
        keep -= max(2, keep // 50)
    return None  # the limit is below the marker's own size: leave the text as it is


def _decode(encoder: Any, tokens: list[int], *, trim_end: bool) -> str:
    """Decode a slice cut at token boundaries; a cut inside a multi-byte character drops that character.

    tiktoken decodes such a slice leniently; bpe-openai refuses it, so up to
    three tokens at the cut are given up until the rest decodes.
    """
    for drop in range(4):
        part = tokens[: len(tokens) - drop] if trim_end else tokens[drop:]
        try:
            return str(encoder.decode(part))
        except ValueError:
            continue
    return ""


def clamp_content(content: Any, max_tokens: int, counter: MessageCounter) -> tuple[Any, int]:
    if isinstance(content, str):
        clamped = clamp_text(content, max_tokens, counter)
        return (content, 0) if clamped is None else (clamped, 1)
    if not isinstance(content, list):
        return content, 0
    parts, changed = [], 0
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            clamped = clamp_text(part["text"], max_tokens, counter)
            if clamped is not None:
                part = {**part, "text": clamped}
                changed += 1
        parts.append(part)
    return parts, changed


# Without max_part_tokens, under a token budget: one part may keep at most this share of it.
PART_SHARE = 0.25
SEED_PART_TOKENS = 4096


def part_limit(workspace: Workspace, max_part_tokens: int | None) -> int:
    if max_part_tokens is not None:
        return max_part_tokens
    budget = workspace.budget
    if budget.trigger in (TOKENS, FRACTION) and budget.limit is not None and not workspace.full:
        return max(MIN_PART_TOKENS, min(SEED_PART_TOKENS, int(budget.limit * PART_SHARE)))
    return SEED_PART_TOKENS


def _clamp_value(value: Any, max_tokens: int, counter: MessageCounter) -> tuple[Any, int]:
    """Long strings anywhere inside a tool call's arguments, clamped; the structure stays as it was."""
    if isinstance(value, str):
        clamped = clamp_text(value, max_tokens, counter)
        return (value, 0) if clamped is None else (clamped, 1)
    if isinstance(value, dict):
        changed = 0
        out = {}
        for key, item in value.items():
            out[key], n = _clamp_value(item, max_tokens, counter)
            changed += n
        return (out, changed) if changed else (value, 0)
    if isinstance(value, list):
        changed = 0
        items = []
        for item in value:
            new, n = _clamp_value(item, max_tokens, counter)
            items.append(new)
            changed += n
        return (items, changed) if changed else (value, 0)
    return value, 0


def clamp_calls(calls: Any, max_tokens: int, counter: MessageCounter) -> tuple[Any, int]:
    """Tool calls whose argument strings exceed ``max_tokens``, clamped; arguments stay valid JSON."""
    if not isinstance(calls, list):
        return calls, 0
    out, changed = [], 0
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            function = {}  # no call to clamp: its arguments read as None
        arguments = function.get("arguments")
        if isinstance(arguments, str) and counter.count_text(arguments) > max_tokens:
            try:
                parsed = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, (dict, list)):
                new, n = _clamp_value(parsed, max_tokens, counter)
                if n:
                    call = {**call, "function": {**function, "arguments": orjson.dumps(new).decode()}}
                    changed += n
        elif isinstance(arguments, (dict, list)):
            new, n = _clamp_value(arguments, max_tokens, counter)
            if n:
                call = {**call, "function": {**function, "arguments": new}}
                changed += n
        out.append(call)
    return out, changed


AIM_SHARE = 0.98


def _still_needed(workspace: Workspace) -> int:
    """Tokens the run must still lose to land just under a token budget (0 without one)."""
    budget = workspace.budget
    if workspace.full or budget.trigger not in (TOKENS, FRACTION) or budget.limit is None:
        return 0
    return max(0, workspace.live_tokens - int(AIM_SHARE * budget.limit))


def apply(workspace: Workspace, *, max_part_tokens: int | None) -> str:
    limit = part_limit(workspace, max_part_tokens)
    clamped_parts = 0
    for position, message in enumerate(workspace.messages):
        if not workspace.should_continue():
            break
        if workspace.pinned(position) or message.tokens <= limit or not workspace.alive(position):
            continue
        # Cut only as much as the budget still needs: the rest of a long part is worth keeping.
        part_room = max(limit, message.tokens - _still_needed(workspace)) if max_part_tokens is None else limit
        content, changed = clamp_content(message.data.get("content"), part_room, workspace.counter)
        calls, changed_calls = clamp_calls(message.data.get("tool_calls"), part_room, workspace.counter)
        if changed or changed_calls:
            data = dict(message.data)
            if changed:
                data["content"] = content
            if changed_calls:
                data["tool_calls"] = calls
            if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
                continue  # nothing to gain (a limit near the marker's size)
            workspace.rewrite(position, data, f"text over {part_room} tokens clamped to head and tail")
            clamped_parts += changed + changed_calls
    return f"clamped {clamped_parts} text part(s) and argument(s) to {limit} tokens"


STRATEGY = StrategyInfo(
    name="clamp_oversized_messages",
    alias="ClampOversizedMessages",
    summary="cut long text parts and tool-call argument strings to their head and tail",
    params=(Param("max_part_tokens", int, None,
                  "the most tokens one text part or argument may keep (default: a quarter of a token budget, at most 4096)"),),
    apply=apply,
)
