"""Reading and writing canonical JSONL transcripts (one message per line).

The raw input (opening, stdin, the byte-order mark, splitting into lines,
each line's JSON) is read by :mod:`core.io.rawinput`; this module turns the
lines into messages, keeping a reference to each line's bytes in the file so
an untouched message is copied back as it was.
"""

from __future__ import annotations

import os
import stat
import sys
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from core.errors import InputError
from core.io.rawinput import (
    DEFAULT_MAX_LINE_BYTES,  # callers read it from here too
    READ_BLOCK,
    STDIN,
    bad_line,
    blocks,
    bom_length,
    line_spans,
    open_input,
    parse_json_object,
    read_bounded,
    refuse_binary,
)
from core.io.schema_loader import first_error
from core.io.staged import atomic_write_chunks
from core.messages import ROLES, Message, canonical_calls


@dataclass
class Transcript:
    """The messages of one file, in order, and the lines that were skipped."""

    path: str
    messages: list[Message]
    skipped_lines: list[dict[str, Any]] = field(default_factory=list)


class SourceFile:
    """The transcript file, kept open so untouched lines can be copied back from it.

    Holding a few integers per line instead of the file's bytes keeps a run's
    memory near the size of the parsed messages, however large the file is.
    The descriptor is the one the lines were parsed from, so a file renamed
    over the path meanwhile cannot slip other bytes into the output.
    """

    def __init__(self, fd: int) -> None:
        self._fd = os.dup(fd)
        self._closer = weakref.finalize(self, os.close, self._fd)

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self._fd, length, offset)

    def close(self) -> None:
        self._closer()


@dataclass(frozen=True, slots=True)
class LineRef:
    """Where a line's original bytes are in the transcript file."""

    file: SourceFile
    offset: int
    length: int

    def __bytes__(self) -> bytes:
        return self.file.read(self.offset, self.length)


def read_transcript(path: str, *, skip_invalid: bool = False, stdin: BinaryIO | None = None,
                    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, name: str | None = None) -> Transcript:
    """Parse a JSONL transcript; the first bad line is an error naming its line.

    With ``skip_invalid`` a bad line is left out and listed in ``skipped_lines``
    instead; so is a last line cut off mid-JSON without it (a file still being written).
    """
    name = name or ("<stdin>" if path == STDIN else path)  # (a device read once is still named as given)
    transcript = Transcript(path=name, messages=[])
    number = 0
    if path == STDIN:
        raw = read_bounded(stdin if stdin is not None else sys.stdin.buffer, name, max_line_bytes)
        number = _parse_block(transcript, raw, 0, number, None, skip_invalid)
    else:
        with open_input(path) as stream:
            if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                source = SourceFile(stream.fileno())
                for offset, block in blocks(stream, name, max_line_bytes):
                    if offset == 0:
                        refuse_binary(block, name)
                    number = _parse_block(transcript, block, offset, number, source, skip_invalid)
            else:  # a pipe or a device (`<(...)`, /dev/stdin): read once, keep the bytes
                raw = read_bounded(stream, name, max_line_bytes)
                number = _parse_block(transcript, raw, 0, number, None, skip_invalid)
    if not transcript.messages:
        if transcript.skipped_lines:
            first = transcript.skipped_lines[0]
            raise InputError(f"no line of this file reads as a message: {first['error']}", path=name,
                             line=first["line"])
        if number == 0:
            raise InputError("the file is empty; a transcript needs at least one message", path=name)
        raise InputError("the file holds only blank lines; a transcript needs at least one message", path=name)
    return transcript


