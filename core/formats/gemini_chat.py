"""Gemini CLI's saved chat (``~/.gemini/tmp/<project hash>/chats/session-*.json``): one JSON document.

``{sessionId, projectHash, startTime, lastUpdated, messages: [...]}``, written
by gemini-cli (0.11 to 0.2x) with ``JSON.stringify(conversation, null, 2)``
and no newline at the end. core.formats reads a file whose first line is a
lone ``{`` as one document (a single "line" holding it all); each message
record is counted at the line of the file where it starts, so reports and
``--keep line:N`` point into the file.

How records become canonical messages, as Gemini CLI rebuilds the model's
history on ``--resume``:

* ``type: "user"``: a user message holding ``content`` (a string, or parts
  whose texts are joined). User text compact wrote reads as a system message.
* ``type: "gemini"``: an assistant message holding ``content`` and one call
  per ``toolCalls`` entry (id ``id``, arguments the JSON of ``args``); each
  call's ``result`` (``[{functionResponse: {id, name, response: {output} or
  {error}}}]``, the text the model saw) is a ``tool`` message answering it.
  ``thoughts``, ``tokens``, ``model`` and the display fields are kept with
  their record, not counted (Gemini CLI does not send them back).
* ``info``, ``error``, ``warning`` and unknown records pass through in place.

Writing back: an untouched document is copied byte for byte; otherwise it is
written as gemini-cli writes it, records compact did not touch keeping every
field. A removed call leaves its record's ``toolCalls``; a rewritten result
replaces the call's ``result`` (and its ``resultDisplay``, a copy of the
output shown on resume) with the new text; a record whose reply and results
are all removed goes, its thoughts with it. What compact adds is a ``user``
record.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from core.formats.base import Codec, Decoded, Line, Losses, changed, line_error, match, now_stamp
from core.formats.gemini_stream import (
    arguments_of,
    call_name,
    call_of,
    not_carried,
    plain_text,
    user_role,
)
from core.messages import FAILED, Message, is_summary, result_ids, tool_calls

MESSAGE_TYPES = ("user", "gemini")
DOCUMENT_KEYS = ("sessionId", "projectHash", "startTime", "lastUpdated")


# --- reading -------------------------------------------------------------------------------------

def content_text(content: Any) -> str:
    """A record's ``content`` as the text Gemini CLI sends back (``partListUnionToString``, text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def result_text(result: Any) -> str:
    """What the model saw of a tool call: the ``output`` (or ``error``) of each functionResponse, and text parts."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        result = [result]
    pieces: list[str] = []
    for part in result if isinstance(result, list) else ():
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse")
        if isinstance(response, dict):
            payload = response.get("response")
            text = next((payload[k] for k in ("output", "error") if isinstance(payload, dict)
                         and isinstance(payload.get(k), str)), None)
            if text is None and payload is not None:
                text = orjson.dumps(payload).decode()
            if text is not None:
                pieces.append(text)
        elif isinstance(part.get("text"), str):
            pieces.append(part["text"])
    return "\n".join(pieces)


def record_lines(source: bytes | memoryview, count: int, first: int) -> list[int]:
    """The line of the file where each of ``count`` message records starts (``first`` for all when not pretty-printed).

    JSON.stringify(…, null, 2) puts each record's opening brace alone on a
    line indented by four spaces, inside the two-space-indented messages array.
    """
    found: list[int] = []
    inside = False
    for number, text in enumerate(bytes(source).split(b"\n"), start=first):
        text = text.rstrip(b"\r")
        if not inside:
            inside = text == b'  "messages": ['
        elif text == b"    {":
            found.append(number)
        elif text.startswith(b"  ]"):
            break
    return found if len(found) == count else [first] * count


def _message(data: dict[str, Any], line: Line, at: int, record: int, slot: tuple[Any, ...]) -> Message:
    return Message(data=data, line=at, source=None, extra={"origin": (line.number,), "record": record, "slot": slot})


def decode_record(path: str, line: Line, index: int, record: Any, at: int, label: str | None = None) -> list[Message]:
    """The canonical messages of one record (``index`` in the history); ``label`` names it in errors."""
    label = label or f"messages[{index}] of this Gemini CLI chat"
    if not isinstance(record, dict):
        raise line_error(path, line, f"{label} is not an object")
    kind = record.get("type")
    if kind == "user":
        text = content_text(record.get("content"))
        return [_message({"role": user_role(text), "content": text}, line, at, index, ("user",))]
    if kind != "gemini":
        return []  # info, error, warning: shown by the UI, never sent to the model
    calls = record.get("toolCalls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in calls):
        raise line_error(path, line, f"the toolCalls of {label} must be a list of calls, each with an id string",
                         fix="fix the record, or pass --from to read the file as another format")
    text = content_text(record.get("content"))
    data: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        data = {"role": "assistant", "content": text or None,
                "tool_calls": [call_of(c["id"], c.get("name"), c.get("args")) for c in calls]}
    out = [_message(data, line, at, index, ("reply",))]
    for position, call in enumerate(calls):
        if call.get("result") is not None:  # a call cut off before it ran has none: an orphan call
            result = {"role": "tool", "tool_call_id": call["id"], "content": result_text(call["result"])}
            out.append(_message(result, line, at, index, ("result", position)))
            if call.get("status") == "error":
                out[-1].extra[FAILED] = True
    return out


# --- writing back --------------------------------------------------------------------------------

def _with_text(result: Any, text: str) -> Any:
    """A call's ``result`` holding ``text`` instead, in the shape it had."""
    if isinstance(result, str):
        return text
    parts = [result] if isinstance(result, dict) else result if isinstance(result, list) else []
    for part in parts:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            payload = response.get("response")
            key = "error" if isinstance(payload, dict) and "error" in payload and "output" not in payload else "output"
            return [{**part, "functionResponse": {**response, "response": {key: text}}}]
    return [{"text": text}]


