"""Decoding a file's lines with its codec: the collector paused, and a line of the wrong shape skipped on request."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from core.errors import InputError
from core.formats.base import Codec, Line
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