def _parse_block(
    transcript: Transcript, raw: bytes, base: int, number: int, source: SourceFile | None, skip_invalid: bool
) -> int:
    """Parse the lines of one block; returns the number of the last line seen."""
    start = bom_length(raw) if base == 0 else 0
    view = memoryview(raw)
    lines_before = number
    last, last_stop = lines_before, -1  # the last line read, and where its text ends
    for line_number, begin, stop in line_spans(raw, start, lines_before):
        last, last_stop = line_number, stop
        line = view[begin:stop]
        ref: bytes | memoryview | LineRef = line if source is None else LineRef(source, base + begin, stop - begin)
        try:
            data = parse_line(line, transcript.path, line_number)
        except InputError as exc:
            # (only the file's last block can end without a newline)
            transcript.skipped_lines.append(
                bad_line(exc, line, last=raw.find(b"\n", stop) < 0, skip_invalid=skip_invalid))
            continue
        transcript.messages.append(Message(data=data, line=line_number, source=ref))
    # Only blank lines follow the last one read: count them, not the whole block again.
    if last_stop < 0:
        rest = start
    else:
        newline = raw.find(b"\n", last_stop)
        rest = len(raw) if newline < 0 else newline + 1
    return last + raw.count(b"\n", rest) + (0 if raw.endswith(b"\n") or len(raw) == rest else 1)


def parse_line(line: bytes | memoryview, path: str, number: int) -> dict[str, Any]:
    data = parse_json_object(line, path, number)
    check_message(data, path, number)
    return data


def check_message(data: dict[str, Any], path: str, number: int) -> None:
    """Refuse a message object compaction cannot work on (no or unknown role, wrong field types)."""
    # Fast path for the common case; the schema gives the exact reason otherwise.
    role = data.get("role")
    content = data.get("content")
    calls = data.get("tool_calls")
    if (
        role in ROLES
        and (content is None or isinstance(content, (str, list)))
        and (calls is None or isinstance(calls, list))
        and _calls_ok(calls)
    ):
        return
    if "role" not in data:
        if isinstance(data.get("messages"), list):
            raise InputError(
                "this line is a whole conversation (a `messages` list), not a message",
                path=path,
                line=number,
                fix="a conversation-per-line dataset is compacted with `compact batch FILE --out DIR`",
            )
        raise InputError(
            "message has no role", path=path, line=number, fix=f"add a role: one of {', '.join(ROLES)}"
        )
    if role not in ROLES:
        raise InputError(
            f"unknown role {role!r}",
            path=path,
            line=number,
            fix=f"expected one of {', '.join(ROLES)}",
        )
    problem = first_error("message", data)
    if problem is not None:
        raise InputError(f"invalid message: {problem}", path=path, line=number)
    if calls:  # valid, so a call without ``function`` is a custom one
        data["tool_calls"] = canonical_calls(calls)


def _calls_ok(calls: Any) -> bool:
    if not calls:
        return True
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict) or "id" not in call:
            return False
    return True


def serialise(messages: Iterable[Message]) -> Iterator[bytes | memoryview]:
    for message in messages:
        yield message.to_bytes()
        yield b"\n"


def write_transcript(messages: Iterable[Message], path: str) -> None:
    """Write atomically: the file is replaced whole, or left as it was."""
    atomic_write_chunks(path, serialise(messages))


def backup_chunks(path: str) -> Iterator[bytes]:
    """The bytes of ``path``, streamed, for its backup before an in-place rewrite."""
    with open(path, "rb") as source:
        yield from iter(lambda: source.read(READ_BLOCK), b"")


def same_bytes(chunks: Iterable[bytes | memoryview], path: str) -> bool:
    """Whether ``chunks`` hold exactly the bytes of the file at ``path`` (compared as they stream)."""
    with open(path, "rb") as source:
        for chunk in chunks:
            if source.read(len(chunk)) != chunk:
                return False
        return source.read(1) == b""


def write_chunks(chunks: Iterable[bytes | memoryview], stream: BinaryIO) -> None:
    # One buffered write per chunk group keeps memory flat on large transcripts.
    buffer: list[bytes | memoryview] = []
    size = 0
    for chunk in chunks:
        buffer.append(chunk)
        size += len(chunk)
        if size >= 1 << 20:
            stream.write(b"".join(buffer))
            buffer, size = [], 0
    stream.write(b"".join(buffer))
    stream.flush()
