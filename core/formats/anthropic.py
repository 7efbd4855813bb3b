"""Anthropic Messages, one message per line; and the block <-> canonical conversion Claude Code reuses.

A line is ``{"role": "user"|"assistant", "content": str | [blocks]}``; a
``{"system": str | [text blocks]}`` line or a first message with role
``system`` carries the system prompt.

Reading: an assistant message becomes one canonical assistant message, its
``tool_use`` blocks its ``tool_calls`` (``input`` as a JSON string), every
other block (text, thinking with its signature, redacted_thinking, unknown
types) a content part kept verbatim. A user message splits: each
``tool_result`` block becomes its own ``tool`` message (``tool_call_id`` =
``tool_use_id``), the remaining blocks (text, image, document, ...) one user
message; a user message holding only results is no user message. User text
that compact wrote (``CUCA ...`` markers, ``[compact: ...]``) or an earlier
compaction's summary ("This session is being continued ...") reads back as a
system message, so a second run recognises it.

A ``compaction`` block holding a summary (the Messages API's own compaction,
beta ``compact-2026-01-12`` or ``compact-2026-09-04``) is where the API starts
reading: every block before the newest one is ignored. Those lines (and the
blocks before it on its line) are kept as they are and not read, like the
history before Claude Code's ``compact_boundary``; the block itself is a
summary that is pinned and written back byte for byte (its ``signature``
covers its ``content``); the rest of its message is read as usual. A system
line (or system message) is the request's ``system`` parameter, read wherever
it stands.

Writing back: untouched lines are copied; a changed line is rebuilt from its
own blocks (unchanged blocks as they were, a rewritten result keeps its
``tool_use_id``, ``is_error`` and unknown fields). Messages compact adds are
user text lines (the Messages API has no system role mid-conversation).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from core.formats.base import (
    Codec,
    Decoded,
    Insert,
    Item,
    Keep,
    Line,
    Losses,
    Rebuild,
    Step,
    changed,
    line_error,
    origin_message,
    plan,
    unread_before,
    write_back,
)
from core.io import jsonio
from core.messages import (
    FAILED,
    PLACEHOLDER_PREFIX,
    PROVIDER_RECORD,
    SUMMARY_MARKER,
    Message,
    arguments_value,
    tool_calls,
)

# Blocks only the Anthropic API writes: a line holding one is evidence of the format.
NATIVE_BLOCKS = frozenset({
    "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document",
    "web_search_tool_result", "search_result", "compaction",
})
# User text compact wrote, or an agent's earlier compaction: read back as a system message.
COMPACT_PREFIXES = ("CUCA ", PLACEHOLDER_PREFIX, SUMMARY_MARKER)
CONTINUATION = "This session is being continued from a previous conversation"
CARRIED = frozenset({"role", "content", "tool_calls", "tool_call_id", "tool_call_ids"})
COMPACTION_RECORD = "Anthropic compaction block"  # extra[PROVIDER_RECORD] of the summary it makes


# -- reading: blocks -> canonical -------------------------------------------------------------

def is_tool_use(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def call_of(block: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block as a canonical tool call."""
    return {"id": block.get("id"), "type": "function",
            "function": {"name": block.get("name", ""), "arguments": jsonio.dumps(block.get("input", {})).decode()}}


def assistant_data(blocks: Sequence[Any]) -> dict[str, Any]:
    """Canonical assistant message of a list of blocks: tool_use -> tool_calls, the rest content parts."""
    parts = [b for b in blocks if not is_tool_use(b)]
    calls = [call_of(b) for b in blocks if is_tool_use(b)]
    if not calls:
        return {"role": "assistant", "content": parts}
    return {"role": "assistant", "content": parts or None, "tool_calls": calls}


def first_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else ""
    return ""


def is_summary_text(content: Any) -> bool:
    return first_text(content).startswith(CONTINUATION)


