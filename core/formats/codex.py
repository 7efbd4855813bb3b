"""Codex CLI rollout (``~/.codex/sessions/.../rollout-*.jsonl``), in either of its two layouts.

The envelope layout (current Codex, 0.47 in the real sample): every line ``{timestamp, type, payload}``.

* ``response_item`` lines hold Responses items, read exactly as
  :mod:`core.formats.responses` reads them (calls pair by ``call_id``,
  reasoning kept verbatim with its encrypted content).
* ``compacted`` lines (an earlier compaction by Codex) read as a summary:
  a system message holding ``payload.message``. One with a
  ``replacement_history`` (a remote compaction: the user messages and OpenAI's
  encrypted ``compaction`` item) replaces the history when Codex resumes, as a
  ``compaction`` item replaces what came before it: the lines before the newest
  of either are kept as they are and not read, and it is a summary of that
  history's text, pinned and never edited.
* ``session_meta``, ``turn_context``, other ``event_msg`` lines and unknown
  types pass through in place.
* ``event_msg`` lines that copy a message's text (``user_message``,
  ``agent_message``, ``agent_reasoning``) or a call's output
  (``exec_command_end`` and other ``*_end`` events with a ``call_id``) belong
  to that message: they go when it goes, and a copy of text that was
  rewritten (a placeholder, a clamp) goes too, so nothing removed survives
  in a duplicate.
* Codex's own user-role messages (the AGENTS.md instructions,
  ``<environment_context>``, ``<user_instructions>``) read as system
  messages: they do not start a turn, and the most recent *typed* prompt is
  the one pinned. The first of them (the AGENTS.md instructions) is pinned as
  the system prompt. They are written back with their own role, user.

A message compact adds is a ``response_item`` line with the timestamp of
the line it is placed before. Every message compact writes is shaped as
Codex writes its own, because Codex leaves other messages out of the history
it sends when it resumes a rollout: a system message (a summary) is a
``message`` item of role ``developer``, and its content is a list of parts
(``output_text`` for the assistant), never a bare string. After the first
line compact changed, a ``token_count`` event keeps its rate limits but
loses its ``info`` (Codex writes ``null`` there before its first count):
Codex sizes a resumed history from the newest one, and the old count would
make it compact the compacted history again at once.

The 2025 layout (rollouts written before the envelope): a header line
``{id, timestamp, instructions, git?}`` without ``type``, ``{"record_type":
"state"}`` marker lines, and bare Responses items (no timestamp of their own)
read exactly as the envelope's ``response_item`` payloads. The header and the
state lines pass through in place; a message compact adds is a bare
``message`` item. A file holds one layout: a line of the other is an error.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from core.formats.base import (
    Codec,
    Decoded,
    Item,
    Line,
    Losses,
    Rebuild,
    changed,
    line_error,
    note_failed,
    now_stamp,
    origin_message,
    unread_before,
    write_back,
)
from core.formats.responses import CODEC as RESPONSES
from core.formats.responses import (
    ItemReader,
    accepts_item,
    custom_call_ids,
    is_compaction_item,
    knows_item,
    rebuilt_items,
    render_items,
)
from core.formats.responses_items import canonical_parts
from core.messages import PROVIDER_RECORD, Message, tool_calls

LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
REPLACEMENT_RECORD = "Codex replacement history"  # extra[PROVIDER_RECORD] of a compacted line that has one
HARNESS_PREFIXES = ("# AGENTS.md instructions for", "<environment_context>", "<user_instructions>", "<INSTRUCTIONS>")


def is_legacy_header(data: dict[str, Any]) -> bool:
    """The first line of a 2025-layout rollout: ``{id, timestamp, instructions, git?}``, no ``type``."""
    return "id" in data and "timestamp" in data and not any(k in data for k in ("type", "payload", "role", "record_type"))


def is_legacy_marker(data: dict[str, Any]) -> bool:
    """A 2025-layout line that is not an item: the header or a ``{"record_type": ...}`` state marker."""
    return isinstance(data.get("record_type"), str) and "type" not in data or is_legacy_header(data)


def is_envelope(data: dict[str, Any]) -> bool:
    return isinstance(data.get("type"), str) and isinstance(data.get("payload"), dict)


def is_harness(parts: list[Any]) -> bool:
    first = next((p.get("text") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)), None)
    return first is not None and first.lstrip().startswith(HARNESS_PREFIXES)


# --- event_msg copies ----------------------------------------------------------------------------

def copy_key(payload: Any) -> tuple[str, str] | None:
    """What an event_msg payload duplicates: ('user'|'agent'|'reasoning', text) or ('call'|'output', call_id)."""
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if kind == "user_message" and isinstance(payload.get("message"), str):
        return ("user", payload["message"])
    if kind == "agent_message" and isinstance(payload.get("message"), str):
        return ("agent", payload["message"])
    if kind in ("agent_reasoning", "agent_reasoning_raw_content") and isinstance(payload.get("text"), str):
        return ("reasoning", payload["text"])
    call_id = payload.get("call_id")
    if isinstance(call_id, str) and isinstance(kind, str):
        if kind.endswith("_end"):
            return ("output", call_id)
        if kind.endswith("_begin"):
            return ("call", call_id)
    return None


def message_keys(data: dict[str, Any]) -> set[tuple[str, str]]:
    """The copy keys an event_msg line duplicating this canonical message would have."""
    role = data.get("role")
    if role == "tool":
        return {("output", str(data.get("tool_call_id")))}
    content = data.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content if isinstance(content, list) else []
    texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
    text_kind = "agent" if role == "assistant" else "user"
    keys = {(text_kind, t) for t in texts}
    if texts:
        keys.add((text_kind, "\n".join(texts)))
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "reasoning":
            for field in ("summary", "content"):
                for piece in part.get(field) or ():
                    if isinstance(piece, dict) and isinstance(piece.get("text"), str):
                        keys.add(("reasoning", piece["text"]))
    keys.update(("call", str(c.get("id"))) for c in tool_calls(data))
    return keys


def _link_copies(messages: list[Message], events: list[tuple[int, tuple[str, str]]]) -> None:
    """Attach each copying event_msg line to the nearest message it copies (an unlinked one first)."""
    owners: dict[tuple[str, str], list[int]] = {}
    for index, message in enumerate(messages):
        for key in message_keys(message.data):
            owners.setdefault(key, []).append(index)
    linked: set[tuple[int, tuple[str, str]]] = set()
    for number_, key in events:
        candidates = owners.get(key)
        if not candidates:
            continue
        free = [i for i in candidates if (i, key) not in linked]
        index = min(free or candidates, key=_distance_to(messages, number_))
        linked.add((index, key))
        extra = messages[index].extra
        extra["origin"] = (*extra["origin"], number_)
        extra.setdefault("copies", {})[number_] = key


def _distance_to(messages: list[Message], number_: int) -> Callable[[int], int]:
    return lambda index: abs((messages[index].line or 0) - number_)


# --- the codec -----------------------------------------------------------------------------------

class Codex(Codec):
    name = "codex"
    title = "Codex CLI rollout"

    def accepts(self, data: dict[str, Any]) -> bool:
        if not is_envelope(data):
            return is_legacy_marker(data) or accepts_item(data)  # the 2025 layout
        return data["type"] != "response_item" or "type" in data["payload"] or accepts_item(data["payload"])

    def evidence(self, data: dict[str, Any]) -> bool:
        return data.get("type") in LINE_TYPES and isinstance(data.get("payload"), dict) or is_legacy_marker(data)

    def knows(self, data: dict[str, Any]) -> bool:
        if is_envelope(data):
            return data["type"] in LINE_TYPES
        return is_legacy_marker(data) or knows_item(data)

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        if _legacy(lines):
            return _decode_legacy(lines, path)
        reader = ItemReader(path, harness=is_harness)
        events: list[tuple[int, tuple[str, str]]] = []
        for line in lines[_history_start(lines):]:
            data = line.data
            if data is None:
                continue
            if not is_envelope(data):
                what = ("this line is a bare item of the 2025 rollout layout, but the file is in the envelope layout"
                        if is_legacy_marker(data) or accepts_item(data) else "a Codex rollout line needs a type and a payload object")
                raise line_error(path, line, what,
                                 fix="fix or remove the line, or pass --from to read the file as another format")
            kind, payload = data["type"], data["payload"]
            if kind == "response_item":
                reader.add(line, payload)
            elif kind == "compacted" and isinstance(payload.get("replacement_history"), list):
                reader.flush()
                reader.messages.append(_replacement(line, payload["replacement_history"]))
            elif kind == "compacted" and isinstance(payload.get("message"), str):
                reader.flush()
                reader.messages.append(origin_message({"role": "system", "content": payload["message"]},
                                                      [line.number], summary=True, layout=((line.number, "compacted"),)))
            elif kind == "event_msg":
                key = copy_key(payload)
                if key is not None:
                    events.append((line.number, key))
        messages = reader.finish()
        _link_copies(messages, events)
        return messages

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        return unread_before(super().unread(decoded), decoded,
                             "rollout lines before the newest compaction (Codex resumes from it)")

    def renders_anew(self, decoded: Decoded) -> bool:
        return _legacy(decoded.lines)  # (Codex 0.171 fails to read the session metadata of one)

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        if _legacy(decoded.lines):
            yield from RESPONSES.encode(decoded, result)  # the 2025 layout writes back as bare items do
            return
        yield from write_back(decoded, result, rebuild=_rebuilt_line, after_change=_uncounted,
                              insert=lambda message, near: _envelopes(message, near()))

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        stamp = now_stamp()
        yield {"timestamp": stamp, "type": "session_meta",
               "payload": {"id": str(uuid.uuid4()), "timestamp": stamp, "cwd": "", "originator": "compact",
                           "cli_version": "", "instructions": None, "source": "cli"}}
        custom = custom_call_ids(messages)
        for message in messages:
            envelopes = list(_envelopes(message, stamp, losses, custom))
            if envelopes:  # (a result left out is counted as such, not as a flag lost)
                note_failed(message, losses)
            yield from envelopes


def _envelopes(message: Message, stamp: Any, losses: Losses | None = None,
               custom: frozenset[str] = frozenset()) -> Iterator[dict[str, Any]]:
    """A message's Responses items, each in a rollout line stamped ``stamp``."""
    for item in render_items(message.data, Losses() if losses is None else losses, custom):
        yield {"timestamp": stamp, "type": "response_item", "payload": _as_codex_writes(item)}


