"""Reading and writing canonical JSONL transcripts (one message per line)."""

from __future__ import annotations

import os
import re
import stat
import sys
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from core.errors import InputError
from core.io import jsonio
from core.io.schema_loader import first_error
from core.io.staged import atomic_write_chunks
from core.messages import ROLES, Message

STDIN = "-"
_BLANK = re.compile(rb"[ \t\r\f\v]*")
READ_BLOCK = 8 << 20
# The longest line read (--max-line-bytes): a device such as /dev/zero, or a file that is not
# JSONL at all, is refused at this size instead of filling memory.
DEFAULT_MAX_LINE_BYTES = 256 << 20
MIN_MAX_LINE_BYTES = 1 << 20
_BINARY_PROBE = 64 << 10


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


def open_input(path: str) -> BinaryIO:
    """Open an input file for reading; a missing, unreadable or folder path is a one-line InputError."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the caller's with-block
    except FileNotFoundError:
        raise InputError("no such file", path=path, fix="check the path") from None
    except IsADirectoryError:
        raise InputError("is a directory, not a transcript file", path=path) from None
    except PermissionError:
        raise InputError("permission denied", path=path, fix="check the file's permissions") from None
    if os.path.isdir(path):
        handle.close()
        raise InputError("is a directory, not a transcript file", path=path)
    return handle


def line_too_long(name: str, line: int, limit: int) -> InputError:
    return InputError(
        f"a line longer than {limit:,} bytes (binary data, or a device such as /dev/zero?)",
        path=name, line=line, fix="give a JSONL transcript, or raise --max-line-bytes if the line is real",
    )


def refuse_binary(head: bytes | memoryview, name: str) -> None:
    """A NUL byte cannot be in JSON text: say the input is binary (or UTF-16) instead of 'malformed JSON'."""
    at = bytes(head[:_BINARY_PROBE]).find(b"\x00")
    if at >= 0:
        line = bytes(head[:at]).count(b"\n") + 1
        raise InputError(
            f"binary data, not a JSONL transcript (a NUL byte at byte {at + 1})", path=name, line=line,
            fix="give a JSONL transcript; text in UTF-16 must be re-encoded as UTF-8",
        )


def read_bounded(stream: BinaryIO, name: str, max_line: int = DEFAULT_MAX_LINE_BYTES) -> bytes:
    """All of a pipe's or device's bytes, refusing binary data and any line over ``max_line`` bytes."""
    chunks: list[bytes] = []
    pending = 0  # bytes of the line not yet ended
    lines = 1
    while True:
        chunk = stream.read(1 << 20)
        if not chunk:
            return b"".join(chunks)
        if not chunks:
            refuse_binary(chunk, name)
        first = chunk.find(b"\n")
        if first < 0:
            pending += len(chunk)
        else:
            if pending + first > max_line:
                raise line_too_long(name, lines, max_line)
            lines += chunk.count(b"\n")
            pending = len(chunk) - chunk.rfind(b"\n") - 1
        if pending > max_line:
            raise line_too_long(name, lines, max_line)
        chunks.append(chunk)


def _blocks(stream: BinaryIO, name: str = "", max_line: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) blocks of whole lines, so only one block is in memory at a time."""
    offset = 0
    carry = b""
    lines_before = 0
    while True:
        block = stream.read(READ_BLOCK)
        if not block:
            if carry:
                yield offset, carry
            return
        block = carry + block
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            if len(block) > max_line:
                raise line_too_long(name, lines_before + 1, max_line)
            carry = block
            continue
        yield offset, block[:cut]
        lines_before += block.count(b"\n", 0, cut)
        offset += cut
        carry = block[cut:]