def user_pieces(content: Any) -> list[tuple[dict[str, Any], tuple[int, ...] | None, dict[str, Any]]]:
    """The canonical messages of a user message's content: (data, block indexes it owns or None for all, extra).

    Tool results come first (each its own ``tool`` message), then one message
    with the remaining blocks, if any.
    """
    if not isinstance(content, list):
        return [_text_piece(content, None)]
    pieces: list[tuple[dict[str, Any], tuple[int, ...] | None, dict[str, Any]]] = []
    rest: list[int] = []
    for index, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            result = block.get("content", "")
            data = {"role": "tool", "tool_call_id": block.get("tool_use_id"),
                    "content": result if isinstance(result, (str, list)) else ""}
            pieces.append((data, (index,), {FAILED: True} if block.get("is_error") is True else {}))
        else:
            rest.append(index)
    if rest:
        parts = content if len(rest) == len(content) else [content[i] for i in rest]
        pieces.append(_text_piece(parts, tuple(rest)))
    return pieces


def _text_piece(content: Any, owns: tuple[int, ...] | None) -> tuple[dict[str, Any], tuple[int, ...] | None, dict[str, Any]]:
    text = first_text(content)
    if text.startswith(CONTINUATION):
        return {"role": "system", "content": content}, owns, {"summary": True}
    if text.startswith(COMPACT_PREFIXES):
        return {"role": "system", "content": content}, owns, {}
    return {"role": "user", "content": content}, owns, {}


def is_compaction(block: Any) -> bool:
    """A ``compaction`` block with a summary (one whose ``content`` is null is a failed compaction: a no-op)."""
    return isinstance(block, dict) and block.get("type") == "compaction" and isinstance(block.get("content"), str)


def newest_compaction(lines: Sequence[Line]) -> tuple[int, int] | None:
    """(index in ``lines``, block index) of the newest compaction block: the API reads from there on."""
    for at in range(len(lines) - 1, -1, -1):
        data = lines[at].data
        content = data.get("content") if data is not None and data.get("role") in ("user", "assistant") else None
        if isinstance(content, list):
            for index in range(len(content) - 1, -1, -1):
                if is_compaction(content[index]):
                    return at, index
    return None


def compaction_pieces(line: Line, data: dict[str, Any], index: int) -> list[Message]:
    """The messages of the line holding the newest compaction block: the block as a summary, then the
    blocks after it (the ones before it the API ignores, so they stay unread)."""
    content = data["content"]
    record = origin_message({"role": "system", "content": [content[index]]}, [line.number], owns=(index,),
                            summary=True, **{PROVIDER_RECORD: COMPACTION_RECORD})
    rest = content[index + 1:]
    if not rest:
        return [record]
    if data["role"] == "assistant":
        return [record, origin_message(assistant_data(rest), [line.number], owns=tuple(range(index + 1, len(content))))]
    pieces = [record]
    for canonical, owns, extra in user_pieces(rest):
        shifted = tuple(i + index + 1 for i in owns or range(len(rest)))
        pieces.append(origin_message(canonical, [line.number], owns=shifted, **extra))
    return pieces


# -- writing back: canonical -> blocks --------------------------------------------------------

def to_blocks(content: Any) -> list[Any]:
    """Canonical content as Anthropic blocks (text parts, images from ``image_url``; other blocks as they are)."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[Any] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part})
        elif isinstance(part, dict) and part.get("type") == "image_url":
            blocks.append(image_block(part))
        elif isinstance(part, dict) and part.get("type") in ("input_text", "output_text"):
            blocks.append({"type": "text", "text": part.get("text", "")})
        else:
            blocks.append(part)
    return blocks


def image_block(part: dict[str, Any]) -> dict[str, Any]:
    image = part.get("image_url")
    url = str(image.get("url", "") if isinstance(image, dict) else image or "")
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def use_block(call: Mapping[str, Any], template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A canonical tool call as a ``tool_use`` block (unknown fields of ``template`` kept)."""
    function: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else {}
    value = arguments_value(call)
    block: dict[str, Any] = dict(template) if template else {"type": "tool_use"}
    block["id"] = call.get("id")
    block["name"] = function.get("name", "")
    block["input"] = value if isinstance(value, dict) else {"arguments": value}
    return block


