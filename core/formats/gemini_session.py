"""Gemini CLI's session recording (``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``): JSONL.

What gemini-cli writes since it stopped rewriting one JSON document
(``chatRecordingService.ts``, google-gemini/gemini-cli commit 016443b5e7bf,
about 0.39 in 2026; a subagent's session is ``chats/<parent session id>/<id>.jsonl``),
one ``JSON.stringify`` per line, appended:

* a first line of metadata: ``{sessionId, projectHash, startTime, lastUpdated, kind?, directories?}``;
* message records ``{id, timestamp, type: user|gemini|info|error|warning, content, ...}``, the
  saved chat's records (:mod:`core.formats.gemini_chat`). A record is written again, whole, each
  time it changes (its tool calls and their results, its tokens): the later line wins, and the
  record keeps the place it first had (a JavaScript ``Map``);
* ``{"$set": {...}}``: metadata (``lastUpdated``, ``summary``, ``directories``,
  ``memoryScratchpad``); a ``$set`` holding ``messages`` is a checkpoint that replaces the whole
  history with that list (later records add to it);
* ``{"$rewindTo": id}``: ``/rewind``: the record with that id and every later one leave the
  history (all of it when the id is unknown);
* ``{"$patch": {id?, content?, toolCalls?, updates?, removeIds?, orderIds?}}``, which newer loaders
  read (content or results replaced, records removed or reordered): applied the same way.

Reading replays the lines in order as Gemini CLI's ``loadConversationRecord`` does on
``--resume`` and decodes the resulting records as the saved chat's are. Each message is
counted at the line that gave its record's current version (a ``$set`` checkpoint's or
``$patch``'s line for the records it holds), so the report and ``--keep line:N`` point into
the file. A line that is none of these is an error naming it (``--skip-invalid`` leaves it out).

Writing back: an untouched file is copied byte for byte. A compacted one is written as
Gemini CLI itself rewrites a session file (``rewriteConversationFile``): the metadata line
(the first line's fields with every ``$set`` applied, ``messages`` left out), then one line per
record of the compacted history, in order, then ``{"$set": {"memoryScratchpad"}}`` when there is
one (before the records when it was stale). Earlier versions of a record, ``$set``,
``$rewindTo`` and ``$patch`` lines are not written: replaying one of them could bring back a
record compaction removed. Records compaction did not touch are their last line's bytes;
rewritten ones are rebuilt as the saved chat rebuilds them; compact's additions are ``user``
records. The file keeps its ``sessionId``: it is still the same session.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.formats.base import (
    Codec,
    Decoded,
    Item,
    Line,
    Losses,
    changed,
    line_error,
    match,
    now_stamp,
)
from core.formats.gemini_chat import (
    MESSAGE_TYPES,
    added_records,
    decode_record,
    rebuilt_record,
    render_records,
)
from core.messages import Message

RECORD_TYPES = frozenset({*MESSAGE_TYPES, "info", "error", "warning"})
OPERATIONS = ("$rewindTo", "$patch", "$set")
# Keys of other formats' lines: a line holding one is not a session record.
FOREIGN_KEYS = frozenset({"role", "uuid", "parentUuid", "payload", "message", "messages", "parentId"})
FIX = "fix or remove the line, or --skip-invalid to leave it out"


def is_header(data: dict[str, Any]) -> bool:
    """The metadata line (and, in gemini-cli, any line with these two fields and no other role)."""
    return isinstance(data.get("sessionId"), str) and isinstance(data.get("projectHash"), str)


def is_record(data: dict[str, Any]) -> bool:
    return isinstance(data.get("id"), str) and data.get("type") in RECORD_TYPES and "$patch" not in data


@dataclass
class History:
    """The session as Gemini CLI rebuilds it: records by id in history order, each with the line that gave it."""

    metadata: dict[str, Any] = field(default_factory=dict)
    records: dict[str, tuple[dict[str, Any], Line]] = field(default_factory=dict)
    scratchpad_fresh: bool = True  # no record came after the last memoryScratchpad

    def rewind(self, to: str) -> None:
        ids = list(self.records)
        for gone in ids[ids.index(to):] if to in self.records else ids:
            del self.records[gone]
        self.scratchpad_fresh = False

    def put(self, record: dict[str, Any], line: Line) -> None:
        self.records[record["id"]] = (record, line)  # a known id keeps its place, as in a Map
        self.scratchpad_fresh = False

    def patch(self, patch: dict[str, Any], line: Line) -> None:
        for one in [patch, *(patch.get("updates") or ())]:
            if isinstance(one, dict) and isinstance(one.get("id"), str) and one["id"] in self.records:
                self._patch_record(one, line)
        for gone in patch.get("removeIds") or ():
            self.records.pop(gone, None)
        order = [i for i in patch.get("orderIds") or () if isinstance(i, str) and i in self.records]
        if order:
            chosen = set(order)
            rest = [i for i in self.records if i not in chosen]
            self.records = {i: self.records[i] for i in (*rest, *order)}
        self.scratchpad_fresh = False

    def _patch_record(self, one: dict[str, Any], line: Line) -> None:
        record = dict(self.records[one["id"]][0])
        if one.get("content") is not None:
            record["content"] = one["content"]
        calls = record.get("toolCalls")
        if isinstance(one.get("toolCalls"), list) and record.get("type") == "gemini" and isinstance(calls, list):
            results = {p["id"]: p["result"] for p in one["toolCalls"] if isinstance(p, dict) and "result" in p}
            record["toolCalls"] = [{**c, "result": results[c.get("id")]} if c.get("id") in results else c
                                   for c in calls]
        self.records[one["id"]] = (record, line)

    def set(self, update: dict[str, Any], line: Line) -> None:
        if isinstance(update.get("messages"), list):  # a checkpoint: the history is this list
            self.records = {}
            self.add_all(update["messages"], line)
        if "memoryScratchpad" in update:
            self.scratchpad_fresh = True
        self.metadata = {**self.metadata, **update}

    def add_all(self, records: list[Any], line: Line) -> None:
        for record in records:
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                self.records[record["id"]] = (record, line)


def replay(lines: Sequence[Line], path: str) -> History:
    """Apply the file's lines in order, as Gemini CLI's ``loadConversationRecord`` does."""
    history = History()
    first = True
    for line in lines:
        data = line.data
        if data is None:
            continue
        if first and not is_header(data):
            raise line_error(path, line, "a Gemini CLI session recording starts with its metadata line "
                             "({sessionId, projectHash, startTime, ...})", fix="pass --from to read the file as another format")
        first = False
        if "$rewindTo" in data and isinstance(data["$rewindTo"], str):
            history.rewind(data["$rewindTo"])
        elif isinstance(data.get("$patch"), dict):
            history.patch(data["$patch"], line)
        elif isinstance(data.get("id"), str):
            history.put(data, line)
        elif isinstance(data.get("$set"), dict):
            history.set(data["$set"], line)
        elif is_header(data):
            history.metadata = {**history.metadata, **data}
            if isinstance(data.get("messages"), list):
                history.add_all(data["messages"], line)
        else:
            raise line_error(path, line, "this line is not a Gemini CLI session record (a message with an id, "
                             "$set, $rewindTo, $patch or the metadata line)", FIX)
    return history


def header(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata line of a rewritten file: every field but the history and the scratchpad."""
    return {k: v for k, v in metadata.items() if k not in ("messages", "memoryScratchpad")}


