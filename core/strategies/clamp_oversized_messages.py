"""ClampOversizedMessages{max_part_tokens}: long text parts keep their head and tail, token-exact."""

from __future__ import annotations

from typing import Any

from core.counting import MessageCounter
from core.strategies import placeholders
from core.strategies.base import Param, StrategyInfo
from core.tokens import HeuristicCounter
from core.workspace import Workspace


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
        if heuristic:
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


def _clamp_content(content: Any, max_tokens: int, counter: MessageCounter) -> tuple[Any, int]:
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


def apply(workspace: Workspace, *, max_part_tokens: int) -> str:
    clamped_parts = 0
    for position, message in enumerate(workspace.messages):
        if not workspace.should_continue():
            break
        if workspace.pinned(position) or message.tokens <= max_part_tokens:
            continue
        content, changed = _clamp_content(message.data.get("content"), max_part_tokens, workspace.counter)
        if changed:
            data = dict(message.data)
            data["content"] = content
            if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
                continue  # nothing to gain (a limit near the marker's size)
            workspace.rewrite(position, data, f"text over {max_part_tokens} tokens clamped to head and tail")
            clamped_parts += changed
    return f"clamped {clamped_parts} text part(s) to {max_part_tokens} tokens"


STRATEGY = StrategyInfo(
    name="clamp_oversized_messages",
    alias="ClampOversizedMessages",
    summary="cut text parts longer than max_part_tokens to their head and tail",
    params=(Param("max_part_tokens", int, 4096, "the most tokens one text part may keep"),),
    apply=apply,
)
