"""Which format a file is in: :func:`sniff` reads its first lines and :func:`detect` picks the codec."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from core.errors import InputError
from core.formats.base import Codec, Line
from core.formats.decoding import UNFORESEEN
from core.formats.registry import codecs, get, known_formats
from core.io import rawinput
from core.io.rawinput import DEFAULT_MAX_LINE_BYTES, SAMPLE_BYTES, SAMPLE_LINES

OPENAI = "openai"
DATASET = "dataset"
SHAREGPT = "sharegpt"


def conversation_count(lines: Sequence[Line]) -> int:
    """How many lines hold a whole ShareGPT conversation (``conversations`` list)."""
    return sum(1 for line in lines if line.data is not None and isinstance(line.data.get("conversations"), list))


def detect(lines: Sequence[Line], path: str, *, skip_invalid: bool = False) -> Codec:
    """The format of a file from its first lines: the most specific one every line fits and one line shows.

    A line no format accepts, or lines that fit no single format (two formats
    mixed), is an error naming the line; with ``skip_invalid`` a line no format
    accepts is left out, as its reader will pass it through.
    """
    from core.formats.openai_chat import CODEC as chat

    # The common case without importing every codec: a line only chat accepts (a tool call, a
    # tool result, a developer message) rules every other format out, so search() would agree.
    sampled = [line.data for line in lines if line.data is not None]
    if sampled and all(_safely(chat.accepts, data) for data in sampled) and any(_safely(chat.evidence, data) for data in sampled):
        return chat
    return search(lines, path, skip_invalid=skip_invalid)


def _safely(test: Callable[[Any], Any], data: Any) -> bool:
    """A codec's test of a line (accepts, knows, evidence); a field of a shape the test did not
    foresee means no."""
    try:
        return bool(test(data))
    except UNFORESEEN:
        return False


def search(lines: Sequence[Line], path: str, *, skip_invalid: bool = False) -> Codec:
    """:func:`detect`, trying every codec."""
    candidates = list(codecs().values())
    shown: dict[str, int] = {}
    first_line: dict[str, int] = {}
    unknown: Line | None = None  # the first line no format accepts, left out under skip_invalid
    for line in lines:
        if line.data is None:
            continue
        fitting = [c for c in candidates if _safely(c.accepts, line.data)]
        if not fitting:
            if any(_safely(c.accepts, line.data) for c in codecs().values()):
                raise _mixed_or_unknown(path, line, candidates, first_line)
            if not first_line and "role" in line.data:
                return get(OPENAI)  # a chat message with a problem: the chat reader names it exactly
            if not first_line:
                if not skip_invalid:
                    raise _mixed_or_unknown(path, line, candidates, first_line)
                unknown = unknown or line  # its reader passes it through: the next lines decide
                continue
            break  # a broken line of the format seen so far: its reader says what is wrong with it
        candidates = fitting
        for codec in candidates:
            first_line.setdefault(codec.name, line.number)
            if codec.name not in shown and _safely(codec.evidence, line.data):
                shown[codec.name] = line.number
    if unknown is not None and not first_line:  # no line fits any format
        raise _mixed_or_unknown(path, unknown, candidates, first_line)
    for codec in candidates:
        if codec.name in shown:
            if codec.name == SHAREGPT and conversation_count(lines) > 1:
                return get(DATASET)  # several ShareGPT conversations: each compacted on its own budget
            return _mostly_known(codec, lines, path)
    plain = [c for c in candidates if c.name == OPENAI]  # plain chat fits several formats: read it as the canonical one
    return _mostly_known(plain[0] if plain else candidates[0], lines, path)


def _mostly_known(codec: Codec, lines: Sequence[Line], path: str) -> Codec:
    """``codec``, unless most sampled lines are ones it would only pass through unread (some other log)."""
    sampled = [line.data for line in lines if line.data is not None]
    known = sum(1 for data in sampled if _safely(codec.knows, data))
    if known * 2 >= len(sampled):
        return codec
    raise InputError(
        f"this file is in no format compact reads: only {known} of its first {len(sampled)} lines fit "
        f"{codec.title}, and the others would be passed through unread",
        path=path, fix=f"compact reads {known_formats()}; --from FORMAT forces one",
    )


def _mixed_or_unknown(path: str, line: Line, before: list[Codec], first_line: dict[str, int]) -> InputError:
    here = [c for c in codecs().values() if _safely(c.accepts, line.data or {})]
    here.sort(key=lambda c: c.name != OPENAI)  # plain chat fits several formats: name it as chat
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


def sniff(path: str, *, stdin: BinaryIO | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
          skip_invalid: bool = False) -> tuple[str, bytes | None, Codec]:
    """(display name, buffered input or None, detected codec) without reading a regular file whole."""
    name, raw = rawinput.input_bytes(path, stdin, max_line_bytes)
    head = rawinput.head(path, raw)
    rawinput.refuse_binary(head, name)
    if rawinput.is_document(head[:4096]):
        raw = rawinput.whole(path, raw)
        return name, raw, _document_codec(raw, name)
    converted = rawinput.array_as_lines(path, name, raw, head)
    if converted is not None:
        raw = head = converted
    if raw is None and len(head) >= SAMPLE_BYTES or raw is not None and len(raw) > len(head):
        head = head[: head.rfind(b"\n") + 1] or head  # a cut last line would read as malformed
    sample = rawinput.split_lines(head, skip_invalid=True, path=name, limit=SAMPLE_LINES)
    if not any(line.data is not None for line in sample):
        return name, raw, get(OPENAI)  # empty or unreadable: the reader says what is wrong
    try:
        return name, raw, detect(sample, name, skip_invalid=skip_invalid)
    except InputError as exc:
        if converted is not None and exc.what.startswith("this line "):  # say where in the array it is
            exc.what = f"element {exc.line} of this JSON array " + exc.what[len("this line "):]
        raise


def _document_codec(raw: bytes, name: str) -> Codec:
    """The format of a pretty-printed JSON document: one that reads whole documents, or an error."""
    document = rawinput.document_line(raw, name)
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
    return codec
