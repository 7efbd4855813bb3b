"""Values of the working graph: nodes, relationships and snapshots.

Wire shape (schemas/graph-snapshot.schema.json)::

    {"nodes": [{"id", "labels": [...], "properties": {...}}],
     "relationships": [{"id", "from", "to", "type", "weight", "properties"}]}

``labels`` and ``properties`` default to empty and ``weight`` to 1 when a
snapshot leaves them out; ``to_dict`` always writes every field, in that order.
A relationship's ``from``/``to`` are ``source``/``target`` in Python
(``from`` is a keyword).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Container, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.errors import GraphError

if TYPE_CHECKING:
    from core.graph.findings import ValidationResult

DEFAULT_WEIGHT = 1


def _unique(labels: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(labels))


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A node: an id, labels (kept in order, each once) and free-form properties.

    Treat ``properties`` as read-only: nodes are values shared between graphs.
    """

    id: str
    labels: tuple[str, ...] = ()
    properties: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphNode:
        """Build from one wire item that already passed the schema."""
        labels = data.get("labels")
        return cls(
            data["id"],
            _unique(labels) if labels else (),
            data.get("properties") or {},
        )

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "labels": list(self.labels), "properties": dict(self.properties)}


@dataclass(frozen=True, slots=True)
class GraphRelationship:
    """A directed, weighted relationship ``source -[type]-> target``."""

    id: str
    source: str
    target: str
    type: str
    weight: float = DEFAULT_WEIGHT
    properties: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphRelationship:
        """Build from one wire item that already passed the schema."""
        return cls(
            data["id"],
            data["from"],
            data["to"],
            data["type"],
            data.get("weight", DEFAULT_WEIGHT),
            data.get("properties") or {},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "from": self.source,
            "to": self.target,
            "type": self.type,
            "weight": self.weight,
            "properties": dict(self.properties),
        }

    @property
    def is_self_loop(self) -> bool:
        return self.source == self.target


@dataclass(frozen=True, slots=True, weakref_slot=True)
class GraphSnapshot:
    """An ordered, immutable picture of a graph: what files hold and merges take.

    Construct from a wire document with :meth:`from_dict` (validates) or from
    values directly; :meth:`validate` reports the rules a snapshot must keep.
    """

    nodes: tuple[GraphNode, ...] = ()
    relationships: tuple[GraphRelationship, ...] = ()

    @classmethod
    def from_dict(cls, document: Any, *, source: str | None = None) -> GraphSnapshot:
        """Validate a wire document; raise GraphError naming the first problem."""
        from core.graph.validate import validate_document

        result = validate_document(document, source=source)
        result.raise_for_problems()
        assert result.snapshot is not None
        return result.snapshot

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [node.to_dict() for node in self.nodes],
            "relationships": [rel.to_dict() for rel in self.relationships],
        }

    def validate(self, *, known_node_ids: Container[str] = ()) -> ValidationResult:
        """Every problem and warning of this snapshot, as for a file."""
        from core.graph.validate import check_snapshot_values

        return check_snapshot_values(self, known_node_ids=known_node_ids)

    @property
    def is_empty(self) -> bool:
        return not self.nodes and not self.relationships


def total_weights(
    node_ids: Iterable[str], relationships: Iterable[GraphRelationship]
) -> dict[str, float]:
    """Each node's total relationship weight, in and out (a self-loop counts once).

    Sums are exact (math.fsum), so they do not depend on the order of the
    relationships: rankings built on them are deterministic.
    """
    parts: dict[str, list[float]] = {node_id: [] for node_id in node_ids}
    for rel in relationships:
        parts[rel.source].append(rel.weight)
        if rel.target != rel.source:
            parts[rel.target].append(rel.weight)
    return {node_id: exact_sum(weights) for node_id, weights in parts.items()}


def exact_sum(values: list[float]) -> float:
    """math.fsum, and infinity (not OverflowError) when the exact sum is beyond a double."""
    if not values:
        return 0.0
    try:
        return math.fsum(values)
    except OverflowError:
        # Scaling by a power of two is exact, so the result stays order-independent.
        return math.fsum(value * 2.0**-600 for value in values) * 2.0**600


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    Each collection walks every live container; building 600k items would
    trigger hundreds of them (a third of the run time) for no garbage: graph
    values hold no cycles, and reference counting frees them. Also a
    decorator (``@gc_paused()``): the collector is paused for each call.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def require_counts(owner: object, *names: str) -> None:
    """Raise GraphError unless each named attribute of ``owner`` is a whole number >= 0 (not a bool)."""
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GraphError(
                f"{name} must be a whole number >= 0, not {value!r}",
                fix=f"set {name} to 0 or more",
            )