def _as_codex_writes(item: dict[str, Any]) -> dict[str, Any]:
    """A message item as Codex resumes it: a system message as a developer one, a string content as one part."""
    if item.get("type") != "message":
        return item
    role = "developer" if item.get("role") == "system" else item.get("role")
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "output_text" if role == "assistant" else "input_text", "text": content}]
    return {**item, "role": role, "content": content}


def _uncounted(line: Line) -> Iterator[Item]:
    """A line after the first change: a ``token_count`` event without the count of a history now gone."""
    data = line.data
    if data is not None and data.get("type") == "event_msg" and is_envelope(data) \
            and data["payload"].get("type") == "token_count" and data["payload"].get("info") is not None:
        yield {**data, "payload": {**data["payload"], "info": None}}
    else:
        yield line.source


def _history_start(lines: Sequence[Line]) -> int:
    """The index of the newest ``compaction`` item or ``replacement_history`` line (0 when none)."""
    for at in range(len(lines) - 1, -1, -1):
        data = lines[at].data or {}
        payload = data.get("payload")
        if not isinstance(payload, dict):
            continue
        if data["type"] == "response_item" and is_compaction_item(payload) \
                or data["type"] == "compacted" and isinstance(payload.get("replacement_history"), list):
            return at
    return 0


def _replacement(line: Line, history: list[Any]) -> Message:
    """A ``replacement_history`` as one summary: its messages' text and its compaction items, in order."""
    parts: list[Any] = []
    for item in history:
        if is_compaction_item(item):
            parts.append(item)
        elif isinstance(item, dict) and item.get("type", "message") == "message":
            parts.extend(p for p in canonical_parts(item.get("content")) if isinstance(p, dict) and p.get("type") == "text")
    return origin_message({"role": "system", "content": parts}, [line.number], summary=True,
                          layout=((line.number, "compacted"),), **{PROVIDER_RECORD: REPLACEMENT_RECORD})


