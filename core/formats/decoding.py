"""Decoding a file's lines with its codec: the collector paused, and a line of the wrong shape skipped on request."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from core.errors import InputError
from core.formats.base import Codec, Line
from core.io.rawinput import naming_skip_invalid
from core.messages import Message


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Parsing and decoding allocate millions of acyclic objects: the cyclic GC would rescan the heap for nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def decode(codec: Codec, lines: list[Line], path: str, skip_invalid: bool,
           skipped: list[dict[str, Any]]) -> list[Message]:
    """The codec's messages; with ``skip_invalid`` a line of the wrong shape is left out like bad JSON."""
    index = {line.number: i for i, line in enumerate(lines)} if skip_invalid else {}
    while True:
        try:
            return _decode_or_name_the_line(codec, lines, path)
        except InputError as exc:
            at = index.get(exc.line) if exc.line is not None else None
            if at is None or lines[at].data is None:
                if not skip_invalid and any(line.number == exc.line for line in lines):
                    raise naming_skip_invalid(exc) from None
                raise
            lines[at] = Line(lines[at].number, None, lines[at].source)
            skipped.append({"line": exc.line, "error": exc.what})
            skipped.sort(key=lambda entry: entry["line"])


# What a codec raises on a field of a shape it did not foresee (a list where a string goes, a missing
# key, an integer past 64 bits): a bad line, never a traceback.
UNFORESEEN = (TypeError, KeyError, AttributeError, ValueError, IndexError)


def _decode_or_name_the_line(codec: Codec, lines: list[Line], path: str) -> list[Message]:
    try:
        return codec.decode(lines, path)
    except UNFORESEEN as exc:
        bad = _first_failing_line(codec, lines, path)
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise InputError(
            f"a field of this {codec.name} line has a shape its reader does not know ({detail})",
            path=path, line=bad, fix="check the line against the format (docs/formats.md), or pass --skip-invalid "
                                     "to leave it out",
        ) from None


def _first_failing_line(codec: Codec, lines: list[Line], path: str) -> int | None:
    """The line whose reading fails: the shortest failing prefix of the file ends with it (only on
    the error path: a binary search, a few decodes of prefixes)."""
    low, high = 0, len(lines)  # lines[:low] reads, lines[:high] fails
    while high - low > 1:
        middle = (low + high) // 2
        try:
            codec.decode(lines[:middle], path)
        except (InputError, *UNFORESEEN):
            high = middle
        else:
            low = middle
    return lines[high - 1].number if lines else None
