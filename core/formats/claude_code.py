"""Claude Code session logs (``~/.claude/projects/<cwd>/<session>.jsonl``).

One event per line, discriminated by ``type``. ``user`` and ``assistant``
lines carry an Anthropic message (``message``) and are read with the block
conversion of :mod:`core.formats.anthropic`; every other line
(``file-history-snapshot``, ``system``, ``queue-operation``, ``summary``, ...)
passes through in place untouched.

Reading:

* An API reply is written one block per line, the lines sharing
  ``message.id``: they make one canonical assistant message (its
  ``extra["blocks"]`` lists ``(line, block index)`` of each block).
* A user line splits like an Anthropic user message (each ``tool_result`` its
  own ``tool`` message). All user-role text is a user message and starts a
  turn, ``isMeta`` hook feedback and ``<command-name>``/``<system-reminder>``
  harness text included: the model reads it as the user's and answers it.
* An earlier compaction (``isCompactSummary``, or text starting "This session
  is being continued from a previous conversation") is a summary.
* A result whose ``tool_use_id`` has no call in this file, on a sidechain
  line or one whose ``parentUuid`` chain leaves the file (its call lives in
  the parent session), has no ``tool_call_id`` in its canonical message (the
  id is kept in ``extra["native_id"]``): it is neither an orphan nor dropped
  by ``--repair``. Without either sign it is a true orphan.

Writing back: untouched lines are copied. A rewritten result is written in
place and its line's ``toolUseResult`` (the duplicate copy of the output) is
replaced by the placeholder text (removed when the new content is not a
string); a removed message takes its lines with it, and every line whose
``parentUuid`` named a removed line is re-pointed to the nearest surviving
ancestor (a parent outside the file stays as it was). A summary compact adds
is a ``user`` line with ``isCompactSummary: true`` (other additions
``isMeta: true``), its envelope copied from the next line, a uuid derived from
its content and position, linked into the chain before that line.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from collections.abc import Iterator, Sequence
from typing import Any

from core.formats import anthropic, anthropic_render
from core.formats.base import (
    EMPTY_LEFT_OUT,
    Codec,
    Decoded,
    Drop,
    Insert,
    Keep,
    Line,
    Losses,
    Rebuild,
    changed,
    line_error,
    origin_message,
    plan,
    says_nothing,
)
from core.messages import CALL_LINES, Message, is_summary, tool_calls, written_by_compact

MESSAGE_TYPES = ("user", "assistant")
OTHER_TYPES = frozenset({
    "file-history-snapshot", "system", "queue-operation", "summary", "progress", "attachment",
    "ai-title", "custom-title", "tag",
})
ENVELOPE = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch", "slug", "agentId")
# Fields naming another line's uuid: re-pointed when that line goes.
LINKS = ("parentUuid", "logicalParentUuid", "leafUuid", "sourceToolAssistantUUID")
_NAMESPACE = uuidlib.UUID("6f1d3c52-8a7e-4d0b-9c1e-2f5a7b3c9d11")


class ClaudeCode(Codec):
    name = "claude-code"
    title = "Claude Code session log"

    def accepts(self, data: dict[str, Any]) -> bool:
        kind = data.get("type")
        if kind in MESSAGE_TYPES:
            return isinstance(data.get("message"), dict) and ("uuid" in data or "sessionId" in data)
        return isinstance(kind, str) and (kind in OTHER_TYPES or "sessionId" in data or "uuid" in data) and "role" not in data

    def evidence(self, data: dict[str, Any]) -> bool:
        return self.accepts(data)

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        seen_calls: set[Any] = set()  # the calls read so far (the whole file's only when a result needs it)
        external = _External(lines)
        messages: list[Message] = []
        reply: dict[str, Any] | None = None  # the assistant reply whose lines are still coming
        reply_id: Any = None
        for line in lines[live_start(lines):]:
            data = line.data
            if data is None or data.get("type") not in MESSAGE_TYPES:
                continue
            message = data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if message is None or not isinstance(content, (str, list)):
                raise line_error(path, line, f"this {data.get('type')} line has no message content",
                                 fix='a Claude Code message line holds "message": {"role", "content"}')
            if data["type"] == "assistant":
                if not isinstance(content, list):
                    messages.append(origin_message({"role": "assistant", "content": content}, [line.number]))
                    reply = None
                    continue
                message_id = message.get("id")
                if reply is None or message_id is None or message_id != reply_id:
                    reply, reply_id = {"lines": [], "blocks": []}, message_id
                    messages.append(origin_message({}, [line.number], reply=reply))
                reply["lines"].append(line.number)
                for index, block in enumerate(content):
                    reply["blocks"].append((line.number, index, block))
                    if block.__class__ is dict and block.get("type") == "tool_use":
                        seen_calls.add(block.get("id"))
                continue
            summary = data.get("isCompactSummary") is True
            for canonical, owns, extra in anthropic.user_pieces(content):
                if canonical["role"] == "tool":
                    call_id = canonical["tool_call_id"]
                    if call_id not in seen_calls and external.answers_parent(call_id, data):
                        del canonical["tool_call_id"]
                        extra = {**extra, "native_id": call_id}
                else:
                    reply = None
                    if summary:
                        canonical["role"], extra = "system", {"summary": True}
                    elif data.get("isMeta") is True:
                        extra = {**extra, "meta": True}  # hook feedback: read by the model, not typed by a person
                messages.append(origin_message(canonical, [line.number], owns=owns, **extra))
        return [_finish(m) for m in messages]

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[dict[str, Any] | bytes]:
        writer = _Writer(decoded)
        return writer.write(plan(decoded, result))

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        session = str(uuidlib.uuid5(_NAMESPACE, "session:" + str(len(messages))))
        envelope = {"isSidechain": False, "userType": "external", "cwd": ".", "sessionId": session, "version": "compact"}
        parent: str | None = None
        ids = anthropic_render.CallIds(losses)
        for position, message in enumerate(messages):
            data = ids.apply(message.data)
            message = Message(data, extra=message.extra)
            role = data.get("role")
            own = str(uuidlib.uuid5(_NAMESPACE, f"{session}:{position}"))
            line: dict[str, Any] = {"parentUuid": parent, **envelope}
            if role == "assistant":
                line.update(type="assistant", message={
                    "id": f"msg_compact_{position}", "type": "message", "role": "assistant", "model": "<synthetic>",
                    "content": anthropic_render.render_assistant(data, losses)})
            elif role == "tool":
                line.update(type="user", message={"role": "user", "content": [anthropic_render.render_result(message, losses)]})
            elif role in ("system", "developer"):
                if not written_by_compact(message) and not anthropic.is_summary_text(data.get("content")):
                    losses.add("system messages (written as isMeta user text)")
                line.update(type="user", message={"role": "user", "content": anthropic.inserted_text(message)})
                summary = is_summary(message) or anthropic.is_summary_text(data.get("content"))
                line["isCompactSummary" if summary else "isMeta"] = True
            elif role == "user":
                content = data.get("content")
                line.update(type="user", message={"role": "user", "content": content if isinstance(content, str)
                                                  else anthropic_render.sendable_blocks(content, losses)})
            else:
                losses.add(f"{role or 'role-less'} messages")
                continue
            if line["message"]["content"] in ("", []):
                if says_nothing(data):  # (a reply of reasoning only counted its reasoning already)
                    losses.add(EMPTY_LEFT_OUT)
                continue  # nothing left to send
            extra_keys = [k for k in data if k not in anthropic.CARRIED]
            if extra_keys:
                losses.add("message fields a Claude Code log has no place for (" + ", ".join(sorted(extra_keys)) + ")")
            if parent is None and line["type"] == "assistant":  # the API wants a user message first
                note = self._opening_note(session, envelope, losses)
                yield note
                line["parentUuid"] = note["uuid"]
            line.update(uuid=own, timestamp="1970-01-01T00:00:00.000Z")
            parent = own
            yield line

    @staticmethod
    def _opening_note(session: str, envelope: dict[str, Any], losses: Losses) -> dict[str, Any]:
        """The user line of compact's own that ``--to anthropic`` writes too, as hook-like meta text."""
        losses.add(anthropic_render.OPENING_ADDED)
        return {"parentUuid": None, **envelope, "type": "user",
               "message": {"role": "user", "content": anthropic_render.OPENING_NOTE}, "isMeta": True,
               "uuid": str(uuidlib.uuid5(_NAMESPACE, f"{session}:opening")), "timestamp": "1970-01-01T00:00:00.000Z"}