def _rebuilt_call(call: dict[str, Any], before: Message, after: Message, result: tuple[Message, Message | None] | None,
                  ) -> dict[str, Any] | None:
    """A toolCalls entry after compaction, or None when its call was removed."""
    new = next((c for c in tool_calls(after.data) if str(c.get("id")) == call["id"]), None)
    if new is None:
        return None
    out = call
    old = next((c for c in tool_calls(before.data) if str(c.get("id")) == call["id"]), None)
    if new != old:
        out = {**out, "name": call_name(new), "args": arguments_of(new)}
    if result is not None:
        was, now = result
        if now is None:
            out = {k: v for k, v in out.items() if k != "result"}
        elif changed(was, now) and plain_text(now.data.get("content")) != plain_text(was.data.get("content")):
            text = plain_text(now.data.get("content"))
            out = {**out, "result": _with_text(call.get("result"), text)}
            if "resultDisplay" in out:
                out["resultDisplay"] = text
    return out


def rebuilt_record(record: dict[str, Any], pieces: list[tuple[Message, Message | None]]) -> dict[str, Any] | None:
    """A message record after compaction, or None when every message made from it was removed."""
    if all(after is None for _, after in pieces):
        return None
    if not any(changed(before, after) for before, after in pieces):
        return record
    by_slot = {before.extra["slot"]: (before, after) for before, after in pieces}
    if record.get("type") == "user":
        before, after = by_slot[("user",)]
        assert after is not None
        text = plain_text(after.data.get("content"))
        return record if text == plain_text(before.data.get("content")) else {**record, "content": text}
    before, after = by_slot[("reply",)]
    out = dict(record)
    if after is None:  # the reply went but a result stayed (never by compaction: pairing keeps them together)
        after = before
    text = plain_text(after.data.get("content"))
    if text != plain_text(before.data.get("content")):
        out["content"] = text
    if isinstance(record.get("toolCalls"), list):
        calls = (_rebuilt_call(call, before, after, by_slot.get(("result", i))) for i, call in enumerate(record["toolCalls"]))
        out["toolCalls"] = [c for c in calls if c is not None]
    return out


_NAMESPACE = uuid.UUID("0b6c2f43-5d1e-4a8f-9e27-3c4d5b6a7f80")


def added_records(messages: Iterable[Message], stamp: Any, losses: Losses, anchor: Any) -> list[dict[str, Any]]:
    """Records for what compact added (summaries, warnings, the graph): user text. Their ids are made
    from ``anchor`` (the id of the record they go before, or after at the end), their place and their
    text, so that one input compacted twice is written the same."""
    records = [record for message in messages for record in render_records([message], losses, stamp)]
    for position, record in enumerate(records):
        record["id"] = str(uuid.uuid5(_NAMESPACE, repr((anchor, position, stamp, record.get("content")))))
    return records


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # (a pair parsed from JSON is one character)


