"""What every transcript format shares: its lines, its decoded messages, and the write-back plan.

A format (codec) reads the lines of a file into canonical messages (the
OpenAI chat shape) that the pipeline compacts like any other, and writes
the result back in its own shape. Compaction never sees a format's other
lines (Claude Code snapshots, Codex ``turn_context``, ...): the codec keeps
them and :func:`plan` puts them back in place.

Each decoded message names the lines it came from in ``extra["origin"]``
(one Claude Code reply spans several lines; one Anthropic user line can hold
several tool results, each its own canonical ``tool`` message) and its
position in the decoded list in ``extra["key"]``. After compaction a decoded
message is gone (removed), the same (untouched) or rewritten, and messages
without a key were added by compact (summaries, warnings, the graph).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from core.errors import InputError
from core.io import jsonio
from core.io.rawinput import Line  # one line of the input, as core.io.rawinput reads it
from core.messages import FAILED, PROVIDER_RECORD, Message, tool_calls


@dataclass
class Decoded:
    """A file read by a codec: every line, and the canonical messages made from them."""

    path: str
    format: str
    lines: list[Line]
    messages: list[Message]
    skipped_lines: list[dict[str, Any]] = field(default_factory=list)


def origin_message(data: dict[str, Any], lines: Sequence[int], **native: Any) -> Message:
    """A decoded message: ``line`` is its first line, ``extra`` says where it came from.

    ``native`` is the codec's own bookkeeping (which blocks of which lines it
    owns, say); :func:`number` adds the decode-order key afterwards.
    """
    return Message(data=data, line=lines[0] if lines else None, source=None,
                   extra={"origin": tuple(lines), **native})


def number(messages: list[Message]) -> list[Message]:
    """Give each decoded message its key (its position), which survives rewrites."""
    for key, message in enumerate(messages):
        message.extra["key"] = key
    return messages


# The write-back plan: one step per input line, in file order, with compact's
# additions placed before the line of the next message that survived.
@dataclass(frozen=True, slots=True)
class Keep:
    """A line nothing changed (a non-message line, or a message line whose messages are all untouched)."""

    line: Line


@dataclass(frozen=True, slots=True)
class Drop:
    """A line whose messages were all removed."""

    line: Line
    pieces: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Rebuild:
    """A line some of whose messages were removed or rewritten.

    ``pieces`` pairs each decoded message from this line with what became of
    it: the same message, its rewritten version, or None when removed.
    """

    line: Line
    pieces: tuple[tuple[Message, Message | None], ...]


@dataclass(frozen=True, slots=True)
class Insert:
    """A message compact added (no input line)."""

    message: Message


Step = Keep | Drop | Rebuild | Insert


def changed(before: Message, after: Message | None) -> bool:
    return after is None or (after.data is not before.data and after.data != before.data)


def match(originals: Sequence[Message], result: Sequence[Message], place: str,
          anchor: Callable[[Message], Any]) -> tuple[dict[int, Message], dict[Any, list[Message]], list[Message]]:
    """What became of each decoded message, and where compact's additions go.

    A result message is a decoded one's outcome when it has its key and the same
    ``extra[place]``; any other was added by compact and goes before the next
    outcome, grouped under ``anchor(decoded message)``. Returns (outcome by key,
    additions by anchor, additions after the last outcome).
    """
    outcome: dict[int, Message] = {}
    added_before: dict[Any, list[Message]] = {}
    waiting: list[Message] = []
    for message in result:
        key = message.extra.get("key") if message.extra else None
        if key is None or key >= len(originals) or originals[key].extra.get(place) != message.extra.get(place):
            waiting.append(message)
            continue
        outcome[key] = message
        if waiting:
            added_before.setdefault(anchor(originals[key]), []).extend(waiting)
            waiting = []
    return outcome, added_before, waiting


def plan(decoded: Decoded, result: Sequence[Message]) -> Iterator[Step]:
    """Walk the input lines in order and say, for each, what compaction did to it."""
    originals = decoded.messages
    outcome, inserted_before, waiting = match(originals, result, "origin", lambda before: before.extra["origin"][0])
    if waiting:
        inserted_before.setdefault(None, []).extend(waiting)

    pieces_of: dict[int, list[int]] = {}
    for key, message in enumerate(originals):
        for number_ in message.extra["origin"]:
            pieces_of.setdefault(number_, []).append(key)

    for line in decoded.lines:
        for message in inserted_before.pop(line.number, ()):
            yield Insert(message)
        keys = pieces_of.get(line.number)
        if not keys:
            yield Keep(line)
            continue
        pieces = tuple((originals[k], outcome.get(k)) for k in keys)
        if all(after is None for _, after in pieces):
            yield Drop(line, tuple(before for before, _ in pieces))
        elif any(changed(before, after) for before, after in pieces):
            yield Rebuild(line, pieces)
        else:
            yield Keep(line)
    for remaining in inserted_before.values():  # after the last line (or anchored to a dropped line)
        for message in remaining:
            yield Insert(message)


Item = dict[str, Any] | bytes | memoryview  # one output line: a JSON object, or bytes written as they are


def write_back(decoded: Decoded, result: Sequence[Message], *, rebuild: Callable[[Rebuild], Iterable[Item]],
               insert: Callable[[Message, Callable[[], Any]], Iterable[Item]],
               after_change: Callable[[Line], Iterable[Item]] | None = None) -> Iterator[Item]:
    """Walk the write-back :func:`plan`: a kept line's own bytes, the codec's lines for a rebuilt line and for
    an added message, nothing for a dropped line.

    ``insert`` is given the added message and a function returning the timestamp of the line it lands
    next to (:func:`neighbour_timestamp`), for the formats that stamp every line. ``after_change``, when
    given, writes each kept line that follows the first change (a count of the history's tokens there
    measured a history that is no longer the one written).
    """
    steps = list(plan(decoded, result))
    changed_before = False
    for position, step in enumerate(steps):
        if isinstance(step, Keep):
            if step.line.data is not None:  # a line that did not read is left out (listed in skipped_lines)
                yield from after_change(step.line) if changed_before and after_change else (step.line.source,)
            continue
        changed_before = True
        if isinstance(step, Insert):
            yield from insert(step.message, functools.partial(neighbour_timestamp, steps, position))
        elif isinstance(step, Rebuild):
            yield from rebuild(step)


def now_stamp() -> str:
    """An ISO-8601 UTC timestamp with milliseconds (``Date.toISOString``), as the agents write them."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def neighbour_timestamp(steps: Sequence[Step], position: int) -> Any:
    """The timestamp of the line an added message is placed before (or, at the end, after)."""
    for step in (*steps[position + 1:], *reversed(steps[:position])):
        line = getattr(step, "line", None)
        if line is not None and line.data is not None and "timestamp" in line.data:
            return line.data["timestamp"]
    return now_stamp()


