"""Gemini CLI ``--output-format stream-json`` logs: one event per line.

What gemini-cli (0.11) writes, key order as emitted: ``init`` first
(``session_id``, ``model``); a ``message`` of role ``user`` holding the
prompt; the model's reply as ``message`` lines of role ``assistant`` with
``"delta": true``, chunks to be concatenated; ``tool_use`` (``tool_name``,
``tool_id``, ``parameters``) and ``tool_result`` (``tool_id``, ``status``,
``output`` and/or ``error: {type, message}``) referring back by ``tool_id``;
``error`` events; ``result`` (``status``, ``stats``) last.

How events become canonical messages:

* A user ``message`` is a user message. User text compact wrote (``CUCA ...``,
  ``[compact: ...``) reads back as a system message, so a rerun recognises
  its own summaries.
* The model's side of one response, its ``message`` chunks and the
  ``tool_use`` events with them (parallel calls), up to the next
  ``tool_result``, user message or other event, is one assistant message:
  the chunks' text, and one call per ``tool_use`` (id ``tool_id``, arguments
  the JSON of ``parameters``).
* A ``tool_result`` is a ``tool`` message answering ``tool_id``: its
  ``output``, or the error's ``message`` when the tool failed, or ``""``
  (``replace`` and ``write_file`` report no output; ``read_file`` reports
  ``""``: the stream carries the tool's display text, not what the model
  read — the saved chat has that).
* ``init``, ``result``, ``error`` and unknown fields pass through in place.

Writing back, untouched lines are copied; a rewritten reply puts its whole
text on its first chunk line and drops the other chunks; a rewritten result
gets the new text as its ``output`` (or its error's ``message``); a removed
call takes its ``tool_use`` line. What compact adds is a user ``message``
line with the timestamp of the line it is placed before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from core.formats.anthropic import COMPACT_PREFIXES
from core.formats.base import (
    EMPTY_LEFT_OUT,
    PARENT_RESULTS,
    Codec,
    Decoded,
    Item,
    Line,
    Losses,
    Rebuild,
    line_error,
    now_stamp,
    origin_message,
    says_nothing,
    write_back,
)
from core.messages import FAILED, Message, custom_arguments, result_ids, tool_calls

EVENTS = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
# Keys of other formats' lines (Claude Code, Codex, pi, Responses calls): a line holding one is not an event.
FOREIGN_KEYS = frozenset({"payload", "uuid", "parentUuid", "sessionId", "call_id", "messages", "conversations"})


# --- shared with the saved chat (core.formats.gemini_chat) ---------------------------------------

def user_role(text: str) -> str:
    """User text compact wrote reads as a system message; everything else typed is a user message."""
    return "system" if text.startswith(COMPACT_PREFIXES) else "user"


def plain_text(content: Any) -> str:
    """Canonical content as the single string Gemini CLI stores: its text parts, a paragraph each.

    Only ``text`` parts: thinking or a reasoning summary would become the reply the model
    showed (:func:`not_carried` counts them as left out)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n\n".join(part if isinstance(part, str) else part["text"] for part in content
                        if isinstance(part, str) or isinstance(part, dict) and part.get("type") == "text"
                        and isinstance(part.get("text"), str))


def call_of(call_id: str, name: Any, arguments: Any) -> dict[str, Any]:
    """A canonical tool call from Gemini's ``{name, args}``: the arguments as a JSON string."""
    return {"id": call_id, "type": "function",
            "function": {"name": name if isinstance(name, str) else "", "arguments": orjson.dumps(arguments or {}).decode()}}


def arguments_of(call: Any) -> Any:
    """A canonical call's arguments as the object Gemini stores (a string that is not JSON is kept under ``input``)."""
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    free_form = custom_arguments(call) if isinstance(call, dict) else None
    if free_form is not None:
        return free_form
    if not isinstance(arguments, str):
        return arguments if isinstance(arguments, dict) else {}
    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {"input": arguments}
    return parsed if isinstance(parsed, dict) else {"input": parsed}