def assistant_blocks(before: dict[str, Any], after: dict[str, Any],
                     original: Sequence[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The blocks of a rewritten assistant message, each with where it came from (None: new).

    ``original`` is the message's ``(where, block)`` list in order. Unchanged
    blocks and calls keep their place (and bytes: thinking signatures); new
    text replaces the old parts in place when there are as many, else takes the
    first part's place; calls compact did not know come last.
    """
    calls = {c.get("id"): c for c in tool_calls(after)}
    same_text = after.get("content") == before.get("content")
    new_parts = None if same_text else to_blocks(after.get("content"))
    slots = sum(1 for _, block in original if not is_tool_use(block))
    fits = new_parts is not None and len(new_parts) == slots
    out: list[tuple[Any, Any]] = []
    placed = new_parts is None or fits  # text that fits goes into the old parts' places, and only there
    next_part = 0
    for where, block in original:
        if is_tool_use(block):
            call = calls.pop(block.get("id"), None)
            if call is not None:
                out.append((where, block if call_of(block) == call else use_block(call, block)))
        elif new_parts is None:
            out.append((where, block))
        elif fits:
            out.append((where, new_parts[next_part]))
            next_part += 1
        elif not placed:
            out.extend((where, part) for part in new_parts)
            placed = True
    if not placed:
        out[0:0] = [(None, part) for part in new_parts or ()]
    out.extend((None, use_block(call)) for call in calls.values())
    return out


def result_block(block: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """A tool_result block with the rewritten content (its id, is_error and unknown fields kept)."""
    rebuilt = dict(block)
    if after.get("content") != before.get("content"):
        content = after.get("content")
        rebuilt["content"] = content if isinstance(content, str) else to_blocks(content)
    return rebuilt


def user_content(original: Any, pieces: Sequence[tuple[Message, Message | None]]) -> Any:
    """A user message's content after compaction (None: nothing left of it).

    ``pieces`` pairs each canonical message of the line with what became of it;
    each names the blocks it owns in ``extra["owns"]``.
    """
    if not isinstance(original, list):
        after = pieces[0][1]
        if after is None:
            return None
        content = after.data.get("content")
        return content if isinstance(content, str) else to_blocks(content)
    owner: dict[int, tuple[Message, Message | None]] = {}
    for before, after in pieces:
        for index in before.extra.get("owns") or ():
            owner[index] = (before, after)
    out: list[Any] = []
    for index, block in enumerate(original):
        piece = owner.get(index)
        if piece is None:
            out.append(block)
            continue
        before, after = piece
        if after is None:
            continue
        if not changed(before, after):
            out.append(block)
        elif before.role == "tool":
            out.append(result_block(block, before.data, after.data))
        elif index == before.extra["owns"][0]:
            out.extend(to_blocks(after.data.get("content")))
    return out or None


def inserted_text(message: Message) -> str | list[Any]:
    content = message.data.get("content")
    return content if isinstance(content, str) else to_blocks(content)


# -- the codec ---------------------------------------------------------------------------------

def _is_system_line(data: dict[str, Any]) -> bool:
    # A ShareGPT conversation or a dataset line can carry a top-level "system" too.
    return "system" in data and not any(key in data for key in ("role", "conversations", "messages", "from"))


class Anthropic(Codec):
    name = "anthropic"
    title = "Anthropic Messages"

    def accepts(self, data: dict[str, Any]) -> bool:
        if _is_system_line(data):
            return isinstance(data["system"], (str, list))
        if data.get("role") not in ("user", "assistant", "system") or data.get("type", "message") != "message":
            return False
        if "tool_calls" in data or "tool_call_id" in data or "function_call" in data:
            return False
        content = data.get("content")
        return isinstance(content, str) or isinstance(content, list) and all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in content)

    def evidence(self, data: dict[str, Any]) -> bool:
        if _is_system_line(data):
            return True
        content = data.get("content")
        return isinstance(content, list) and any(
            b.get("type") in NATIVE_BLOCKS or b.get("type") == "image" and "source" in b for b in content)

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        messages: list[Message] = []
        boundary = newest_compaction(lines)
        for at, line in enumerate(lines):
            data = line.data
            if data is None:
                continue  # an invalid line kept verbatim (--skip-invalid)
            if not self.accepts(data):
                raise line_error(path, line, "this line is not an Anthropic message",
                                 fix='each line is {"role": "user"|"assistant", "content": ...} or {"system": ...}')
            if _is_system_line(data):
                messages.append(origin_message({"role": "system", "content": data["system"]}, [line.number]))
            elif data["role"] == "system":  # (the system parameter too: sent wherever it stands)
                messages.append(origin_message({"role": "system", "content": data["content"]}, [line.number]))
            elif boundary is not None and at <= boundary[0]:
                if at == boundary[0]:  # (the lines before it the API does not read: kept, not counted)
                    messages.extend(compaction_pieces(line, data, boundary[1]))
            elif data["role"] == "assistant":
                content = data["content"]
                canonical = assistant_data(content) if isinstance(content, list) else {"role": "assistant", "content": content}
                messages.append(origin_message(canonical, [line.number]))
            else:
                for canonical, owns, extra in user_pieces(data["content"]):
                    messages.append(origin_message(canonical, [line.number], owns=owns, **extra))
        return messages

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        boundary = newest_compaction(decoded.lines)
        if boundary is None:
            return write_back(decoded, result, rebuild=self._rebuilt_line, insert=_inserted)
        return self._write_around(list(plan(decoded, result)), decoded.lines[boundary[0]].number, boundary[1] + 1)

    def _write_around(self, steps: list[Step], number_: int, cut: int) -> Iterator[Item]:
        """Write the plan, with compact's additions that land just before the compaction block's line moved
        after the block (before it the API would not read them), its line split there when need be."""
        at = next(i for i, step in enumerate(steps) if getattr(step, "line", None) is not None
                  and step.line.number == number_)  # type: ignore[union-attr]
        first_moved = at
        while first_moved > 0 and isinstance(steps[first_moved - 1], Insert):
            first_moved -= 1
        for step in steps[:first_moved]:
            yield from self._items(step)
        moved = steps[first_moved:at]
        step = steps[at]
        if not moved:
            yield from self._items(step)
        else:
            data = step.line.data or {}  # type: ignore[union-attr]
            content = data["content"] if isinstance(step, Keep) else (self._rebuilt_line(step) or [data])[0]["content"]  # type: ignore[arg-type]
            yield {**data, "content": content[:cut]}
            for added in moved:
                yield from self._items(added)
            if content[cut:]:
                yield {**data, "content": content[cut:]}
        for step in steps[at + 1:]:
            yield from self._items(step)

    def _items(self, step: Step) -> Iterator[Item]:
        if isinstance(step, Keep):
            yield step.line.source
        elif isinstance(step, Insert):
            yield from _inserted(step.message, None)
        elif isinstance(step, Rebuild):
            yield from self._rebuilt_line(step)

    def _rebuilt_line(self, step: Rebuild) -> list[dict[str, Any]]:
        rebuilt = self._rebuild(step.line.data or {}, step.pieces)
        return [] if rebuilt is None else [rebuilt]

    def _rebuild(self, data: dict[str, Any], pieces: Sequence[tuple[Message, Message | None]]) -> dict[str, Any] | None:
        before, after = pieces[0]
        if _is_system_line(data):
            return None if after is None else {**data, "system": after.data.get("content")}
        if data["role"] == "system":
            return None if after is None else {**data, "content": after.data.get("content")}
        if data["role"] == "assistant" and before.extra.get(PROVIDER_RECORD):
            return {**data, "content": _after_compaction(data["content"], pieces)}
        if data["role"] == "assistant":
            if after is None:
                return None
            if not isinstance(data["content"], list):
                content: Any = after.data.get("content")
                if tool_calls(after.data) or not isinstance(content, str):
                    content = to_blocks(content) + [use_block(c) for c in tool_calls(after.data)]
                return {**data, "content": content}
            blocks = assistant_blocks(before.data, after.data, list(enumerate(data["content"])))
            return {**data, "content": [block for _, block in blocks]} if blocks else None
        content = user_content(data["content"], pieces)
        return None if content is None else {**data, "content": content}

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        return unread_before(super().unread(decoded), decoded,
                             "lines before the newest compaction block (the API does not read them)")

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        from core.formats.anthropic_render import render_traced  # it builds on this module's blocks

        for _, item in render_traced(messages, losses):
            yield item


def _inserted(message: Message, _near: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": inserted_text(message)}]


def _after_compaction(content: list[Any], pieces: Sequence[tuple[Message, Message | None]]) -> list[Any]:
    """An assistant line holding the compaction block: everything up to the block as it was, then the rest."""
    cut = pieces[0][0].extra["owns"][0] + 1
    tail: list[Any] = []
    for before, after in pieces[1:]:
        if after is not None:
            tail = [block for _, block in assistant_blocks(before.data, after.data, list(enumerate(content))[cut:])]
    return content[:cut] + tail


CODEC = Anthropic()
