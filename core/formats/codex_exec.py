"""Codex ``codex exec --json`` event streams: one event per line, what a headless Codex run prints.

The events (openai/codex ``codex-rs/exec/src/exec_events.rs``; checked against runs recorded by
the litehive orchestrator in the heru 2.1.1 sdist): ``thread.started`` {thread_id},
``turn.started``, ``item.started`` / ``item.updated`` / ``item.completed`` {item: {id, type, ...}},
``turn.completed`` {usage}, ``turn.failed`` {error}, ``error`` {message}. An item is printed when it
starts and again, whole, when it completes (an agent message or a file change may be printed only
completed); its latest version is what it is.

How items become canonical messages (:mod:`core.formats.codex_exec_items` says item by item):

* The model's side of one response, its ``reasoning`` (thinking parts), ``agent_message`` (text
  parts) and the calls started with them, up to the first call's completion or a line that is not
  an item, is one assistant message. Parallel commands are started together and complete later.
* A call is counted at the line where its item starts, its result at the line where it completes.
  An item only started (a run cut off) is a call without a result: an orphan, as the report says.
  A to-do list is answered where it is issued ("Plan updated", as Codex's ``update_plan`` answers):
  it completes only when the turn ends.
* ``thread.started``, ``turn.*``, ``error`` events, ``error`` items and items of other types
  pass through in place, unread.
* An agent message compact wrote (``CUCA ...``, ``[compact: ...``) reads back as a system message.

Writing back, untouched lines are copied; a rewritten item has its completed line rebuilt (new
text, output, or arguments, its other fields kept) and its started and updated lines rebuilt
with the same arguments, or dropped when they held only earlier text; a removed item's lines go.
What compact adds is an ``item.completed`` agent message whose id (``compact_N``) no item of the
file has.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.formats.anthropic import COMPACT_PREFIXES
from core.formats.base import (
    Codec,
    Decoded,
    Item,
    Line,
    Losses,
    Rebuild,
    line_error,
    origin_message,
    write_back,
)
from core.formats.codex_exec_items import (
    ANSWERED_AT_ONCE,
    CALL_ITEMS,
    TEXT_ITEMS,
    call_of,
    item_problem,
    render_message,
    result_of,
    with_call,
    with_result,
)
from core.formats.gemini_stream import plain_text
from core.messages import FAILED, Message, tool_calls

ITEM_EVENTS = frozenset({"item.started", "item.updated", "item.completed"})
EVENTS = ITEM_EVENTS | {"thread.started", "turn.started", "turn.completed", "turn.failed", "error",
                        "item.plan.delta", "request_user_input"}
# Keys of other formats' lines (Claude Code, Codex rollouts, pi, Gemini, Responses calls): a line holding one is not an event.
FOREIGN_KEYS = frozenset({"payload", "uuid", "parentUuid", "sessionId", "session_id", "call_id", "role",
                          "messages", "conversations", "timestamp"})
FIX = "fix or remove the line, or --skip-invalid to leave it out"


@dataclass
class _Item:
    """One item's lines, from its start to its completion, and its latest version."""

    lines: list[int] = field(default_factory=list)
    latest: dict[str, Any] = field(default_factory=dict)
    completed: int | None = None


def _items(lines: list[Line], path: str) -> dict[int, _Item]:
    """Each item line's item. An id seen again after its item completed starts a new item
    (two runs written to one file count their ids from item_0 each)."""
    open_items: dict[str, _Item] = {}
    found: dict[int, _Item] = {}
    for line in lines:
        data = line.data
        if data is None or data.get("type") not in ITEM_EVENTS:
            continue
        problem = item_problem(data.get("item"))
        if problem:
            raise line_error(path, line, f"a Codex exec {data['type']} {problem}", FIX)
        item = data["item"]
        current = open_items.get(item["id"])
        if current is None or current.latest.get("type") != item["type"]:
            current = open_items[item["id"]] = _Item()
        current.lines.append(line.number)
        current.latest = item
        if data["type"] == "item.completed":
            current.completed = line.number
            del open_items[item["id"]]
        found[line.number] = current
    return found