def document_bytes(document: dict[str, Any], newline: bool = False) -> bytes:
    """The document as gemini-cli writes it: ``JSON.stringify(document, null, 2)``."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    # A lone surrogate (half an emoji) has no UTF-8 form: JSON.stringify escapes it, and so do we.
    text = _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    return text.encode("utf-8") + (b"\n" if newline else b"")


# --- writing fresh (--to gemini-chat) ------------------------------------------------------------

def render_records(messages: Sequence[Message], losses: Losses, stamp: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    waiting: dict[str, dict[str, Any]] = {}  # call id -> its toolCalls entry, until its result comes
    for message in messages:
        data = message.data
        role = data.get("role")
        not_carried(message, losses)
        text = plain_text(data.get("content"))
        if role == "tool":
            call_ids: list[str | None] = [*result_ids(data)] or [None]
            for call_id in call_ids:
                entry = waiting.pop(str(call_id), None) if call_id is not None else None
                if entry is None:
                    losses.add("tool results without their call (a saved chat keeps a result inside its call)")
                    continue
                key = "error" if message.extra.get(FAILED) else "output"
                entry["result"] = [{"functionResponse": {"id": entry["id"], "name": entry["name"],
                                                         "response": {key: text}}}]
                if key == "error":
                    entry["status"] = "error"
            continue
        record: dict[str, Any] = {"id": str(uuid.uuid4()), "timestamp": stamp}
        if role == "assistant":
            record.update(type="gemini", content=text)
            calls = [{"id": str(c.get("id")), "name": call_name(c), "args": arguments_of(c), "status": "success",
                      "timestamp": stamp} for c in tool_calls(data)]
            if calls:
                record["toolCalls"] = calls
                waiting.update((c["id"], c) for c in calls)
        elif role in ("user", "system", "developer"):
            if role != "user" and not is_summary(message) and user_role(text) == "user":
                losses.add("system messages (written as user text)")
            record.update(type="user", content=text)
        else:
            losses.add(f"{role or 'role-less'} messages")
            continue
        records.append(record)
    return records


class GeminiChat(Codec):
    name = "gemini-chat"
    title = "Gemini CLI saved chat"
    whole_document = True

    def accepts(self, data: dict[str, Any]) -> bool:
        messages = data.get("messages")
        return ("sessionId" in data and "role" not in data and isinstance(messages, list)
                and all(isinstance(m, dict) and "type" in m for m in messages))

    def evidence(self, data: dict[str, Any]) -> bool:
        return self.accepts(data) and ("projectHash" in data or any(m.get("type") in MESSAGE_TYPES for m in data["messages"]))

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        documents = [line for line in lines if line.data is not None]
        if len(documents) != 1:
            raise line_error(path, documents[1] if documents else lines[0],
                             "a Gemini CLI saved chat is one JSON document, and this file holds more",
                             fix="pass one session-*.json file, or --from to read the file as another format")
        line = documents[0]
        data = line.data
        assert data is not None
        if not self.accepts(data):
            raise line_error(path, line, "this is not a Gemini CLI saved chat (it needs sessionId and messages records)",
                             fix="pass --from to read the file as another format")
        records = data["messages"]
        starts = record_lines(line.source, len(records), line.number)
        return [m for index, record in enumerate(records) for m in decode_record(path, line, index, record, starts[index])]

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[bytes]:
        line = next(line for line in decoded.lines if line.data is not None)
        document = line.data
        assert document is not None
        originals = decoded.messages
        outcome, added_before, waiting = match(originals, result, "slot", lambda before: before.extra["record"])
        if not added_before and not waiting and not any(
                changed(before, outcome.get(key)) for key, before in enumerate(originals)):
            yield line.to_bytes()
            return
        pieces_of: dict[int, list[tuple[Message, Message | None]]] = {}
        for key, before in enumerate(originals):
            pieces_of.setdefault(before.extra["record"], []).append((before, outcome.get(key)))
        records: list[dict[str, Any]] = []
        for index, record in enumerate(document["messages"]):
            records.extend(added_records(added_before.pop(index, ()), record.get("timestamp"), Losses(), record.get("id")))
            pieces = pieces_of.get(index)
            rebuilt = record if pieces is None else rebuilt_record(record, pieces)
            if rebuilt is not None:
                records.append(rebuilt)
        last = records[-1].get("timestamp") if records else now_stamp()
        records.extend(added_records(waiting, last, Losses(), ("end", records[-1].get("id") if records else None)))
        # Written as Gemini CLI writes it: no BOM (its JSON.parse refuses one), LF line ends.
        yield document_bytes({**document, "messages": records}, newline=line.to_bytes().endswith(b"\n"))

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[bytes]:  # type: ignore[override]
        stamp = now_stamp()
        document = {"sessionId": str(uuid.uuid4()), "projectHash": "", "startTime": stamp, "lastUpdated": stamp,
                    "messages": render_records(messages, losses, stamp)}
        yield document_bytes(document)

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        document = next((line.data for line in decoded.lines if line.data is not None), None) or {}
        records = [r for r in document.get("messages") or () if isinstance(r, dict)]
        other = sum(1 for r in records if r.get("type") not in MESSAGE_TYPES)
        thoughts = sum(len(r["thoughts"]) for r in records if isinstance(r.get("thoughts"), list))
        return [(f"{self.title} records that are not messages (info, error, warning)", other),
                ("Gemini thought summaries", thoughts)]

    def serialise(self, items: Iterable[Any]) -> Iterator[bytes]:
        """One document, not lines: written as it is (no newline added)."""
        for item in items:
            yield item if isinstance(item, bytes) else document_bytes(item)


CODEC = GeminiChat()