def read_transcript(path: str, *, skip_invalid: bool = False, stdin: BinaryIO | None = None,
                    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Transcript:
    """Parse a JSONL transcript; the first bad line is an error naming its line.

    With ``skip_invalid`` a bad line is kept verbatim in place (as a message
    no strategy touches) and listed in ``skipped_lines`` instead.
    """
    name = "<stdin>" if path == STDIN else path
    transcript = Transcript(path=name, messages=[])
    number = 0
    if path == STDIN:
        raw = read_bounded(stdin if stdin is not None else sys.stdin.buffer, name, max_line_bytes)
        number = _parse_block(transcript, raw, 0, number, None, skip_invalid)
    else:
        with open_input(path) as stream:
            if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                source = SourceFile(stream.fileno())
                for offset, block in _blocks(stream, name, max_line_bytes):
                    if offset == 0:
                        refuse_binary(block, name)
                    number = _parse_block(transcript, block, offset, number, source, skip_invalid)
            else:  # a pipe or a device (`<(...)`, /dev/stdin): read once, keep the bytes
                raw = read_bounded(stream, name, max_line_bytes)
                number = _parse_block(transcript, raw, 0, number, None, skip_invalid)
    if not transcript.messages:
        if number == 0:
            raise InputError("the file is empty; a transcript needs at least one message", path=name)
        raise InputError("the file holds only blank lines; a transcript needs at least one message", path=name)
    return transcript


def _parse_block(
    transcript: Transcript, raw: bytes, base: int, number: int, source: SourceFile | None, skip_invalid: bool
) -> int:
    """Parse the lines of one block; returns the number of the last line seen."""
    start = 0
    if base == 0 and raw.startswith(jsonio.UTF8_BOM):
        start = len(jsonio.UTF8_BOM)
    view = memoryview(raw)
    lines_before = number
    for line_number, begin, stop in _lines(raw, start, lines_before):
        line = view[begin:stop]
        ref: bytes | memoryview | LineRef = line if source is None else LineRef(source, base + begin, stop - begin)
        try:
            data = parse_line(line, transcript.path, line_number)
        except InputError as exc:
            if not skip_invalid:
                raise
            transcript.skipped_lines.append({"line": line_number, "error": exc.what})
            transcript.messages.append(Message(data={}, line=line_number, source=ref, extra={"invalid": exc.what}))
            continue
        transcript.messages.append(Message(data=data, line=line_number, source=ref))
    counted = raw.count(b"\n", start) + (0 if raw.endswith(b"\n") or len(raw) == start else 1)
    return lines_before + counted


def _lines(raw: bytes, start: int, number: int) -> Iterator[tuple[int, int, int]]:
    """(line number, start, stop) of the non-blank lines of ``raw``, without copying them."""
    size = len(raw)
    while start < size:
        end = raw.find(b"\n", start)
        if end < 0:
            end = size
        number += 1
        stop = end - 1 if end > start and raw[end - 1] == 0x0D else end
        if _BLANK.fullmatch(raw, start, stop) is None:
            yield number, start, stop
        start = end + 1


def parse_line(line: bytes | memoryview, path: str, number: int) -> dict[str, Any]:
    data = parse_json_object(line, path, number)
    check_message(data, path, number)
    return data


def parse_json_object(line: bytes | memoryview, path: str, number: int) -> dict[str, Any]:
    """One line as a JSON object; malformed JSON, bad UTF-8 or another JSON value is an InputError."""
    try:
        data = jsonio.loads(line)
    except orjson.JSONDecodeError as exc:
        _check_utf8(line, path, number)
        reason = str(exc.msg).split(":")[0]
        raise InputError(
            f"malformed JSON: {reason}",
            path=path,
            line=number,
            column=exc.colno,
            fix="each line must be one complete JSON object",
        ) from None
    if not isinstance(data, dict):
        kind = jsonio.kind_name(data) or "a value"
        raise InputError(
            f"{kind}, not a message object",
            path=path,
            line=number,
            fix='each line must be a JSON object such as {"role": "user", "content": "..."}',
        )
    return data


def _check_utf8(line: bytes | memoryview, path: str, number: int) -> None:
    try:
        str(line, "utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"invalid UTF-8 (byte 0x{bytes(line)[exc.start]:02x})",
            path=path,
            line=number,
            column=exc.start + 1,
            fix="re-encode the file as UTF-8",
        ) from None


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


def write_stream(messages: Iterable[Message], stream: BinaryIO) -> None:
    write_chunks(serialise(messages), stream)


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