class _Reader:
    """Stream lines in file order -> canonical messages."""

    def __init__(self, items: dict[int, _Item]) -> None:
        self.items = items
        self.messages: list[Message] = []
        self._reply: dict[str, Any] | None = None

    def add(self, line: Line) -> None:
        item = self.items.get(line.number)
        if item is None:
            if line.data is not None and line.data.get("type") not in ITEM_EVENTS:
                self.flush()  # a turn or the thread starts or ends: the reply is over
            return
        kind = item.latest["type"]
        if line.number == item.lines[0]:
            self._begin(item, kind)
        if line.number == item.completed and kind in CALL_ITEMS and kind not in ANSWERED_AT_ONCE:
            self.flush()
            self._answer(item, [line.number])

    def _begin(self, item: _Item, kind: str) -> None:
        latest = item.latest
        if kind in TEXT_ITEMS and latest["text"].startswith(COMPACT_PREFIXES):
            self.flush()  # compact's own summary or note
            self.messages.append(origin_message({"role": "system", "content": latest["text"]}, item.lines))
        elif kind in TEXT_ITEMS or kind == "reasoning":
            part = {"type": "text", "text": latest["text"]} if kind in TEXT_ITEMS else {
                "type": "thinking", "thinking": latest["text"]}
            reply = self._in_reply(item, ("part", len(self._parts())))
            reply["parts"].append(part)
        elif kind in CALL_ITEMS:
            reply = self._in_reply(item, ("call", latest["id"]))
            reply["calls"].append(call_of(latest))
            if kind in ANSWERED_AT_ONCE:
                self.flush()
                self._answer(item, item.lines[:1])

    def _parts(self) -> list[Any]:
        return self._reply["parts"] if self._reply is not None else []

    def _in_reply(self, item: _Item, slot: tuple[str, Any]) -> dict[str, Any]:
        """The reply being read (a new one if none is), with the item's lines added to it as ``slot``."""
        if self._reply is None:
            self._reply = {"layout": {}, "parts": [], "calls": []}
        for number in item.lines:
            self._reply["layout"][number] = slot
        return self._reply

    def _answer(self, item: _Item, lines: list[int]) -> None:
        text, failed = result_of(item.latest)
        self.messages.append(origin_message({"role": "tool", "tool_call_id": item.latest["id"], "content": text},
                                            lines, **({FAILED: True} if failed else {})))

    def flush(self) -> None:
        reply, self._reply = self._reply, None
        if reply is None:
            return
        parts = reply["parts"]
        content: Any = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts or None
        data: dict[str, Any] = {"role": "assistant", "content": content}
        if reply["calls"]:
            data["tool_calls"] = reply["calls"]
        self.messages.append(origin_message(data, sorted(reply["layout"]), layout=reply["layout"]))

    def finish(self) -> list[Message]:
        self.flush()
        return self.messages


