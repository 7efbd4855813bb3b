"""The one reader of raw input: files, stdin and pipes as bytes, and bytes as numbered JSON lines.

Every input goes through here before any format sees it: opening a path (a
missing file or a folder is a one-line error), reading stdin or a pipe once
with a bound on the line length, refusing binary data, dropping a leading
byte-order mark, splitting the bytes into their non-blank lines (numbered from
1, blank lines counted but not returned) and parsing each line as a JSON
object. Two file shapes are turned into lines here too: a JSON array file (its
elements are the lines) and a pretty-printed JSON document (one line holding
the whole file). core.formats explains what each format does with them.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from core.errors import InputError
from core.io import jsonio

STDIN = "-"
READ_BLOCK = 8 << 20
# The longest line read (--max-line-bytes): a device such as /dev/zero, or a file that is not
# JSONL at all, is refused at this size instead of filling memory.
DEFAULT_MAX_LINE_BYTES = 256 << 20
MIN_MAX_LINE_BYTES = 1 << 20
SAMPLE_LINES = 64  # the lines detection looks at
SAMPLE_BYTES = 8 << 20
_BINARY_PROBE = 64 << 10
_BLANK = re.compile(rb"[ \t\r\f\v]*")


@dataclass(frozen=True, slots=True)
class Line:
    """One non-blank line of the input: its number, its JSON object (None when invalid) and its bytes."""

    number: int
    data: dict[str, Any] | None
    source: bytes | memoryview

    def to_bytes(self) -> bytes:
        return bytes(self.source)


# Opening and reading.

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


def blocks(stream: BinaryIO, name: str = "", max_line: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) blocks of whole lines of a regular file, so only one block is in memory at a time."""
    offset = 0
    carry = b""
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
                raise line_too_long(name, _lines_in(stream, offset) + 1, max_line)
            carry = block
            continue
        yield offset, block[:cut]
        offset += cut
        carry = block[cut:]


def _lines_in(stream: BinaryIO, size: int) -> int:
    """The lines in the first ``size`` bytes of a regular file: counted again only for an error
    message, so that reading counts each newline once."""
    stream.seek(0)
    lines = 0
    while size > 0:
        chunk = stream.read(min(size, READ_BLOCK))
        if not chunk:
            break
        lines += chunk.count(b"\n")
        size -= len(chunk)
    return lines


def input_bytes(path: str, stdin: BinaryIO | None, max_line: int) -> tuple[str, bytes | None]:
    """(display name, the whole input when it cannot be re-read: stdin, a pipe or a device)."""
    if path == STDIN:
        return "<stdin>", read_bounded(stdin if stdin is not None else sys.stdin.buffer, "<stdin>", max_line)
    with open_input(path) as stream:
        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return path, None
        return path, read_bounded(stream, path, max_line)


def whole(path: str, raw: bytes | None) -> bytes:
    """The input's bytes: ``raw`` when it was buffered (stdin, a pipe), else the regular file read whole."""
    if raw is not None:
        return raw
    with open(path, "rb") as stream:
        return stream.read()


def head(path: str, raw: bytes | None) -> bytes:
    """The first lines of the input, enough for detection (at least SAMPLE_LINES, at most about SAMPLE_BYTES)."""
    if raw is not None:
        return raw[:SAMPLE_BYTES]
    with open(path, "rb") as stream:
        start = stream.read(1 << 20)
        while start.count(b"\n") < SAMPLE_LINES and len(start) < SAMPLE_BYTES:
            more = stream.read(1 << 20)
            if not more:
                break
            start += more
    return start


# Lines.

def bom_length(raw: bytes) -> int:
    """Where the text starts: after a leading byte-order mark, which readers skip."""
    return len(jsonio.UTF8_BOM) if raw.startswith(jsonio.UTF8_BOM) else 0


def line_spans(raw: bytes, start: int, number: int) -> Iterator[tuple[int, int, int]]:
    """(line number, start, stop) of the non-blank lines of ``raw``, without copying them.

    ``number`` is the count of lines before ``start``; a line's stop leaves out its CR LF or LF.
    """
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


def split_lines(raw: bytes, *, skip_invalid: bool, path: str, limit: int | None = None,
                skipped: list[dict[str, Any]] | None = None) -> list[Line]:
    """The non-blank lines of ``raw`` parsed as JSON objects; a bad line is an error unless ``skip_invalid``
    (or it is the last line, cut off: :func:`bad_line`)."""
    view = memoryview(raw)
    lines: list[Line] = []
    for line_number, begin, stop in line_spans(raw, bom_length(raw), 0):
        if limit is not None and len(lines) >= limit:
            break
        source = view[begin:stop]
        try:
            data = parse_json_object(source, path, line_number)
        except InputError as exc:
            entry = bad_line(exc, source, last=raw.find(b"\n", stop) < 0, skip_invalid=skip_invalid)
            if skipped is not None:
                skipped.append(entry)
            data = None
        lines.append(Line(line_number, data, source))
    return lines


# Bad lines: left out of the output under --skip-invalid, or when the agent is still writing the last one.

CUT_OFF = "the last line is cut off mid-JSON with no newline after it (a session still being written?): left out"
SKIP_INVALID = "--skip-invalid leaves bad lines out"