# --- the 2025 layout -----------------------------------------------------------------------------

def _legacy(lines: Sequence[Line]) -> bool:
    """Is the file in the 2025 layout (its first readable line not an envelope)?"""
    first = next((line.data for line in lines if line.data is not None), None)
    return first is not None and not is_envelope(first)


def _decode_legacy(lines: list[Line], path: str) -> list[Message]:
    reader = ItemReader(path, harness=is_harness)
    for line in lines:
        data = line.data
        if data is None or is_legacy_marker(data):
            continue
        if is_envelope(data):
            raise line_error(path, line, "this line is a Codex CLI rollout line (envelope layout) but the lines before "
                             "it are bare Responses items (or the 2025 rollout layout); a file holds one format",
                             fix="split the file, or pass --from FORMAT to read it as one format")
        if not accepts_item(data):
            raise line_error(path, line, "this line is neither a Responses item nor a 2025 rollout header or state line",
                             fix="fix or remove the line, or --skip-invalid to leave it out")
        reader.add(line, data)
    return reader.finish()


def _rebuilt_line(step: Rebuild) -> Iterator[dict[str, Any] | bytes]:
    line, data = step.line, step.line.data
    assert data is not None
    for before, after in step.pieces:
        copies = before.extra.get("copies", {})
        if line.number in copies:  # an event_msg copy: kept only while what it copies is there, unchanged
            key = copies[line.number]
            if after is not None and key in message_keys(after.data) and (key[0] != "output" or not changed(before, after)):
                yield line.to_bytes()
        elif data.get("type") == "compacted":
            if after is None:
                continue
            text = after.data.get("content")
            if text == data["payload"].get("message") or not isinstance(text, str):
                yield line.to_bytes()
            else:
                yield {**data, "payload": {**data["payload"], "message": text}}
        else:
            items = rebuilt_items(line.number, data["payload"], before, after)
            if items is None:
                yield line.to_bytes()
            else:
                for item in items:
                    yield {**data, "payload": item}


CODEC = Codex()
