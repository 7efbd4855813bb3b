"""The working graph: id-keyed nodes and relationships behind one lock, with caps.

Every change goes through :meth:`Graph.merge` or :meth:`Graph.replace`, which
validate their input first, build the result aside and swap it in only when
everything succeeded: invalid input, or a refusal at a cap, leaves the graph
exactly as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Container, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from core.errors import GraphError
from core.graph.caps import GraphCaps
from core.graph.merge import MergePolicy, import_into, merge_into
from core.graph.model import GraphNode, GraphRelationship, GraphSnapshot, total_weights
from core.graph.reports import GraphImportReport, MergeReport


class Graph:
    """A mutable working graph. Iteration order is insertion order, kept by saves."""

    def __init__(
        self,
        snapshot: Graph | GraphSnapshot | Mapping[str, Any] | None = None,
        *,
        caps: GraphCaps | None = None,
    ) -> None:
        self._caps = caps if caps is not None else GraphCaps()
        self._nodes: dict[str, GraphNode] = {}
        self._rels: dict[str, GraphRelationship] = {}
        self._lock = threading.RLock()
        if snapshot is not None:
            self.replace(snapshot)

    # -- reading ---------------------------------------------------------------

    @property
    def caps(self) -> GraphCaps:
        return self._caps

    @caps.setter
    def caps(self, caps: GraphCaps) -> None:
        """New caps apply from the next merge or import on."""
        self._caps = caps

    @property
    def nodes(self) -> Mapping[str, GraphNode]:
        return MappingProxyType(self._nodes)

    @property
    def relationships(self) -> Mapping[str, GraphRelationship]:
        return MappingProxyType(self._rels)

    @property
    def is_empty(self) -> bool:
        return not self._nodes and not self._rels

    def __len__(self) -> int:
        """The number of nodes."""
        return len(self._nodes)

    def __iter__(self) -> Iterator[GraphNode]:
        return iter(self._nodes.values())

    def __repr__(self) -> str:
        return f"Graph({len(self._nodes)} nodes, {len(self._rels)} relationships)"

    def snapshot(self) -> GraphSnapshot:
        from core.graph.validate import mark_validated

        with self._lock:
            return mark_validated(
                GraphSnapshot(tuple(self._nodes.values()), tuple(self._rels.values()))
            )

    def to_dict(self) -> dict[str, Any]:
        return self.snapshot().to_dict()

    def total_weights(self) -> dict[str, float]:
        """Each node's total relationship weight (in and out), exact sums."""
        with self._lock:
            return total_weights(self._nodes, self._rels.values())

    @classmethod
    def from_dict(
        cls, document: Any, *, caps: GraphCaps | None = None, source: str | None = None
    ) -> Graph:
        """A graph holding a wire document; GraphError when it is invalid."""
        graph = cls(caps=caps)
        graph.replace(document, source=source)
        return graph

    # -- changing --------------------------------------------------------------

    def merge(
        self,
        incoming: Graph | GraphSnapshot | Mapping[str, Any],
        policy: MergePolicy | None = None,
        *,
        source: str | None = None,
    ) -> MergeReport:
        """Merge ``incoming`` all or nothing; its relationships may point at nodes of this graph.

        Raises GraphError (the graph untouched) when ``incoming`` is invalid or
        the result would exceed the caps and eviction is off.
        """
        policy = policy if policy is not None else MergePolicy()
        with self._lock:
            snapshot = _checked(incoming, known_node_ids=self._nodes, source=source, action="merge")
            nodes, rels, report = merge_into(
                self._nodes, self._rels, snapshot, policy, self._caps, source=source
            )
            self._nodes, self._rels = nodes, rels
        return report

    def replace(
        self,
        incoming: Graph | GraphSnapshot | Mapping[str, Any],
        *,
        source: str | None = None,
        warnings: int = 0,
    ) -> GraphImportReport:
        """Replace the whole graph by ``incoming`` (import), all or nothing.

        ``source`` (a file name) and ``warnings`` (how many its validation
        found) are recorded in the report.
        """
        with self._lock:
            snapshot = _checked(incoming, known_node_ids=(), source=source, action="import")
            before = (len(self._nodes), len(self._rels))
            nodes, rels, report = import_into(
                snapshot, before, self._caps, warnings=warnings, source=source
            )
            self._nodes, self._rels = nodes, rels
        return report

    def add_node(self, node: GraphNode, policy: MergePolicy | None = None) -> MergeReport:
        return self.merge(GraphSnapshot((node,), ()), policy)

    def add_relationship(
        self, rel: GraphRelationship, policy: MergePolicy | None = None
    ) -> MergeReport:
        """Raises GraphError when ``from`` or ``to`` names no node of the graph."""
        return self.merge(GraphSnapshot((), (rel,)), policy)

    def clear(self) -> None:
        with self._lock:
            self._nodes, self._rels = {}, {}


def _checked(
    incoming: Graph | GraphSnapshot | Mapping[str, Any],
    *,
    known_node_ids: Container[str],
    source: str | None,
    action: str,
) -> GraphSnapshot:
    """``incoming`` as a valid snapshot, or GraphError naming its first problem."""
    from core.graph.validate import check_snapshot_values, validate_document

    if isinstance(incoming, Graph):
        return incoming.snapshot()
    if isinstance(incoming, GraphSnapshot):
        result = check_snapshot_values(incoming, known_node_ids=known_node_ids, source=source)
    elif isinstance(incoming, Mapping):
        result = validate_document(dict(incoming), source=source, known_node_ids=known_node_ids)
    else:
        raise GraphError(
            f"{action}: expected a Graph, a GraphSnapshot or a snapshot dict, "
            f"not {type(incoming).__name__}"
        )
    result.raise_for_problems(action=f"{action} refused")
    assert result.snapshot is not None
    return result.snapshot