def bad_line(exc: InputError, source: bytes | memoryview, *, last: bool, skip_invalid: bool) -> dict[str, Any]:
    """The skipped-line entry for a line that did not read: the last line cut off mid-JSON (no newline
    after it) always, any other only under ``skip_invalid`` (else ``exc``, naming --skip-invalid, is raised)."""
    if last and cut_mid_json(source):
        return {"line": exc.line, "error": CUT_OFF, "truncated": True}
    if not skip_invalid:
        raise naming_skip_invalid(exc)
    return {"line": exc.line, "error": exc.what}


def naming_skip_invalid(exc: InputError) -> InputError:
    """``exc`` with --skip-invalid among what to do (a line-level error only that flag can get past)."""
    if "--skip-invalid" not in (exc.fix or ""):
        exc.fix = f"{exc.fix}; {SKIP_INVALID}" if exc.fix else SKIP_INVALID
    return exc


def cut_mid_json(source: bytes | memoryview) -> bool:
    """Is this line the start of a JSON object that stops before its end (a write still under way)?
    A cut may fall inside a UTF-8 character: its first bytes are set aside."""
    text = bytes(source)
    if text.lstrip()[:1] != b"{":
        return False
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":
            return False
        text = text[: exc.start]
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return str(exc.msg) == "unexpected end of data"
    return False


def iter_lines(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line without its line end) of the non-blank lines of a stream; a leading BOM is dropped.

    The streaming reader: one line in memory at a time (a dataset file of any size).
    """
    for number, line in enumerate(lines, start=1):
        if number == 1 and line.startswith(jsonio.UTF8_BOM):
            line = line[len(jsonio.UTF8_BOM):]
        line = line.rstrip(b"\r\n")
        if line.strip():
            yield number, line


def numbered_lines(lines: Iterable[bytes], name: str) -> Iterator[tuple[int, bytes]]:
    """:func:`iter_lines`, or the elements of a JSON array file (its first non-blank byte ``[``) as the lines."""
    source = iter(lines)
    seen: list[bytes] = []
    for line in source:
        seen.append(line)
        text = line[len(jsonio.UTF8_BOM):] if len(seen) == 1 and line.startswith(jsonio.UTF8_BOM) else line
        if text.strip():
            if text.lstrip()[:1] == b"[":
                return enumerate(parse_array(b"".join([text, *source]), name).splitlines(), start=1)
            break
    return iter_lines(itertools.chain(seen, source))


# One line as a JSON object.

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


# Whole-file JSON values read as lines.

def array_as_lines(path: str, name: str, raw: bytes | None, start: bytes | None = None) -> bytes | None:
    """A JSON array file as JSONL bytes (one element per line), or None when the input is not an array."""
    probe = start if start is not None else raw
    if probe is None:
        with open(path, "rb") as stream:
            probe = stream.read(4096)
    if probe.removeprefix(jsonio.UTF8_BOM).lstrip()[:1] != b"[":
        return None
    return parse_array(whole(path, raw).removeprefix(jsonio.UTF8_BOM), name)


def parse_array(data: bytes, name: str) -> bytes:
    """A whole JSON array file (without its BOM) parsed, and its elements as JSONL bytes."""
    try:
        elements = jsonio.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed JSON array: {str(exc.msg).split(':')[0]}", path=name, line=exc.lineno,
                         column=exc.colno, fix="a file starting with [ must be one complete JSON array") from None
    return array_lines(elements, name)


def array_lines(elements: Any, name: str) -> bytes:
    """The elements of a parsed JSON array file as JSONL bytes; an element that is not an object is an error."""
    if not isinstance(elements, list):
        raise InputError("not a JSON array", path=name, fix="a file starting with [ must be one JSON array")
    if not elements:
        raise InputError("the JSON array is empty; it needs at least one conversation or message", path=name)
    for index, element in enumerate(elements, start=1):
        if not isinstance(element, dict):
            kind = jsonio.kind_name(element) or "null"
            raise InputError(
                f"element {index} of this JSON array is {kind}; compact reads an array of conversations or messages",
                path=name, fix='each element must be an object: {"conversations": [...]}, {"messages": [...]} '
                               'or a message',
            )
    try:
        return b"".join(jsonio.dumps(element) + b"\n" for element in elements)
    except orjson.JSONEncodeError as exc:
        raise InputError(f"cannot read this JSON array: {exc}", path=name) from None


def is_document(probe: bytes) -> bool:
    """Does the input start with a lone ``{`` line: one pretty-printed JSON object (a Gemini CLI saved chat)?"""
    return probe.removeprefix(jsonio.UTF8_BOM).lstrip().split(b"\n", 1)[0].strip() == b"{"


def document_line(raw: bytes, name: str) -> Line | None:
    """A pretty-printed JSON object file as one line holding the whole document, or None when the input is JSONL.

    Its source is every byte of the file, so an untouched document is written back as it was.
    """
    if not is_document(raw[:4096]):
        return None
    body = raw.removeprefix(jsonio.UTF8_BOM)
    try:
        data = jsonio.loads(body)  # (a lone surrogate escape, which JSON.stringify writes, and big integers too)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed JSON document: {str(exc.msg).split(':')[0]}", path=name, line=exc.lineno,
                         column=exc.colno, fix="a file whose first line is a lone { must be one complete JSON object"
                         ) from None
    number = 1 + body[: len(body) - len(body.lstrip())].count(b"\n")
    return Line(number, data, raw)