class CodexExec(Codec):
    name = "codex-exec"
    title = "Codex exec event stream"

    def accepts(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        if kind not in EVENTS or not FOREIGN_KEYS.isdisjoint(data):
            return False
        if kind in ITEM_EVENTS:
            return isinstance(data.get("item"), dict)
        return kind != "error" or isinstance(data.get("message"), str)

    def evidence(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        return (
            kind == "thread.started" and isinstance(data.get("thread_id"), str)
            or kind in ITEM_EVENTS and item_problem(data.get("item")) is None
            or kind == "turn.completed" and isinstance(data.get("usage"), dict)
            or kind == "turn.failed" and isinstance(data.get("error"), dict)
        )

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        for line in lines:
            if line.data is not None and not isinstance(line.data.get("type"), str):
                raise line_error(path, line, "a Codex exec event needs a type",
                                 fix="fix or remove the line, or pass --from to read the file as another format")
        reader = _Reader(_items(lines, path))
        for line in lines:
            reader.add(line)
        return reader.finish()

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        taken = {line.data["item"].get("id") for line in decoded.lines
                 if line.data is not None and isinstance(line.data.get("item"), dict)}
        ids = _fresh_ids(taken)
        yield from write_back(decoded, result, rebuild=_rebuilt,
                              insert=lambda message, _: [_added(message, next(ids))])

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        yield {"type": "thread.started", "thread_id": str(uuid.uuid4())}
        yield {"type": "turn.started"}
        pending: dict[str, dict[str, Any]] = {}  # started calls by id, waiting for their results
        ids = _fresh_ids(set())
        for message in messages:
            yield from render_message(message, pending, ids, losses)


def _fresh_ids(taken: set[Any]) -> Iterator[str]:
    """compact_1, compact_2, ...: ids of compact's items, none of them one the file has."""
    number = 0
    while True:
        number += 1
        if f"compact_{number}" not in taken:
            yield f"compact_{number}"


def _added(message: Message, item_id: str) -> dict[str, Any]:
    return {"type": "item.completed", "item": {"id": item_id, "type": "agent_message",
                                               "text": plain_text(message.data.get("content"))}}


# --- writing a changed line back -----------------------------------------------------------------

def _rebuilt(step: Rebuild) -> Iterator[Item]:
    line, data = step.line, step.line.data
    assert data is not None
    item = data["item"]
    new_item = dict(item)
    for before, after in step.pieces:
        if after is None and before.data["role"] != "tool":
            return  # the reply or compact's note this line belongs to went
        if before.data["role"] == "system":
            new_item["text"] = plain_text(after.data.get("content")) if after is not None else ""
        elif before.data["role"] == "tool":
            if after is not None and after.data != before.data:
                new_item = with_result(new_item, plain_text(after.data.get("content")))
        else:
            assert after is not None
            changed = _reply_line(line, before, after, new_item)
            if changed is None:
                return
            new_item = changed
    if new_item == item:
        yield line.to_bytes()
    elif data["type"] == "item.completed" or new_item.get("type") not in ("agent_message", "plan", "reasoning"):
        yield {**data, "item": new_item}
    # (a text item's earlier versions go when its text was rewritten: they hold part of the old text)


def _reply_line(line: Line, before: Message, after: Message, item: dict[str, Any]) -> dict[str, Any] | None:
    """The item of ``line`` as the rewritten reply has it, or None when the reply no longer holds it."""
    slot = before.extra["layout"][line.number]
    if slot[0] == "call":
        call = next((c for c in tool_calls(after.data) if str(c.get("id")) == slot[1]), None)
        if call is None:
            return None
        old = next(c for c in tool_calls(before.data) if str(c.get("id")) == slot[1])
        return item if call == old else with_call(item, call)
    kind = "text" if item["type"] != "reasoning" else "thinking"
    old_parts = _parts(before.data.get("content"))
    nth = sum(1 for p in old_parts[: slot[1]] if p["type"] == kind)
    new_parts = [p for p in _parts(after.data.get("content")) if p["type"] == kind]
    if len(new_parts) == sum(1 for p in old_parts if p["type"] == kind):
        text = new_parts[nth][kind]
        if text == [p for p in old_parts if p["type"] == kind][nth][kind]:
            return item  # (a started line holds an earlier version of the same text)
    elif kind == "text" and nth == 0 and new_parts:  # parts merged: the first text item holds them all
        text = "\n\n".join(p["text"] for p in new_parts)
    else:
        return None
    return item if text == item["text"] else {**item, "text": text}


def _parts(content: Any) -> list[dict[str, Any]]:
    """Text and thinking parts of canonical content, in order (a string is one text part)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and (p.get("type") == "text" and isinstance(p.get("text"), str)
                                                           or p.get("type") == "thinking")]


CODEC = CodexExec()
