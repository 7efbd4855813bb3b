"""Reading a transcript in any format into canonical messages."""

from __future__ import annotations

from typing import Any, BinaryIO

from core.errors import InputError
from core.formats import decoding
from core.formats.base import Decoded, number
from core.formats.detection import DATASET, SHAREGPT, conversation_count, sniff
from core.formats.registry import get
from core.io import rawinput
from core.io.rawinput import DEFAULT_MAX_LINE_BYTES


def read(path: str, *, source_format: str | None = None, skip_invalid: bool = False,
         stdin: BinaryIO | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Decoded:
    """Read a transcript in any format into canonical messages; no line may be over ``max_line_bytes``."""
    if source_format is not None:
        codec = get(source_format)
        name, raw = rawinput.input_bytes(path, stdin, max_line_bytes)
        raw = rawinput.array_as_lines(path, name, raw) or raw
    else:
        name, raw, codec = sniff(path, stdin=stdin, max_line_bytes=max_line_bytes, skip_invalid=skip_invalid)
    own = codec.read_input(path, name, raw, skip_invalid=skip_invalid, max_line_bytes=max_line_bytes)
    if own is not None:
        return own
    raw = rawinput.whole(path, raw)
    skipped: list[dict[str, Any]] = []
    document = rawinput.document_line(raw, name) if codec.whole_document else None
    with decoding.collector_paused():
        lines = [document] if document else rawinput.split_lines(raw, skip_invalid=skip_invalid, path=name,
                                                                 skipped=skipped)
    if codec.name == SHAREGPT and conversation_count(lines) > 1:  # beyond the sample, or --from sharegpt
        from core.formats.dataset import read_dataset

        return read_dataset(name, raw)
    if not lines:
        raise InputError("the file is empty; a transcript needs at least one message", path=name)
    with decoding.collector_paused():
        messages = number(decoding.decode(codec, lines, name, skip_invalid, skipped))
    if not messages:
        raise InputError(f"no messages in this {codec.title}", path=name,
                         fix="a transcript needs at least one user or assistant message")
    return Decoded(name, codec.name, lines, messages, skipped)


def read_one(path: str, *, stdin: BinaryIO | None = None, command: str = "this command") -> Decoded:
    """One transcript in any format (a dataset holds many: refused with a one-line error)."""
    decoded = read(path, stdin=stdin)
    if decoded.format == DATASET:
        raise InputError(f"{command} reads one transcript, and this file is a conversation-per-line dataset",
                         path=decoded.path, fix="compact it with `compact FILE` or `compact batch`")
    return decoded
