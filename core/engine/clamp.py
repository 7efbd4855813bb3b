"""Cutting the middle out of long texts to a token count: head and tail kept, the cut marked.

Strategies clamp oversized parts and tool-call arguments with it, the pipeline clamps pinned
messages that alone exceed the budget, and summarizers shorten an earlier summary.
"""

from __future__ import annotations

from typing import Any

import orjson

from core.counting.counter import MessageCounter
from core.counting.tokenizers import HeuristicCounter
from core.engine import placeholders
from core.engine.records import cut_records
from core.messages import Message
from core.summarizers.facts import headings, outline
from core.summarizers.salience import names_in

MIN_PART_TOKENS = 64
# A cut through this many lines or more keeps those of its lines that name the most (paths, dotted
# and CamelCase names: what an agent goes back to), in this share of the room, at most so many.
EXCERPT_MIN_LINES = 20
EXCERPT_MIN_TOKENS = 300  # (in less room, the head and tail are what is left of a pinned request)
EXCERPT_SHARE = 0.15
EXCERPT_LINES = 12
EXCERPT_LINE_CHARS = (8, 200)
EXCERPT_SCAN_CHARS = 64_000
# The names a cut defined: read from its first CUT_SCAN_CHARS characters, at most CUT_SCAN_NAMES of them.
CUT_SCAN_CHARS = 16_000
CUT_SCAN_NAMES = 64


def clamp_text(text: str, max_tokens: int, counter: MessageCounter) -> str | None:
    """``text`` cut to at most ``max_tokens`` tokens (head, marker, tail), or None if it fits. A long
    cut through many lines keeps, between its markers, the lines of the cut part naming the most."""
    total = counter.count_text(text)
    if total <= max_tokens:
        return None
    by_record = cut_records(text, max_tokens, counter)  # (a JSON text of records: each keeps its ids and links)
    if by_record is not None:
        return by_record
    encoder = counter.counter
    tokens = [] if isinstance(encoder, HeuristicCounter) else encoder.encode(text)
    if max_tokens >= EXCERPT_MIN_TOKENS and text.count("\n", 0, EXCERPT_SCAN_CHARS) >= EXCERPT_MIN_LINES:
        excerpted = _cut(text, tokens, total, max_tokens, counter, int(max_tokens * EXCERPT_SHARE))
        if excerpted is not None:
            return excerpted
    return _cut(text, tokens, total, max_tokens, counter, 0)


