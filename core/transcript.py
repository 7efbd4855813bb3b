"""Reading and writing canonical JSONL transcripts (one message per line)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from core.errors import InputError
from core.fileio import atomic_write_chunks
from core.messages import ROLES, Message
from core.schemas import first_error

STDIN = "-"
_JSON_KINDS = {"list": "an array", "str": "a string", "int": "a number", "float": "a number",
               "bool": "a boolean", "NoneType": "null"}
_UTF8_BOM = b"\xef\xbb\xbf"
_BLANK = re.compile(rb"[ \t\r\f\v]*")


@dataclass
class Transcript:
    """The messages of one file, in order, and the lines that were skipped."""

    path: str
    messages: list[Message]
    skipped_lines: list[dict[str, Any]] = field(default_factory=list)


def read_bytes(path: str, stdin: BinaryIO | None = None) -> bytes:
    if path == STDIN:
        stream = stdin if stdin is not None else sys.stdin.buffer
        return stream.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path=path, fix="check the path") from None
    except IsADirectoryError:
        raise InputError("is a directory, not a transcript file", path=path) from None
    except PermissionError:
        raise InputError("permission denied", path=path, fix="check the file's permissions") from None


def read_transcript(path: str, *, skip_invalid: bool = False, stdin: BinaryIO | None = None) -> Transcript:
    """Parse a JSONL transcript; the first bad line is an error naming its line.

    With ``skip_invalid`` a bad line is kept verbatim in place (as a message
    no strategy touches) and listed in ``skipped_lines`` instead.
    """
    name = "<stdin>" if path == STDIN else path
    raw = read_bytes(path, stdin)
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if not raw.strip():
        raise InputError("the file is empty; a transcript needs at least one message", path=name)
    transcript = Transcript(path=name, messages=[])
    for number, line in _lines(raw):
        try:
            data = parse_line(line, name, number)
        except InputError as exc:
            if not skip_invalid:
                raise
            transcript.skipped_lines.append({"line": number, "error": exc.what})
            transcript.messages.append(Message(data={}, line=number, source=line, extra={"invalid": exc.what}))
            continue
        transcript.messages.append(Message(data=data, line=number, source=line))
    if not transcript.messages:
        raise InputError("the file holds only blank lines; a transcript needs at least one message", path=name)
    return transcript


def _lines(raw: bytes) -> Iterator[tuple[int, memoryview]]:
    """Non-blank lines with their 1-based numbers, as views into ``raw`` (no copies)."""
    view = memoryview(raw)
    start, number, size = 0, 0, len(raw)
    while start < size:
        end = raw.find(b"\n", start)
        if end < 0:
            end = size
        number += 1
        stop = end - 1 if end > start and raw[end - 1] == 0x0D else end
        if _BLANK.fullmatch(raw, start, stop) is None:
            yield number, view[start:stop]
        start = end + 1


def parse_line(line: bytes | memoryview, path: str, number: int) -> dict[str, Any]:
    try:
        data = orjson.loads(line)
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
        kind = _JSON_KINDS.get(type(data).__name__, "a value")
        raise InputError(
            f"{kind}, not a message object",
            path=path,
            line=number,
            fix='each line must be a JSON object such as {"role": "user", "content": "..."}',
        )
    _check_message(data, path, number)
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


def _check_message(data: dict[str, Any], path: str, number: int) -> None:
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


def serialise(messages: Iterable[Message]) -> Iterator[bytes]:
    for message in messages:
        yield message.to_bytes()
        yield b"\n"


def write_transcript(messages: Iterable[Message], path: str) -> None:
    """Write atomically: the file is replaced whole, or left as it was."""
    atomic_write_chunks(path, serialise(messages))


def write_backup(path: str) -> str:
    """Copy ``path`` to ``path.bak`` (atomically) before an in-place rewrite."""
    backup = f"{path}.bak"
    atomic_write_chunks(backup, [Path(path).read_bytes()])
    return backup


def write_stream(messages: Iterable[Message], stream: BinaryIO) -> None:
    # One buffered write per chunk group keeps memory flat on large transcripts.
    buffer: list[bytes] = []
    size = 0
    for chunk in serialise(messages):
        buffer.append(chunk)
        size += len(chunk)
        if size >= 1 << 20:
            stream.write(b"".join(buffer))
            buffer, size = [], 0
    stream.write(b"".join(buffer))
    stream.flush()


def display_name(path: str) -> str:
    return "<stdin>" if path == STDIN else os.fspath(path)
