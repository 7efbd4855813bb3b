"""Reading and writing snapshot files (orjson; outputs written atomically).

Written snapshots hold one item per line, every field present, in the wire
order: stable for diffs, greppable, and streamed rather than built in memory::

    {
      "nodes": [
        {"id":"alice","labels":["Person"],"properties":{}},
        ...
      ],
      "relationships": [
        {"id":"r1","from":"alice","to":"vault","type":"OWNS","weight":1,"properties":{}}
      ]
    }
"""

from __future__ import annotations

import os
from collections.abc import Container, Iterator, Sequence
from types import TracebackType
from typing import Any, Literal

from core.errors import CompactError
from core.graph.caps import GraphCaps
from core.graph.findings import ValidationResult
from core.graph.graph import Graph
from core.graph.merge import MergePolicy
from core.graph.model import GraphSnapshot
from core.graph.reports import GraphImportReport, MergeReport
from core.graph.validate import validate_snapshot_file
from core.io import jsonio
from core.io.staged import atomic_write_chunks

_BATCH = 2048


def _array(name: str, items: Sequence[Any], last: bool) -> Iterator[bytes]:
    tail = b"\n" if last else b",\n"
    if not items:
        yield f'  "{name}": []'.encode() + tail
        return
    yield f'  "{name}": [\n'.encode()
    dumps = jsonio.dumps  # orjson where it can, the standard library past 254 levels
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        text = b",\n".join(b"    " + dumps(item.to_dict()) for item in batch)
        more = start + _BATCH < len(items)
        yield text + (b",\n" if more else b"\n")
    yield b"  ]" + tail


def dump_snapshot_chunks(graph: Graph | GraphSnapshot) -> Iterator[bytes]:
    """The snapshot file's bytes, in pieces (see the module docstring for the layout)."""
    snapshot = graph.snapshot() if isinstance(graph, Graph) else graph
    yield b"{\n"
    yield from _array("nodes", snapshot.nodes, last=False)
    yield from _array("relationships", snapshot.relationships, last=True)
    yield b"}\n"


def dumps_snapshot(graph: Graph | GraphSnapshot) -> bytes:
    return b"".join(dump_snapshot_chunks(graph))


def save_snapshot(graph: Graph | GraphSnapshot, path: str | os.PathLike[str]) -> None:
    """Write the snapshot atomically: the file appears whole or not at all."""
    atomic_write_chunks(path, dump_snapshot_chunks(graph))


def read_snapshot(
    path: str | os.PathLike[str], *, known_node_ids: Container[str] = ()
) -> tuple[GraphSnapshot, ValidationResult]:
    """A valid snapshot from a file, with its validation result (for the warnings).

    Raises GraphError naming the first problem and counting the others.
    """
    result = validate_snapshot_file(path, known_node_ids=known_node_ids)
    result.raise_for_problems()
    assert result.snapshot is not None
    return result.snapshot, result


def load_snapshot(path: str | os.PathLike[str], *, caps: GraphCaps | None = None) -> Graph:
    """A new Graph holding the snapshot file; GraphError when it is invalid or over ``caps``."""
    graph, _ = import_snapshot_file(path, caps=caps)
    return graph


def import_snapshot_file(
    path: str | os.PathLike[str], *, caps: GraphCaps | None = None
) -> tuple[Graph, GraphImportReport]:
    """Validate a snapshot file and import it into a new Graph (`compact graph import`)."""
    snapshot, result = read_snapshot(path)
    graph = Graph(caps=caps)
    with _located(path):
        report = graph.replace(snapshot, source=str(path), warnings=len(result.warnings))
    return graph, report


def merge_snapshot_files(
    base: str | os.PathLike[str],
    incoming: str | os.PathLike[str],
    policy: MergePolicy,
    *,
    caps: GraphCaps | None = None,
) -> tuple[Graph, MergeReport]:
    """Merge the snapshot file ``incoming`` into the snapshot file ``base`` (`compact graph merge`).

    ``incoming`` may point at nodes that only ``base`` holds. The caps apply
    to the merged result, so eviction may take nodes of either file.
    """
    graph = load_snapshot(base, caps=GraphCaps.unlimited())
    snapshot, _ = read_snapshot(incoming, known_node_ids=graph.nodes)
    graph.caps = caps if caps is not None else GraphCaps()
    with _located(incoming):
        report = graph.merge(snapshot, policy, source=str(incoming))
    return graph, report


class _located:
    """Add the file name to a CompactError raised without one."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path)

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> Literal[False]:
        if isinstance(error, CompactError) and error.path is None:
            error.path = self._path
        return False
