"""Caps on the working graph and what happens at them.

A graph carries a node cap and a relationship cap. A merge or import whose
result would exceed either is refused whole (``Eviction.NONE``), or else
(``Eviction.LIGHTEST``) the lightest nodes go, lightest first, with their
relationships, until the result fits:

- weight = a node's total relationship weight in the result, in and out,
  computed once before evicting; ties go by id (so eviction is deterministic);
- over the node cap, the next lightest node is evicted;
- over the relationship cap only, the next lightest node *with
  relationships left* is evicted (evicting an isolated node frees nothing).
"""

from __future__ import annotations

import heapq
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from core.errors import GraphError
from core.graph.model import GraphNode, GraphRelationship, require_counts, total_weights
from core.graph.options import DEFAULT_MAX_NODES, DEFAULT_MAX_RELATIONSHIPS, Eviction


@dataclass(frozen=True, slots=True)
class GraphCaps:
    """The most nodes and relationships a graph may hold, and the at-cap policy."""

    max_nodes: int = DEFAULT_MAX_NODES
    max_relationships: int = DEFAULT_MAX_RELATIONSHIPS
    eviction: Eviction = Eviction.NONE

    def __post_init__(self) -> None:
        require_counts(self, "max_nodes", "max_relationships")
        object.__setattr__(self, "eviction", Eviction(self.eviction))

    @classmethod
    def unlimited(cls) -> GraphCaps:
        """No practical limit: for reading a file, where caps have nothing to protect."""
        return cls(sys.maxsize, sys.maxsize)

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_nodes": self.max_nodes,
            "max_relationships": self.max_relationships,
            "eviction": self.eviction.value,
        }


@dataclass(frozen=True, slots=True)
class EvictedNode:
    id: str
    weight: float
    relationships: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        weight = self.weight if math.isfinite(self.weight) else None  # JSON has no infinity
        return {"id": self.id, "weight": weight, "relationships": list(self.relationships)}


@dataclass(frozen=True, slots=True)
class Evicted:
    """What eviction removed: each node with the relationships that went with it."""

    nodes: tuple[EvictedNode, ...] = field(default_factory=tuple)

    @property
    def relationship_count(self) -> int:
        return sum(len(node.relationships) for node in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [node.to_dict() for node in self.nodes],
            "node_count": len(self.nodes),
            "relationship_count": self.relationship_count,
        }


def enforce_caps(
    nodes: dict[str, GraphNode],
    rels: dict[str, GraphRelationship],
    caps: GraphCaps,
    *,
    action: str,
) -> Evicted:
    """Make ``nodes``/``rels`` (the would-be result, mutated in place) fit ``caps``.

    Raises GraphError, before touching anything, when they do not fit and
    eviction is off. ``action`` names the operation in that message.
    """
    over_nodes = len(nodes) > caps.max_nodes
    over_rels = len(rels) > caps.max_relationships
    if not over_nodes and not over_rels:
        return Evicted()
    if caps.eviction is Eviction.NONE:
        raise GraphError(
            _refusal(len(nodes), len(rels), caps, action), fix=_refusal_fix(over_nodes, over_rels)
        )
    return _evict_lightest(nodes, rels, caps)


def _refusal(node_count: int, rel_count: int, caps: GraphCaps, action: str) -> str:
    over = []
    if node_count > caps.max_nodes:
        over.append(f"{node_count} nodes (cap {caps.max_nodes})")
    if rel_count > caps.max_relationships:
        over.append(f"{rel_count} relationships (cap {caps.max_relationships})")
    return f"{action} refused: the graph would hold " + " and ".join(over) + "; nothing was changed"


def _refusal_fix(over_nodes: bool, over_rels: bool) -> str:
    options = []
    if over_nodes:
        options.append("--max-nodes")
    if over_rels:
        options.append("--max-relationships")
    return "raise " + " / ".join(options) + ", or pass --evict lightest to drop the lightest nodes"


def _evict_lightest(
    nodes: dict[str, GraphNode], rels: dict[str, GraphRelationship], caps: GraphCaps
) -> Evicted:
    weights = total_weights(nodes, rels.values())
    incident: dict[str, list[str]] = {}
    for rel in rels.values():
        incident.setdefault(rel.source, []).append(rel.id)
        if rel.target != rel.source:
            incident.setdefault(rel.target, []).append(rel.id)
    heap = [(weight, node_id) for node_id, weight in weights.items()]
    heapq.heapify(heap)
    evicted: list[EvictedNode] = []
    while heap and (len(nodes) > caps.max_nodes or len(rels) > caps.max_relationships):
        weight, node_id = heapq.heappop(heap)
        gone = [rel_id for rel_id in incident.get(node_id, ()) if rel_id in rels]
        if len(nodes) <= caps.max_nodes and not gone:
            continue  # over the relationship cap only: evicting this node frees nothing
        for rel_id in gone:
            del rels[rel_id]
        del nodes[node_id]
        evicted.append(EvictedNode(node_id, weight, tuple(gone)))
    return Evicted(tuple(evicted))
