"""Rendering the working graph as the text of one system message.

The choice of what to show is deterministic, whatever the order of the
snapshot: nodes rank heaviest first by total relationship weight (exact sums),
ties by id; with focus nodes, nearer nodes come first (focus, then one hop,
...). The relationships shown are those between shown nodes, heaviest first,
ties by id. A last line says what was left out.

Example::

    CUCA graph memory: 3 nodes, 2 relationships.
    Nodes:
    - alice [Person] {"email":"ops@example.com"}
    - vault [Place] {"city":"Lisbon"}
    Relationships:
    - alice -OWNS-> vault (weight 2)
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from core.errors import GraphError
from core.graph.graph import Graph
from core.graph.model import (
    GraphNode,
    GraphRelationship,
    GraphSnapshot,
    require_counts,
    total_weights,
)
from core.graph.options import DEFAULT_MARKER, GraphDirection
from core.io import jsonio

_PLAIN = re.compile(r"[A-Za-z0-9_.:@/#+][A-Za-z0-9_.:@/#+\-]*\Z")


@dataclass(frozen=True, slots=True)
class GraphContextConfig:
    """What the rendered message may hold.

    ``focus``: node ids to centre on; only nodes within ``depth`` hops of them
    along ``direction`` are candidates. ``max_property_chars`` caps each
    item's properties text (cut with an ellipsis).
    """

    max_nodes: int = 64
    max_relationships: int = 128
    focus: tuple[str, ...] = ()
    direction: GraphDirection = GraphDirection.BOTH
    depth: int = 1
    max_property_chars: int = 200

    def __post_init__(self) -> None:
        require_counts(self, "max_nodes", "max_relationships", "depth", "max_property_chars")
        object.__setattr__(self, "direction", GraphDirection(self.direction))
        object.__setattr__(self, "focus", tuple(dict.fromkeys(self.focus)))


@dataclass(frozen=True, slots=True)
class Selection:
    """The nodes and relationships chosen for the message, in display order."""

    nodes: tuple[GraphNode, ...]
    relationships: tuple[GraphRelationship, ...]
    total_nodes: int
    total_relationships: int
    scope_nodes: int  # candidates: all nodes, or those within the focus
    scope_relationships: int  # relationships between candidates


def select(graph: Graph | GraphSnapshot, config: GraphContextConfig) -> Selection:
    """Choose what to render: linear passes plus a bounded heap per ranking."""
    snapshot = graph.snapshot() if isinstance(graph, Graph) else graph
    nodes = {node.id: node for node in snapshot.nodes}
    rels = snapshot.relationships
    weights = total_weights(nodes, rels)
    distance = _focus_distances(nodes, rels, config) if config.focus else dict.fromkeys(nodes, 0)
    ranked = heapq.nsmallest(
        config.max_nodes,
        distance,
        key=lambda node_id: (distance[node_id], -weights[node_id], node_id),
    )
    chosen = set(ranked)
    in_scope = [rel for rel in rels if rel.source in distance and rel.target in distance]
    shown = [rel for rel in in_scope if rel.source in chosen and rel.target in chosen]
    shown_rels = heapq.nsmallest(
        config.max_relationships, shown, key=lambda rel: (-rel.weight, rel.id)
    )
    return Selection(
        tuple(nodes[node_id] for node_id in ranked),
        tuple(shown_rels),
        len(nodes),
        len(rels),
        len(distance),
        len(in_scope),
    )


def _focus_distances(
    nodes: dict[str, GraphNode], rels: Iterable[GraphRelationship], config: GraphContextConfig
) -> dict[str, int]:
    missing = [node_id for node_id in config.focus if node_id not in nodes]
    if missing:
        close = (
            difflib.get_close_matches(missing[0], list(nodes), n=1) if len(nodes) <= 10_000 else []
        )
        fix = f"did you mean {close[0]!r}?" if close else "use the id of a node in the graph"
        raise GraphError(f"focus node {missing[0]!r} is not in the graph", fix=fix)
    neighbours: dict[str, list[str]] = {}
    for rel in rels:
        if config.direction is not GraphDirection.IN:
            neighbours.setdefault(rel.source, []).append(rel.target)
        if config.direction is not GraphDirection.OUT:
            neighbours.setdefault(rel.target, []).append(rel.source)
    distance = dict.fromkeys(config.focus, 0)
    queue = deque(config.focus)
    while queue:
        node_id = queue.popleft()
        hops = distance[node_id] + 1
        if hops > config.depth:
            continue
        for other in neighbours.get(node_id, ()):
            if other not in distance:
                distance[other] = hops
                queue.append(other)
    return distance


def _name(text: str) -> str:
    return text if _PLAIN.match(text) else jsonio.dumps(text).decode()


def _number(value: float) -> str:
    return f"{value:.6g}"


def _properties(properties: object, limit: int) -> str:
    if not properties:
        return ""
    text = jsonio.dumps(properties, sort_keys=True).decode()
    if len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return " " + text


def _node_line(node: GraphNode, config: GraphContextConfig) -> str:
    labels = f" [{', '.join(_name(label) for label in sorted(node.labels))}]" if node.labels else ""
    return f"- {_name(node.id)}{labels}{_properties(node.properties, config.max_property_chars)}"


def _rel_line(rel: GraphRelationship, config: GraphContextConfig) -> str:
    arrow = f"{_name(rel.source)} -{_name(rel.type)}-> {_name(rel.target)}"
    return (
        f"- {arrow} (weight {_number(rel.weight)})"
        f"{_properties(rel.properties, config.max_property_chars)}"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _left_out(selection: Selection, config: GraphContextConfig) -> str | None:
    over_nodes = selection.scope_nodes - len(selection.nodes)
    over_rels = selection.scope_relationships - len(selection.relationships)
    outside_nodes = selection.total_nodes - selection.scope_nodes
    outside_rels = selection.total_relationships - selection.scope_relationships
    parts = []
    if over_nodes or over_rels:
        parts.append(
            f"{_plural(over_nodes, 'node')} and {_plural(over_rels, 'relationship')} "
            "over the limits "
            f"(max_nodes {config.max_nodes}, max_relationships {config.max_relationships}; "
            "lightest left out first)"
        )
    if outside_nodes or outside_rels:
        parts.append(
            f"{_plural(outside_nodes, 'node')} and {_plural(outside_rels, 'relationship')} "
            "outside the focus"
        )
    return "Left out: " + "; ".join(parts) + "." if parts else None


def render_graph_text(
    graph: Graph | GraphSnapshot,
    config: GraphContextConfig | None = None,
    marker: str = DEFAULT_MARKER,
) -> str | None:
    """The graph message's text, starting with ``marker``; None when the graph is empty."""
    if not marker:
        raise GraphError(
            "the graph message marker is empty", fix="use a marker such as 'CUCA graph memory:'"
        )
    config = config if config is not None else GraphContextConfig()
    snapshot = graph.snapshot() if isinstance(graph, Graph) else graph
    if snapshot.is_empty:
        return None
    selection = select(snapshot, config)
    lines = [
        (f"{marker} {_plural(selection.total_nodes, 'node')}, "
        f"{_plural(selection.total_relationships, 'relationship')}.")
    ]
    if config.focus:
        lines.append(
            f"Focus: {', '.join(_name(node_id) for node_id in config.focus)} "
            f"(direction {config.direction.value}, depth {config.depth})."
        )
    if selection.nodes:
        lines.append("Nodes:")
        lines.extend(_node_line(node, config) for node in selection.nodes)
    if selection.relationships:
        lines.append("Relationships:")
        lines.extend(_rel_line(rel, config) for rel in selection.relationships)
    left_out = _left_out(selection, config)
    if left_out:
        lines.append(left_out)
    return "\n".join(lines)