class Codec:
    """A transcript format. Subclasses set ``name`` and implement the four methods."""

    name: ClassVar[str]
    title: ClassVar[str]  # for messages: "Claude Code session log"
    whole_document: ClassVar[bool] = False  # read as one pretty-printed JSON object, not as JSONL

    def accepts(self, data: dict[str, Any]) -> bool:
        """Could this line belong to a file in this format?"""
        raise NotImplementedError

    def evidence(self, data: dict[str, Any]) -> bool:
        """Does this line show the file is in this format (and not just compatible with it)?"""
        raise NotImplementedError

    def read_input(self, path: str, name: str, raw: bytes | None, *, skip_invalid: bool,
                   max_line_bytes: int) -> Decoded | None:
        """The file read by the format's own reader, or None to read its lines and :meth:`decode` them.

        ``raw`` is the input when it was buffered (stdin, a pipe, a JSON array), None for a regular file.
        """
        return None

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        """The canonical messages of the file, each made with :func:`origin_message`, in conversation order."""
        raise NotImplementedError

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[dict[str, Any] | bytes | memoryview]:
        """The output lines in this format: a JSON object, or bytes written as they are."""
        raise NotImplementedError

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        """Canonical messages written fresh in this format (``--to``); what it cannot carry goes in ``losses``."""
        raise NotImplementedError

    def renders_anew(self, decoded: Decoded) -> bool:
        """Is ``decoded`` in an old layout of this format, which ``--to`` this format renders afresh in
        today's (its client no longer resumes the old one)? Without ``--to`` a file keeps its layout."""
        return False

    def knows(self, data: dict[str, Any]) -> bool:
        """Is this line something the format defines (not merely a line it would pass through unread)?

        Detection refuses a file most of whose lines a format only tolerates:
        such a file is some other log, and reading it would count a fraction of it.
        """
        return self.accepts(data)

    def unread(self, decoded: Decoded) -> list[tuple[str, int]]:
        """What of ``decoded`` holds no message (a conversion to another format cannot carry it), and how many."""
        message_lines = _message_lines(decoded)
        count = sum(1 for line in decoded.lines if line.data is not None and line.number not in message_lines)
        return [(f"{self.title} lines that are not messages", count)]

    def serialise(self, items: Iterable[dict[str, Any] | bytes | memoryview]) -> Iterator[bytes]:
        """The bytes of :meth:`encode`'s output: one JSON object per line (a one-document format overrides it)."""
        return serialise_lines(items)