def live_start(lines: list[Line]) -> int:
    """Where the history Claude Code loads starts: after the last ``compact_boundary`` line (0 when none).

    What comes before it is a summarised past Claude Code does not send: kept as it is, not counted.
    """
    start = 0
    for at, line in enumerate(lines):
        data = line.data
        if data is not None and data.get("type") == "system" and data.get("subtype") == "compact_boundary":
            start = at + 1
    return start


def _without_usage(output: Any) -> Any:
    """An assistant line without ``message.usage`` (Claude Code sizes its context from the last one)."""
    data = output.data if isinstance(output, Line) else output
    if not isinstance(data, dict) or data.get("type") != "assistant":
        return output
    message = data.get("message")
    if not isinstance(message, dict) or "usage" not in message:
        return output
    return {**data, "message": {k: v for k, v in message.items() if k != "usage"}}


def _finish(message: Message) -> Message:
    """An assistant reply gets its canonical data once all its lines are read."""
    reply = message.extra.pop("reply", None)
    if reply is None:
        return message
    message.data.update(anthropic.assistant_data([block for _, _, block in reply["blocks"]]))
    message.extra["origin"] = tuple(reply["lines"])
    message.extra["blocks"] = tuple((number, index) for number, index, _ in reply["blocks"])
    calls = {str(block["id"]): number for number, _, block in reply["blocks"] if anthropic.is_tool_use(block)}
    if calls:
        message.extra[CALL_LINES] = calls
    return message


