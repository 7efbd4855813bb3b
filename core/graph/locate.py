"""Where a JSON path sits in the snapshot's text: line and column, for GitHub annotations.

Validation works on the parsed document and names each problem by its JSON
path; an annotation needs a line to attach to. This walks the text once along
the wanted paths only: a value off every wanted path is skipped by the
standard library's C decoder (``raw_decode``), so the cost stays near one
``json.loads`` of the file, and only ``--format github`` pays it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from core.graph.findings import PathPart

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()  # accepts NaN and Infinity, which validation reports by path
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]

Path = tuple[PathPart, ...]
Location = tuple[int, int]  # line, column (1-based)


def locate(text: str, paths: Iterable[Path]) -> dict[Path, Location]:
    """The line and column of each path found: an object member's key, an array element's value.

    A key that repeats is located at its repetition (the one a reader keeps);
    paths the text does not hold are left out. Malformed text yields what was
    found before the fault.
    """
    trie: dict[Any, Any] = {}
    for path in paths:
        node = trie
        for part in path:
            node = node.setdefault(part, {})
    offsets: dict[Path, int] = {(): _SPACE.match(text, 0).end()}  # type: ignore[union-attr]
    try:
        _walk(text, offsets[()], (), trie, offsets)
    except (ValueError, IndexError):
        pass
    return {path: _line_column(text, offset) for path, offset in offsets.items()}


def _line_column(text: str, offset: int) -> Location:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()  # type: ignore[union-attr]


def _walk(text: str, index: int, prefix: Path, trie: dict[Any, Any], offsets: dict[Path, int]) -> int:
    """Walk the value at ``index`` (descending only into ``trie``'s keys); return the index after it."""
    if not trie:
        return _DECODER.raw_decode(text, index)[1]
    opening = text[index]
    if opening == "{":
        index = _skip(text, index + 1)
        if text[index] == "}":
            return index + 1
        while True:
            key_start = index
            key, index = _scanstring(text, index + 1)
            path = (*prefix, key)
            if key in trie:
                offsets[path] = key_start  # a repeated key: the later one wins, as in the parsed document
            index = _skip(text, index)
            index = _skip(text, index + 1)  # past the colon
            index = _walk(text, index, path, trie.get(key, {}), offsets)
            index = _skip(text, index)
            if text[index] == "}":
                return index + 1
            index = _skip(text, index + 1)  # past the comma
    if opening == "[":
        index = _skip(text, index + 1)
        if text[index] == "]":
            return index + 1
        position = 0
        while True:
            if position in trie:
                offsets[(*prefix, position)] = index
            index = _walk(text, index, (*prefix, position), trie.get(position, {}), offsets)
            index = _skip(text, index)
            if text[index] == "]":
                return index + 1
            index = _skip(text, index + 1)
            position += 1
    return _DECODER.raw_decode(text, index)[1]