def _cut(text: str, tokens: list[int], total: int, max_tokens: int, counter: MessageCounter,
         excerpt_room: int) -> str | None:
    """Head, marker, tail (``tokens``: the text's, none for a heuristic counter); with
    ``excerpt_room``, the cut part's lines naming the most in that many tokens between the marker
    and a closing one (None when it finds none)."""
    encoder = counter.counter
    keep = max_tokens - counter.count_text(placeholders.cut(total)) - excerpt_room
    names: list[str] | None = None
    sections: list[str] = []
    excerpt, excerpt_tokens = "", 0
    while keep > 0:
        head_n = (keep + 1) // 2
        tail_n = keep - head_n
        if isinstance(encoder, HeuristicCounter):
            step = max(1, int(encoder.chars_per_token))
            head, tail = text[: head_n * step], text[len(text) - tail_n * step :] if tail_n else ""
        else:
            head = _decode(encoder, tokens[:head_n], trim_end=True)
            tail = _decode(encoder, tokens[len(tokens) - tail_n :], trim_end=False) if tail_n else ""
        kept = counter.count_text(head) + counter.count_text(tail)
        if names is None:  # (once: a later, slightly longer cut defines the same names, or a few more)
            # A cut through code says what the cut part defined: the model knows those names exist.
            cut_part = text[len(head) : min(len(text) - len(tail), len(head) + CUT_SCAN_CHARS)]
            names = outline(cut_part, CUT_SCAN_NAMES)
            # A cut through a document (a plan) says which of its sections went.
            sections = headings(cut_part, CUT_SCAN_NAMES) if len(names) < 2 and "\n## " in cut_part else []
            if excerpt_room:
                excerpt, excerpt_tokens = _named_lines(text[len(head) : len(text) - len(tail)], excerpt_room, counter)
                if not excerpt:
                    return None
        clamped = head + placeholders.cut(total - kept - excerpt_tokens, names, sections, excerpt) + tail
        # The names, and re-encoding across the joins, can take the text over: shrink until it fits.
        over = counter.count_text(clamped) - max_tokens
        if over <= 0:
            return clamped
        keep -= max(2, keep // 1000, over)  # (a long text: a thousandth at a time, not a fiftieth)
    return None  # the limit is below the marker's own size: leave the text as it is


def _named_lines(part: str, room: int, counter: MessageCounter) -> tuple[str, int]:
    """The lines of ``part`` naming the most (a path, a dotted or CamelCase name: salience.py), two
    names at least, in their order, within ``room`` tokens (at most EXCERPT_LINES); and their tokens."""
    lines = part[:EXCERPT_SCAN_CHARS].splitlines()[1:-1]  # (the first and last are the cut's own ends)
    ranked = sorted(((len(names_in(line)), -index) for index, line in enumerate(lines)
                     if EXCERPT_LINE_CHARS[0] <= len(line.strip()) <= EXCERPT_LINE_CHARS[1]), reverse=True)
    chosen: list[int] = []
    used = 0
    for named, index in ranked:
        if named < 2 or len(chosen) >= EXCERPT_LINES:
            break
        cost = counter.count_text(lines[-index]) + 1
        if used + cost <= room:
            chosen.append(-index)
            used += cost
    return "\n".join(lines[i] for i in sorted(chosen)), used


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
            except orjson.JSONDecodeError:  # free-form input (a Codex custom tool's patch): plain text
                clamped = clamp_text(arguments, max_tokens, counter)
                if clamped is not None:
                    call = {**call, "function": {**function, "arguments": clamped}}
                    changed += 1
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


def clamp_message(data: dict[str, Any], max_tokens: int, counter: MessageCounter) -> tuple[dict[str, Any] | None, int]:
    """``data`` with its text parts and call-argument strings over ``max_tokens`` cut (head and tail
    kept), and how many were cut; (None, 0) when none was."""
    content, changed = clamp_content(data.get("content"), max_tokens, counter)
    calls, changed_calls = clamp_calls(data.get("tool_calls"), max_tokens, counter)
    if not (changed or changed_calls):
        return None, 0
    clamped = dict(data)
    if changed:
        clamped["content"] = content
    if changed_calls:
        clamped["tool_calls"] = calls
    return clamped, changed + changed_calls


def cut_to(message: Message, most_tokens: int, counter: MessageCounter) -> dict[str, Any] | None:
    """``message``'s data with the middles of its long texts (text parts and call-argument strings)
    cut so that it takes at most ``most_tokens``, keeping as much of each as fits; None when no
    cut gets it there.

    One cap for every text: a message whose tokens are spread over several texts (an edit's old
    and new strings) shares the cut between them instead of needing one text long enough to take
    it all. Each try moves the cap by what it missed, shared among the texts it cut (one or two
    tries for one long text), within bounds that halve like a bisection's when that overshoots.
    """
    if message.tokens <= most_tokens:
        return None
    best: dict[str, Any] | None = None
    best_tokens = -1
    close_enough = max(8, most_tokens // 200)
    low, high = MIN_PART_TOKENS, most_tokens  # (no one text can keep more than the whole message may)
    cap = most_tokens - 16  # one long text takes about all the room
    while low <= high:
        if not low <= cap <= high:
            cap = (low + high) // 2
        data, parts = clamp_message(message.data, cap, counter)
        if data is None:  # no text is over this cap
            high = cap - 1
            continue
        tokens = counter.count_message(message.rewritten(data)).tokens
        if tokens <= most_tokens:
            if tokens > best_tokens:
                best, best_tokens = data, tokens
            if most_tokens - tokens <= close_enough:
                break
            low = cap + 1
            cap += max(1, (most_tokens - tokens) // parts)
        else:
            high = cap - 1
            cap -= -(-(tokens - most_tokens) // parts) + 2
    return best