def _local_calls(lines: list[Line]) -> set[Any]:
    calls: set[Any] = set()
    for line in lines:
        data = line.data
        if data is None or data.get("type") != "assistant":
            continue
        content = data["message"].get("content") if isinstance(data.get("message"), dict) else None
        if isinstance(content, list):
            calls.update(b.get("id") for b in content if anthropic.is_tool_use(b))
    return calls


class _External:
    """Is a result's call in the parent session? Looked into only for a result with no call read before it."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.calls: set[Any] | None = None
        self.outside: _Ancestry | None = None

    def answers_parent(self, call_id: Any, data: dict[str, Any]) -> bool:
        if self.calls is None:
            self.calls = _local_calls(self.lines)
        if call_id in self.calls:
            return False
        if data.get("isSidechain") is True:
            return True
        if self.outside is None:
            self.outside = _Ancestry(self.lines)
        return self.outside(data.get("parentUuid"))


class _Ancestry:
    """Does a uuid's parentUuid chain leave the file (a parent session's line)? Memoised, linear overall."""

    def __init__(self, lines: list[Line]) -> None:
        self.parent: dict[str, Any] = {}
        for line in lines:
            if line.data is not None and isinstance(line.data.get("uuid"), str):
                self.parent[line.data["uuid"]] = line.data.get("parentUuid")
        self.memo: dict[str, bool] = {}

    def __call__(self, start: Any) -> bool:
        walked: list[str] = []
        seen: set[str] = set()
        current = start
        while True:
            if not isinstance(current, str):
                found = False
                break
            if current in self.memo:
                found = self.memo[current]
                break
            if current not in self.parent:
                found = True
                break
            if current in seen:
                found = False
                break
            walked.append(current)
            seen.add(current)
            current = self.parent[current]
        for item in walked:
            self.memo[item] = found
        return found


class _Writer:
    """Writes the plan back: rebuilt lines, removed lines re-linked around, additions chained in."""

    def __init__(self, decoded: Decoded) -> None:
        self.decoded = decoded
        self.by_number: dict[int, Line] | None = None
        self.replies: dict[int, dict[int, list[Any]]] = {}
        self.gone: dict[str, Any] = {}  # uuid of a removed line -> its parentUuid

    def write(self, steps: Iterator[Any]) -> Iterator[dict[str, Any] | bytes]:
        outputs: list[Any] = []  # a Line (kept), a dict (rebuilt) or an Insert
        first_change: int | None = None
        for step in steps:
            if isinstance(step, Keep):
                if step.line.data is not None:  # a line that did not read is left out
                    outputs.append(step.line)
                continue
            if first_change is None:
                first_change = len(outputs)
            if isinstance(step, Insert):
                outputs.append(step)
            elif isinstance(step, Drop):
                self._forget(step.line.data)
            else:
                rebuilt = self._rebuild(step)
                if rebuilt is None:
                    self._forget(step.line.data)
                else:
                    outputs.append(rebuilt)
        if first_change is not None:
            # The usage of a reply after the first change measured a history that is no longer there; Claude
            # Code would size its context from it and compact again. The ones before it are still true.
            outputs[first_change:] = [_without_usage(o) for o in outputs[first_change:]]
        return self._link(outputs)

    def _forget(self, data: dict[str, Any] | None) -> None:
        if data is not None and isinstance(data.get("uuid"), str):
            self.gone[data["uuid"]] = data.get("parentUuid")

    def _resolve(self, target: Any) -> Any:
        walked: list[str] = []
        while isinstance(target, str) and target in self.gone and len(walked) <= len(self.gone):
            walked.append(target)
            target = self.gone[target]
        for item in walked:  # path compression: the next lookup is one step
            self.gone[item] = target
        return target

    def _link(self, outputs: list[Any]) -> Iterator[dict[str, Any] | bytes]:
        waiting: list[Message] = []
        last: dict[str, Any] | None = None
        for output in outputs:
            if isinstance(output, Insert):
                waiting.append(output.message)
                continue
            data = output.data if isinstance(output, Line) else output
            if data is not None and any(isinstance(data.get(k), str) and data[k] in self.gone for k in LINKS):
                data = {**data, **{k: self._resolve(data[k]) for k in LINKS if isinstance(data.get(k), str)}}
                output = data
            if waiting and data is not None and "uuid" in data:
                parent = data.get("parentUuid")
                for line in self._inserted(waiting, data, parent):
                    parent = line["uuid"]
                    yield line
                waiting = []
                output = {**data, "parentUuid": parent}
                data = output
            if data is not None and "uuid" in data:
                last = data
            yield output.source if isinstance(output, Line) else output  # type: ignore[misc]
        if waiting:
            yield from self._inserted(waiting, last or {}, last.get("uuid") if last else None)

    def _inserted(self, messages: list[Message], neighbour: dict[str, Any], parent: Any) -> Iterator[dict[str, Any]]:
        for message in messages:
            text = anthropic.inserted_text(message)
            seed = hashlib.sha256(repr((parent, neighbour.get("uuid"), text)).encode()).hexdigest()
            line: dict[str, Any] = {"parentUuid": parent}
            line.update((k, neighbour[k]) for k in ENVELOPE if k in neighbour)
            line.update(type="user", message={"role": "user", "content": text})
            if is_summary(message):
                line.update(isCompactSummary=True, isVisibleInTranscriptOnly=True)
            else:
                line["isMeta"] = True
            line["uuid"] = str(uuidlib.uuid5(_NAMESPACE, seed))
            if "timestamp" in neighbour:
                line["timestamp"] = neighbour["timestamp"]
            parent = line["uuid"]
            yield line

    def _rebuild(self, step: Rebuild) -> dict[str, Any] | Line | None:
        data = step.line.data or {}
        message = data["message"]
        before, after = step.pieces[0]
        if data["type"] == "assistant":
            if "blocks" not in before.extra:  # a reply written as a string
                if after is None:
                    return None
                content = after.data.get("content")
                if tool_calls(after.data) or not isinstance(content, str):
                    content = anthropic_render.render_assistant(after.data)
                return {**data, "message": {**message, "content": content}}
            blocks = self._reply_blocks(before, after).get(step.line.number)
            if not blocks:
                return None
            if len(blocks) == len(message["content"]) and all(a is b for a, b in zip(blocks, message["content"])):
                return step.line  # this line's blocks are all unchanged
            return {**data, "message": {**message, "content": blocks}}
        content = anthropic.user_content(message["content"], step.pieces)
        if content is None:
            return None
        rebuilt = {**data, "message": {**message, "content": content}}
        if "toolUseResult" in data:
            results = [(b, a) for b, a in step.pieces if b.role == "tool" or "native_id" in b.extra]
            if any(changed(b, a) for b, a in results):
                texts = [a.data.get("content") for b, a in results if a is not None and changed(b, a)]
                strings = [t for t in texts if isinstance(t, str)]
                if strings and len(strings) == len(texts):
                    rebuilt["toolUseResult"] = "\n".join(strings)
                else:
                    del rebuilt["toolUseResult"]
        return rebuilt

    def _reply_blocks(self, before: Message, after: Message | None) -> dict[int, list[Any]]:
        """Each line's blocks of a rewritten reply (computed once per reply)."""
        key = before.extra["key"]
        if key in self.replies:
            return self.replies[key]
        if self.by_number is None:
            self.by_number = {line.number: line for line in self.decoded.lines}
        original = [((number, index), self.by_number[number].data["message"]["content"][index])  # type: ignore[index]
                    for number, index in before.extra["blocks"]]
        per_line: dict[int, list[Any]] = {}
        if after is not None:
            for where, block in anthropic.assistant_blocks(before.data, after.data, original):
                number = where[0] if where else None
                if number is None:  # new text or call: with the reply's first surviving line
                    number = min(per_line) if per_line else before.extra["origin"][0]
                per_line.setdefault(number, []).append(block)
        self.replies[key] = per_line
        return per_line


CODEC = ClaudeCode()