def call_name(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def not_carried(message: Message, losses: Losses) -> None:
    """Count the parts of ``message`` a Gemini CLI log keeps no place for (it stores text only)."""
    content = message.data.get("content")
    if isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text":
                losses.add(f"{kind or 'non-text'} parts (Gemini CLI logs keep text only)")


# --- the codec -----------------------------------------------------------------------------------

class _Reader:
    """Events in file order -> canonical messages."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.messages: list[Message] = []
        self._reply: dict[str, Any] | None = None

    def add(self, line: Line, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message" and data.get("role") == "assistant":
            reply = self._in_reply(line, ("text",))
            reply["chunks"].append(data["content"])
        elif kind == "tool_use":
            reply = self._in_reply(line, ("call", data["tool_id"]))
            reply["calls"].append(call_of(data["tool_id"], data.get("tool_name"), data.get("parameters")))
        elif kind == "message":
            self.flush()
            text = data["content"]
            self.messages.append(origin_message({"role": user_role(text), "content": text}, [line.number]))
        elif kind == "tool_result":
            self.flush()
            failed = {FAILED: True} if data.get("status") == "error" else {}
            self.messages.append(origin_message({"role": "tool", "tool_call_id": data["tool_id"],
                                                 "content": result_text(data)}, [line.number], **failed))
        else:
            self.flush()  # init, result, error: not part of the conversation

    def _in_reply(self, line: Line, slot: tuple[str, ...]) -> dict[str, Any]:
        """The reply being read (a new one if none is), with ``line`` added to it as ``slot``."""
        if self._reply is None:
            self._reply = {"lines": [], "layout": {}, "chunks": [], "calls": []}
        self._reply["lines"].append(line.number)
        self._reply["layout"][line.number] = slot
        return self._reply

    def flush(self) -> None:
        reply, self._reply = self._reply, None
        if reply is None:
            return
        text = "".join(reply["chunks"])
        data: dict[str, Any] = {"role": "assistant", "content": text}
        if reply["calls"]:
            data = {"role": "assistant", "content": text or None, "tool_calls": reply["calls"]}
        self.messages.append(origin_message(data, reply["lines"], layout=reply["layout"]))

    def finish(self) -> list[Message]:
        self.flush()
        return self.messages


def result_text(data: dict[str, Any]) -> str:
    output = data.get("output")
    if isinstance(output, str):
        return output
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return ""


def _check(path: str, line: Line, data: dict[str, Any]) -> None:
    kind = data.get("type")
    fix = "fix or remove the line, or --skip-invalid to leave it out"
    if kind == "message" and (data.get("role") not in ("user", "assistant") or not isinstance(data.get("content"), str)):
        raise line_error(path, line, "a Gemini stream-json message needs role user or assistant and string content", fix)
    if kind in ("tool_use", "tool_result") and not isinstance(data.get("tool_id"), str):
        raise line_error(path, line, f"a Gemini stream-json {kind} event needs a tool_id string", fix)


class GeminiStream(Codec):
    name = "gemini-stream"
    title = "Gemini CLI stream-json log"

    def accepts(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        if kind not in EVENTS or not FOREIGN_KEYS.isdisjoint(data):
            return False
        if kind == "message":
            return data.get("role") in ("user", "assistant") and isinstance(data.get("content"), str)
        if kind in ("tool_use", "tool_result"):
            return isinstance(data.get("tool_id"), str)
        return True

    def evidence(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        return (
            kind == "init" and "session_id" in data
            or kind == "tool_use" and "tool_name" in data
            or kind == "tool_result" and "status" in data
            or kind == "result" and "stats" in data
            or kind == "message" and (data.get("delta") is True or "timestamp" in data)
        )

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        reader = _Reader(path)
        for line in lines:
            data = line.data
            if data is None:
                continue
            if not isinstance(data.get("type"), str):
                raise line_error(path, line, "a Gemini stream-json line needs a type",
                                 fix="fix or remove the line, or pass --from to read the file as another format")
            _check(path, line, data)
            reader.add(line, data)
        return reader.finish()

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        yield from write_back(decoded, result, rebuild=_rebuilt, insert=lambda message, near: _stamped_events(
            render_message(message, Losses()), near()))

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        stamp = now_stamp()
        yield {"type": "init", "timestamp": stamp, "session_id": str(uuid.uuid4()), "model": ""}
        in_reply = False  # was the last event written part of a model reply?
        for message in messages:
            events = render_message(message, losses)
            if events and in_reply and _of_reply(events[0]):
                losses.add("assistant messages in a row (a stream reads them back as one reply)")
            for data in events:
                yield _stamped(data, stamp)
            if events:
                in_reply = _of_reply(events[-1])


def _stamped_events(events: list[dict[str, Any]], stamp: Any) -> list[dict[str, Any]]:
    return [_stamped(event, stamp) for event in events]


def _stamped(event: dict[str, Any], stamp: Any) -> dict[str, Any]:
    """An event with its timestamp after its type, as gemini-cli writes them."""
    return {"type": event["type"], "timestamp": stamp, **{k: v for k, v in event.items() if k != "type"}}


def _of_reply(event: dict[str, Any]) -> bool:
    return event["type"] == "tool_use" or event["type"] == "message" and event.get("role") == "assistant"


def render_message(message: Message, losses: Losses) -> list[dict[str, Any]]:
    """A canonical message as stream events (without timestamps)."""
    data = message.data
    role = data.get("role")
    not_carried(message, losses)
    text = plain_text(data.get("content"))
    if role == "tool":
        ids = result_ids(data)
        if not ids:
            losses.add(PARENT_RESULTS)
        if message.extra.get(FAILED):  # the type of the failure is not known here
            return [{"type": "tool_result", "tool_id": i, "status": "error", "error": {"type": "unknown", "message": text}}
                    for i in ids]
        return [{"type": "tool_result", "tool_id": i, "status": "success", "output": text} for i in ids]
    if role == "assistant":
        events: list[dict[str, Any]] = []
        if text:
            events.append({"type": "message", "role": "assistant", "content": text, "delta": True})
        for call in tool_calls(data):
            events.append({"type": "tool_use", "tool_name": call_name(call), "tool_id": str(call.get("id")),
                           "parameters": arguments_of(call)})
        if not events and says_nothing(data):
            losses.add(EMPTY_LEFT_OUT)
        return events
    if role not in ("user", "system", "developer"):
        losses.add(f"{role or 'role-less'} messages")
        return []
    if role != "user" and not text.startswith(COMPACT_PREFIXES):
        losses.add("system messages (written as user text)")
    return [{"type": "message", "role": "user", "content": text}]


def _rebuilt(step: Rebuild) -> Iterator[dict[str, Any] | bytes]:
    line, data = step.line, step.line.data
    assert data is not None
    (before, after), = step.pieces  # one message per line
    if after is None:
        return
    kind = data.get("type")
    layout = before.extra.get("layout", {}).get(line.number)
    if layout is None:  # a user message or a tool result
        text = plain_text(after.data.get("content"))
        if kind == "tool_result":
            yield line.to_bytes() if text == result_text(data) else _with_result(data, text)
        else:
            yield line.to_bytes() if text == data.get("content") else {**data, "content": text}
        return
    new_text = plain_text(after.data.get("content"))
    first = line.number == before.extra["origin"][0]
    if first and new_text and not any(slot[0] == "text" for slot in before.extra["layout"].values()):
        yield {"type": "message", "timestamp": data.get("timestamp"), "role": "assistant", "content": new_text, "delta": True}
    if layout[0] == "text":
        if new_text == plain_text(before.data.get("content")):
            yield line.to_bytes()
        elif new_text and line.number == next(n for n, slot in before.extra["layout"].items() if slot[0] == "text"):
            yield {**data, "content": new_text}
        return
    call = next((c for c in tool_calls(after.data) if str(c.get("id")) == layout[1]), None)
    if call is None:
        return
    if call == next((c for c in tool_calls(before.data) if str(c.get("id")) == layout[1]), None):
        yield line.to_bytes()
    else:
        yield {**data, "tool_name": call_name(call), "parameters": arguments_of(call)}


def _with_result(data: dict[str, Any], text: str) -> dict[str, Any]:
    error = data.get("error")
    if "output" not in data and isinstance(error, dict):
        return {**data, "error": {**error, "message": text}}
    return {**data, "output": text}


CODEC = GeminiStream()
