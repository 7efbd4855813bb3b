"""Transcript formats: detection, reading into canonical messages, writing back (issue 5).

``read`` detects the format from the file's first lines (or takes ``--from``),
reads it into a :class:`~core.formats.base.Decoded`, and ``write`` turns the
compacted messages back into lines: in the input's format by default, or
converted with ``--to``. OpenAI chat, the canonical format, keeps the plain
transcript reader's fast path (lines copied back from the file untouched).

Datasets. A file whose lines are whole conversations (``{"messages": [...]}``
or ShareGPT ``{"conversations": [...]}``, the two may be mixed) is the
``dataset`` format when it holds more than one: core.batch.dataset_run compacts each
line on its own budget. A single ShareGPT conversation line stays the
``sharegpt`` format (it is one transcript); a single ``messages`` line is a
dataset of one, as before.

JSON documents. A file whose first line is a lone ``{`` is one pretty-printed
object (Gemini CLI's saved chat): it is read as a single "line" whose source
is the whole file, so an untouched document is written back byte for byte
(each codec's ``serialise`` decides how its output is laid out).

JSON arrays. A file whose first non-blank byte is ``[`` is parsed whole (a
pretty-printed ``[{"conversations": ...}, ...]`` as LLaMA-Factory ships its
data sets, or ``[{"role": ...}, ...]`` chat messages) and read as if each
element were one line of a JSONL file: element N is "line" N in the report
and in errors, and detection runs on the elements. It is written back as
JSONL, one element per line: a pretty-printed array cannot be copied back byte
for byte, and one element per line keeps the "untouched lines are copied"
rule (with ``--unlimited`` the output holds the same JSON values, element by
element). An array of anything but objects is a one-line error naming the file.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import orjson

from core.errors import InputError
from core.formats.base import Codec, Decoded, Line, Losses, number
from core.formats.base import (
    serialise_lines as serialise_lines,  # re-exported: formats.serialise_lines
)
from core.io import jsonio
from core.io.transcript import DEFAULT_MAX_LINE_BYTES
from core.messages import Message

STDIN = "-"
SAMPLE_LINES = 64
SAMPLE_BYTES = 8 << 20

OPENAI = "openai"
DATASET = "dataset"
SHAREGPT = "sharegpt"
# Formats whose provider refuses a conversation that does not open with a user message.
USER_FIRST = frozenset({"anthropic", "claude-code"})


def _conversation_count(lines: Sequence[Line]) -> int:
    """How many lines hold a whole ShareGPT conversation (``conversations`` list)."""
    return sum(1 for line in lines if line.data is not None and isinstance(line.data.get("conversations"), list))


def _codecs() -> dict[str, Codec]:
    # Most specific first: detection picks the first whose evidence a line shows.
    from core.formats import (
        anthropic,
        claude_code,
        codex,
        dataset,
        gemini_chat,
        gemini_stream,
        openai_chat,
        pi,
        responses,
        sharegpt,
    )

    found: dict[str, Codec] = {}
    modules = (claude_code, codex, pi, gemini_stream, gemini_chat, responses, anthropic, sharegpt, dataset, openai_chat)
    for module in modules:
        codec = module.CODEC
        found[codec.name] = codec
    return found


_REGISTRY: dict[str, Codec] | None = None


def codecs() -> dict[str, Codec]:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _codecs()
    return _REGISTRY


def names() -> list[str]:
    return list(codecs())


def get(name: str) -> Codec:
    found = codecs().get(name)
    if found is None:
        raise InputError(f"unknown format {name!r}", fix=f"use one of {', '.join(names())}")
    return found


def detect(lines: Sequence[Line], path: str) -> Codec:
    """The format of a file from its first lines: the most specific one every line fits and one line shows.

    A line no format accepts, or lines that fit no single format (two formats
    mixed), is an error naming the line.
    """
    from core.formats.openai_chat import CODEC as chat

    # The common case without importing every codec: a line only chat accepts (a tool call, a
    # tool result, a developer message) rules every other format out, so search() would agree.
    sampled = [line.data for line in lines if line.data is not None]
    if sampled and all(chat.accepts(data) for data in sampled) and any(chat.evidence(data) for data in sampled):
        return chat
    return search(lines, path)


def search(lines: Sequence[Line], path: str) -> Codec:
    """:func:`detect`, trying every codec."""
    candidates = list(codecs().values())
    shown: dict[str, int] = {}
    first_line: dict[str, int] = {}
    for line in lines:
        if line.data is None:
            continue
        fitting = [c for c in candidates if c.accepts(line.data)]
        if not fitting:
            if any(c.accepts(line.data) for c in codecs().values()):
                raise _mixed_or_unknown(path, line, candidates, first_line)
            if not first_line and "role" in line.data:
                return get(OPENAI)  # a chat message with a problem: the chat reader names it exactly
            if not first_line:
                raise _mixed_or_unknown(path, line, candidates, first_line)
            break  # a broken line of the format seen so far: its reader says what is wrong with it
        candidates = fitting
        for codec in candidates:
            first_line.setdefault(codec.name, line.number)
            if codec.name not in shown and codec.evidence(line.data):
                shown[codec.name] = line.number
    for codec in candidates:
        if codec.name in shown:
            if codec.name == SHAREGPT and _conversation_count(lines) > 1:
                return get(DATASET)  # several ShareGPT conversations: each compacted on its own budget
            return _mostly_known(codec, lines, path)
    plain = [c for c in candidates if c.name == OPENAI]  # plain chat fits several formats: read it as the canonical one
    return _mostly_known(plain[0] if plain else candidates[0], lines, path)


def _mostly_known(codec: Codec, lines: Sequence[Line], path: str) -> Codec:
    """``codec``, unless most sampled lines are ones it would only pass through unread (some other log)."""
    sampled = [line.data for line in lines if line.data is not None]
    known = sum(1 for data in sampled if codec.knows(data))
    if known * 2 >= len(sampled):
        return codec
    raise InputError(
        f"this file is in no format compact reads: only {known} of its first {len(sampled)} lines fit "
        f"{codec.title}, and the others would be passed through unread",
        path=path, fix=f"compact reads {known_formats()}; --from FORMAT forces one",
    )


def known_formats() -> str:
    return ", ".join(f"{c.title} ({c.name})" for c in codecs().values())


def _mixed_or_unknown(path: str, line: Line, before: list[Codec], first_line: dict[str, int]) -> InputError:
    here = [c for c in codecs().values() if c.accepts(line.data or {})]
    if here and first_line:
        earlier = ", ".join(c.title for c in before)
        return InputError(
            f"this line is {here[0].title} but the lines before it are {earlier}; a file holds one format",
            path=path, line=line.number, fix="split the file, or pass --from FORMAT to read it as one format",
        )
    return InputError(
        "this line is not a message in any format compact reads",
        path=path, line=line.number,
        fix=f"expected one of: {known_formats()}; --from FORMAT forces one",
    )


def _raw_input(path: str, stdin: BinaryIO | None, max_line: int) -> tuple[str, bytes | None]:
    """(display name, the whole input when it cannot be re-read: stdin, a pipe or a device)."""
    from core.io.transcript import open_input, read_bounded

    if path == STDIN:
        return "<stdin>", read_bounded(stdin if stdin is not None else sys.stdin.buffer, "<stdin>", max_line)
    with open_input(path) as stream:
        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return path, None
        return path, read_bounded(stream, path, max_line)


def _array_as_lines(path: str, name: str, raw: bytes | None, head: bytes | None = None) -> bytes | None:
    """A JSON array file as JSONL bytes (one element per line), or None when the input is not an array."""
    probe = head if head is not None else raw
    if probe is None:
        with open(path, "rb") as stream:
            probe = stream.read(4096)
    if probe.removeprefix(jsonio.UTF8_BOM).lstrip()[:1] != b"[":
        return None
    if raw is None:
        with open(path, "rb") as stream:
            raw = stream.read()
    return parse_array(raw.removeprefix(jsonio.UTF8_BOM), name)


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


def _is_document(probe: bytes) -> bool:
    """Does the input start with a lone ``{`` line: one pretty-printed JSON object (a Gemini CLI saved chat)?"""
    return probe.removeprefix(jsonio.UTF8_BOM).lstrip().split(b"\n", 1)[0].strip() == b"{"


def document_line(raw: bytes, name: str) -> Line | None:
    """A pretty-printed JSON object file as one line holding the whole document, or None when the input is JSONL.

    Its source is every byte of the file, so an untouched document is written back as it was.
    """
    if not _is_document(raw[:4096]):
        return None
    body = raw.removeprefix(jsonio.UTF8_BOM)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed JSON document: {str(exc.msg).split(':')[0]}", path=name, line=exc.lineno,
                         column=exc.colno, fix="a file whose first line is a lone { must be one complete JSON object"
                         ) from None
    number = 1 + body[: len(body) - len(body.lstrip())].count(b"\n")
    return Line(number, data, raw)


def _head(path: str, raw: bytes | None) -> bytes:
    if raw is not None:
        return raw[:SAMPLE_BYTES]
    with open(path, "rb") as stream:
        head = stream.read(1 << 20)
        while head.count(b"\n") < SAMPLE_LINES and len(head) < SAMPLE_BYTES:
            more = stream.read(1 << 20)
            if not more:
                break
            head += more
    return head


def split_lines(raw: bytes, *, skip_invalid: bool, path: str, limit: int | None = None,
                skipped: list[dict[str, Any]] | None = None) -> list[Line]:
    """The non-blank lines of ``raw`` parsed as JSON objects; a bad line is an error unless ``skip_invalid``."""
    from core.io.transcript import _lines, parse_json_object

    start = len(jsonio.UTF8_BOM) if raw.startswith(jsonio.UTF8_BOM) else 0
    view = memoryview(raw)
    lines: list[Line] = []
    for line_number, begin, stop in _lines(raw, start, 0):
        if limit is not None and len(lines) >= limit:
            break
        source = view[begin:stop]
        try:
            data = parse_json_object(source, path, line_number)
        except InputError as exc:
            if not skip_invalid:
                raise
            if skipped is not None:
                skipped.append({"line": line_number, "error": exc.what})
            data = None
        lines.append(Line(line_number, data, source))
    return lines


def sniff(path: str, *, stdin: BinaryIO | None = None,
          max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> tuple[str, bytes | None, Codec]:
    """(display name, buffered input or None, detected codec) without reading a regular file whole."""
    from core.io.transcript import refuse_binary

    name, raw = _raw_input(path, stdin, max_line_bytes)
    head = _head(path, raw)
    refuse_binary(head, name)
    if _is_document(head[:4096]):
        if raw is None:
            with open(path, "rb") as stream:
                raw = stream.read()
        document = document_line(raw, name)
        assert document is not None
        try:
            codec = detect([document], name)
        except InputError as exc:
            exc.what = exc.what.replace("this line is not a message", "this JSON document is not a transcript")
            raise
        if not codec.whole_document:
            raise InputError(f"this file is one pretty-printed JSON object ({codec.title}); compact reads a "
                             "Gemini CLI saved chat that way, and every other format as JSONL", path=name,
                             line=document.number, fix="write it one JSON object per line, e.g. with jq -c")
        return name, raw, codec
    converted = _array_as_lines(path, name, raw, head)
    if converted is not None:
        raw = head = converted
    if raw is None and len(head) >= SAMPLE_BYTES or raw is not None and len(raw) > len(head):
        head = head[: head.rfind(b"\n") + 1] or head  # a cut last line would read as malformed
    sample = split_lines(head, skip_invalid=True, path=name, limit=SAMPLE_LINES)
    if not any(line.data is not None for line in sample):
        return name, raw, get(OPENAI)  # empty or unreadable: the reader says what is wrong
    try:
        return name, raw, detect(sample, name)
    except InputError as exc:
        if converted is not None and exc.what.startswith("this line "):  # say where in the array it is
            exc.what = f"element {exc.line} of this JSON array " + exc.what[len("this line "):]
        raise


def read(path: str, *, source_format: str | None = None, skip_invalid: bool = False,
         stdin: BinaryIO | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Decoded:
    """Read a transcript in any format into canonical messages; no line may be over ``max_line_bytes``."""
    if source_format is not None:
        codec = get(source_format)
        name, raw = _raw_input(path, stdin, max_line_bytes)
        raw = _array_as_lines(path, name, raw) or raw
    else:
        name, raw, codec = sniff(path, stdin=stdin, max_line_bytes=max_line_bytes)
    if codec.name == OPENAI:
        from core.io.transcript import read_transcript

        transcript = read_transcript(path if raw is None else STDIN, skip_invalid=skip_invalid,
                                     stdin=None if raw is None else io.BytesIO(raw), max_line_bytes=max_line_bytes)
        transcript.path = name
        return Decoded(name, OPENAI, [], transcript.messages, transcript.skipped_lines)
    if raw is None:
        with open(path, "rb") as stream:
            raw = stream.read()
    skipped: list[dict[str, Any]] = []
    if codec.name == DATASET:  # core.batch.dataset_run compacts each line's conversation and checks the lines itself
        return Decoded(name, DATASET, split_lines(raw, skip_invalid=True, path=name), [], [])
    document = document_line(raw, name) if codec.whole_document else None
    with _collector_paused():
        lines = [document] if document else split_lines(raw, skip_invalid=skip_invalid, path=name, skipped=skipped)
    if codec.name == SHAREGPT and _conversation_count(lines) > 1:  # beyond the sample, or --from sharegpt
        return Decoded(name, DATASET, split_lines(raw, skip_invalid=True, path=name), [], [])
    if not lines:
        raise InputError("the file is empty; a transcript needs at least one message", path=name)
    with _collector_paused():
        messages = number(_decode(codec, lines, name, skip_invalid, skipped))
    if not messages:
        raise InputError(f"no messages in this {codec.title}", path=name,
                         fix="a transcript needs at least one user or assistant message")
    return Decoded(name, codec.name, lines, messages, skipped)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsing and decoding allocate millions of acyclic objects: the cyclic GC would rescan the heap for nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _decode(codec: Codec, lines: list[Line], path: str, skip_invalid: bool,
            skipped: list[dict[str, Any]]) -> list[Message]:
    """The codec's messages; with ``skip_invalid`` a line of the wrong shape is kept verbatim like bad JSON."""
    index = {line.number: i for i, line in enumerate(lines)} if skip_invalid else {}
    while True:
        try:
            return codec.decode(lines, path)
        except InputError as exc:
            at = index.get(exc.line) if exc.line is not None else None
            if at is None or lines[at].data is None:
                raise
            lines[at] = Line(lines[at].number, None, lines[at].source)
            skipped.append({"line": exc.line, "error": exc.what})
            skipped.sort(key=lambda entry: entry["line"])


def read_one(path: str, *, stdin: BinaryIO | None = None, command: str = "this command") -> Decoded:
    """One transcript in any format (a dataset holds many: refused with a one-line error)."""
    decoded = read(path, stdin=stdin)
    if decoded.format == DATASET:
        raise InputError(f"{command} reads one transcript, and this file is a conversation-per-line dataset",
                         path=decoded.path, fix="compact it with `compact FILE` or `compact batch`")
    return decoded


def write(decoded: Decoded, result: Sequence[Message]) -> Iterator[bytes]:
    """The output bytes: ``result`` written back in the input's format."""
    codec = get(decoded.format)
    return codec.serialise(codec.encode(decoded, result))


def convert(decoded: Decoded, result: Sequence[Message], target: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``result`` rendered fresh in ``target``'s format, and what that could not carry (for the report).

    Rendered once, up front: the report, which names the losses, is staged
    before the transcript is written.
    """
    losses = Losses()
    for what, dropped in get(decoded.format).unread(decoded):
        if dropped:
            losses.add(what, dropped)
    items = list(get(target).render(result, losses))
    return items, losses.as_list()
