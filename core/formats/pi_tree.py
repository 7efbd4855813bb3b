"""pi sessions as a tree: the branch pi resumes, and the links mended after compaction (core.formats.pi).

Entries form a tree by ``parentId``; pi resumes at the file's last entry and
sends the path from the root to it (after the latest compaction, its summary
and the entries it kept). Writing back, an entry that was removed is bypassed:
every link to it points to its nearest surviving ancestor, and the entries
compact added are given ids and linked in before the entry they precede.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from core.formats.base import Line
from core.io import jsonio

EPOCH = "1970-01-01T00:00:00.000Z"


@dataclass
class Tree:
    """The entries of a session: by id, and the path from the root to the leaf (pi's conversation)."""

    by_id: dict[str, Line]
    path: list[Line]
    linear: bool

    @classmethod
    def of(cls, lines: list[Line]) -> Tree:
        entries = [line for line in lines if line.data is not None and line.data.get("type") != "session"]
        by_id: dict[str, Line] = {}
        for line in entries:
            entry_id = line.data.get("id")  # type: ignore[union-attr]
            if isinstance(entry_id, str):
                by_id.setdefault(entry_id, line)
        if not by_id or not entries:
            return cls(by_id, entries, linear=True)  # version 1: no ids, one linear conversation
        path: list[Line] = []
        seen: set[int] = set()
        before = _valid_before(lines)
        current: Line | None = entries[-1]  # pi resumes at the last entry of the file
        while current is not None and current.number not in seen:
            seen.add(current.number)
            path.append(current)
            parent = current.data.get("parentId")  # type: ignore[union-attr]
            if isinstance(parent, str) and parent not in by_id and current.number in before:
                # The parent is a line kept invalid (--skip-invalid): pi appends entries in order,
                # so go on from the entry before it rather than cut the conversation (and the
                # calls before it from their results after it) in two.
                current = before[current.number]
                continue
            current = by_id.get(parent) if isinstance(parent, str) else None
        path.reverse()
        return cls(by_id, path, linear=False)


def _valid_before(lines: list[Line]) -> dict[int, Line]:
    """For each entry right after invalid lines: the last valid entry before them."""
    bridges: dict[int, Line] = {}
    last_valid: Line | None = None
    after_invalid = False
    for line in lines:
        if line.data is None:
            after_invalid = True
            continue
        if after_invalid and last_valid is not None:
            bridges[line.number] = last_valid
        after_invalid = False
        if line.data.get("type") != "session":
            last_valid = line
    return bridges


def context(tree: Tree) -> list[Line]:
    """The entries pi sends, in its order: the latest compaction's summary, the entries it kept, the rest."""
    path = tree.path
    at = next((i for i in range(len(path) - 1, -1, -1) if path[i].data.get("type") == "compaction"), None)  # type: ignore[union-attr]
    if at is None:
        return path
    compaction = path[at].data or {}
    first = compaction.get("firstKeptEntryId")
    kept: list[Line] = []
    if tree.linear and isinstance(compaction.get("firstKeptEntryIndex"), int):
        kept = path[max(0, compaction["firstKeptEntryIndex"] - 1):at]  # version 1 counted the header
    else:
        found = False
        for line in path[:at]:
            found = found or (line.data or {}).get("id") == first
            if found:
                kept.append(line)
    return [path[at], *kept, *path[at + 1:]]


@dataclass
class Out:
    line: Line | None
    data: dict[str, Any] | None
    changed: bool = False
    inserted: bool = False

    def set(self, key: str, value: Any) -> None:
        if not self.changed:
            self.data = dict(self.data or {})
            self.changed = True
        self.data[key] = value  # type: ignore[index]


def link_past_invalid(out: list[Out], lines: list[Line], tree: Tree) -> None:
    """An entry whose parent is a line that did not read (left out of the output) links to the entry
    before it, as reading bridged it (:meth:`Tree.of`): pi, and compact, read the output whole."""
    if tree.linear:
        return
    bridges = _valid_before(lines)
    for item in out:
        if item.line is None or item.data is None or item.line.number not in bridges:
            continue
        parent = item.data.get("parentId")
        if isinstance(parent, str) and parent not in tree.by_id:
            item.set("parentId", (bridges[item.line.number].data or {}).get("id"))


def relink(out: list[Out], dropped: dict[str, Any], tree: Tree) -> None:
    """Point every link at a removed entry to its nearest surviving ancestor; link inserted entries in."""
    def survivor(entry_id: Any) -> Any:
        seen = set()
        while entry_id in dropped and entry_id not in seen:
            seen.add(entry_id)
            entry_id = dropped[entry_id]
        return entry_id

    order = {(line.data or {}).get("id"): i for i, line in enumerate(tree.path)}
    for item in out:
        if item.inserted or item.data is None:
            continue
        for key in ("parentId", "targetId", "fromId"):
            if item.data.get(key) in dropped:
                item.set(key, survivor(item.data[key]))
        first = item.data.get("firstKeptEntryId")
        if item.data.get("type") == "compaction" and first in dropped:
            item.set("firstKeptEntryId", _next_kept(tree, order, first, item.data.get("id"), dropped))
    if tree.linear:
        return
    on_path = {i for i in order if i is not None and i not in dropped}
    tail = next((i for i in reversed(list(order)) if i in on_path), None)
    ids = IdMaker(set(tree.by_id))
    start = 0
    while start < len(out):
        if not out[start].inserted:
            start += 1
            continue
        stop = start
        while stop < len(out) and out[stop].inserted:
            stop += 1
        group = out[start:stop]
        anchor = next((o for o in out[stop:] if not o.inserted and (o.data or {}).get("id") in on_path), None)
        parent = anchor.data.get("parentId") if anchor is not None else tail  # type: ignore[union-attr]
        for item in group:
            item.data["id"] = ids.make(jsonio.dumps(item.data).decode())  # type: ignore[index]
            item.data["parentId"] = parent  # type: ignore[index]
            parent = item.data["id"]  # type: ignore[index]
        if anchor is not None:
            anchor.set("parentId", parent)
        else:
            tail = parent
        neighbour = next((o for o in reversed(out[:start]) if (o.data or {}).get("timestamp")), None)
        for item in group:
            item.data["timestamp"] = neighbour.data["timestamp"] if neighbour else EPOCH  # type: ignore[index, union-attr]
        start = stop


def keep_leaf_last(out: list[Out], dropped: dict[str, Any], tree: Tree) -> None:
    """pi resumes at the file's last entry: when the old leaf went, the branch's new leaf is moved last.

    Otherwise an entry of an abandoned branch written after it would become the
    leaf, and pi would resume on that branch.
    """
    if tree.linear or not dropped:
        return
    on_path = {(line.data or {}).get("id") for line in tree.path} - set(dropped)
    entries = [i for i, o in enumerate(out) if o.data is not None and o.data.get("type") != "session"]
    leaf = next((i for i in reversed(entries) if out[i].inserted or out[i].data.get("id") in on_path), None)  # type: ignore[union-attr]
    if leaf is not None and entries and leaf != entries[-1]:
        out.append(out.pop(leaf))


def _next_kept(tree: Tree, order: dict[Any, int], first: str, compaction_id: Any, dropped: dict[str, Any]) -> Any:
    """The first surviving entry from ``first`` up to the compaction (the compaction itself when none is left)."""
    begin, end = order.get(first), order.get(compaction_id)
    if begin is None or end is None:
        return compaction_id
    for line in tree.path[begin:end]:
        entry_id = (line.data or {}).get("id")
        if entry_id not in dropped:
            return entry_id
    return compaction_id


class IdMaker:
    """pi's 8-hex-digit entry ids, made from a seed (the same input gives the same ids), never one in use."""

    def __init__(self, used: set[str]) -> None:
        self.used = used

    def make(self, seed: str) -> str:
        counter = 0
        while True:
            candidate = hashlib.sha256(f"{seed}\0{counter}".encode()).hexdigest()[:8]
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate
            counter += 1


def uuid_of(digest: str) -> str:
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