def live_part(decoded: Decoded) -> dict[str, Any] | None:
    """Where the provider's newest compaction record stands (its kind and line) and how many lines
    before it the provider no longer reads (not decoded, not counted); None without one."""
    record = next((m for m in decoded.messages if m.extra.get(PROVIDER_RECORD)), None)
    if record is None or record.line is None:
        return None
    # A line before it that the reader reads (a system prompt, which is still sent) is not among them.
    message_lines = _message_lines(decoded)
    before = sum(1 for line in decoded.lines
                 if line.data is not None and line.number < record.line and line.number not in message_lines)
    return {"record": record.extra[PROVIDER_RECORD], "line": record.line, "lines_before": before}


def _message_lines(decoded: Decoded) -> set[int]:
    """The lines the messages of ``decoded`` were read from."""
    return {n for m in decoded.messages for n in m.extra.get("origin", ())}


def unread_before(unread: list[tuple[str, int]], decoded: Decoded, what: str) -> list[tuple[str, int]]:
    """``unread`` (the codec's lines that are no message) with the lines before the provider record,
    which the provider no longer reads, counted apart as ``what``."""
    live = live_part(decoded)
    if live is None:
        return unread
    before = live["lines_before"]
    return [(kind, count - before if n == 0 else count) for n, (kind, count) in enumerate(unread)] + [(what, before)]


# A result answered in the parent session (a Claude Code sidechain's or resumed session's) has no
# call in the transcript for a target that names it: every such target leaves it out.
PARENT_RESULTS = "tool results whose call is not in the transcript (a parent session's), left out"
FAILED_NOT_CARRIED = "tool results marked as failed (the format has no field for it; the error text is kept)"
# A message with no text, no parts and no calls: a target that cannot send an empty message leaves it out.
EMPTY_LEFT_OUT = "messages with nothing to send (no text, parts or calls), left out"


class Losses:
    """What a conversion could not carry, counted by kind, for the report."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, what: str, count: int = 1) -> None:
        self._counts[what] = self._counts.get(what, 0) + count

    def as_list(self) -> list[dict[str, Any]]:
        return [{"what": what, "count": count} for what, count in self._counts.items()]


def says_nothing(data: dict[str, Any]) -> bool:
    """No text (or only blanks), no other part, no call: a message an API target cannot send."""
    if tool_calls(data) or data.get("function_call"):
        return False
    content = data.get("content")
    if isinstance(content, list):
        return all(isinstance(p, str) and not p.strip() or isinstance(p, dict) and p.get("type") == "text"
                   and not str(p.get("text", "")).strip() for p in content)
    return content is None or isinstance(content, str) and not content.strip()


def note_failed(message: Message, losses: Losses) -> None:
    """Count a failed tool result written where the format cannot mark it failed."""
    if message.extra.get(FAILED):
        losses.add(FAILED_NOT_CARRIED)


def serialise_lines(items: Iterable[dict[str, Any] | bytes | memoryview]) -> Iterator[bytes]:
    for item in items:
        yield item if isinstance(item, bytes) else bytes(item) if isinstance(item, memoryview) else jsonio.dumps(item)
        yield b"\n"


def line_error(path: str, line: Line, what: str, fix: str | None = None) -> InputError:
    return InputError(what, path=path, line=line.number, fix=fix)