def project_hash(root: str) -> str:
    """gemini-cli's ``getProjectHash``: the SHA-256 of the project's root folder."""
    return hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()


class GeminiSession(Codec):
    name = "gemini-session"
    title = "Gemini CLI session recording"

    def accepts(self, data: dict[str, Any]) -> bool:
        if not FOREIGN_KEYS.isdisjoint(data):
            return False
        if "$rewindTo" in data:
            return isinstance(data["$rewindTo"], str)
        if "$set" in data or "$patch" in data:
            return isinstance(data.get("$set", data.get("$patch")), dict)
        return is_header(data) and "type" not in data or is_record(data) and "sessionId" not in data

    def evidence(self, data: dict[str, Any]) -> bool:
        return self.accepts(data) and (is_header(data) or any(k in data for k in OPERATIONS)
                                       or data.get("type") == "gemini")

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        history = replay(lines, path)
        if not history.metadata.get("sessionId") or not history.metadata.get("projectHash"):
            line = next(line for line in lines if line.data is not None)
            raise line_error(path, line, "this Gemini CLI session has no sessionId or projectHash (Gemini CLI "
                             "would not load it)", fix="fix the metadata line, or pass --from to read another format")
        return [message for index, (record, line) in enumerate(history.records.values())
                for message in decode_record(path, line, index, record, line.number, label=f"the record {record['id']}")]

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[Item]:
        originals = decoded.messages
        outcome, added_before, waiting = match(originals, result, "slot", lambda before: before.extra["record"])
        if not added_before and not waiting and not any(
                changed(before, outcome.get(key)) for key, before in enumerate(originals)):
            for line in decoded.lines:  # untouched: the file as it was, but for the lines that did not read
                if line.data is not None:
                    yield line.source
            return
        history = replay(decoded.lines, decoded.path)
        pieces_of: dict[int, list[tuple[Message, Message | None]]] = {}
        for key, before in enumerate(originals):
            pieces_of.setdefault(before.extra["record"], []).append((before, outcome.get(key)))
        yield header(history.metadata)
        scratchpad = history.metadata.get("memoryScratchpad")
        if scratchpad and not history.scratchpad_fresh:
            yield {"$set": {"memoryScratchpad": scratchpad}}
        last = history.metadata.get("lastUpdated") or now_stamp()
        anchor = None  # the id of the last record written, for what compact adds at the end
        for index, (record, line) in enumerate(history.records.values()):
            yield from added_records(added_before.pop(index, ()), record.get("timestamp"), Losses(), record.get("id"))
            pieces = pieces_of.get(index)
            rebuilt = record if pieces is None else rebuilt_record(record, pieces)
            if rebuilt is not None:
                yield line.source if rebuilt is line.data else rebuilt
                last = record.get("timestamp", last)
                anchor = record.get("id")
        yield from added_records(waiting, last, Losses(), ("end", anchor))
        if scratchpad and history.scratchpad_fresh:
            yield {"$set": {"memoryScratchpad": scratchpad}}

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        """A new session: a fresh ``sessionId``, and the project hash Gemini CLI computes for the current folder."""
        stamp = now_stamp()
        yield {"sessionId": str(uuid.uuid4()), "projectHash": project_hash(os.getcwd()), "startTime": stamp,
               "lastUpdated": stamp, "kind": "main"}
        yield from render_records(messages, losses, stamp)

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        records = [record for record, _ in replay(decoded.lines, decoded.path).records.values()]
        other = sum(1 for r in records if r.get("type") not in MESSAGE_TYPES)
        thoughts = sum(len(r["thoughts"]) for r in records if isinstance(r.get("thoughts"), list))
        return [(f"{self.title} records that are not messages (info, error, warning)", other),
                ("Gemini thought summaries", thoughts)]


CODEC = GeminiSession()
