"""Merge and import: the policies and the all-or-nothing algorithms (reports: reports.py).

Both work on copies of the graph's id-keyed dicts and hand back the new dicts;
the caller swaps them in only when everything succeeded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from core.errors import GraphError
from core.graph.caps import GraphCaps, enforce_caps
from core.graph.model import GraphNode, GraphRelationship, GraphSnapshot, exact_sum, gc_paused
from core.graph.options import ConflictPolicy, WeightRule
from core.graph.reports import ChangeSet, Conflict, GraphImportReport, MergeReport
from core.io import jsonio

_RESOLUTIONS = {
    ConflictPolicy.KEEP_EXISTING: "kept_existing",
    ConflictPolicy.PREFER_INCOMING: "took_incoming",
    ConflictPolicy.MERGE: "merged",
}


@dataclass(frozen=True, slots=True)
class MergePolicy:
    """``conflict``: keep_existing keeps the graph's item whole; prefer_incoming
    takes the incoming item; merge unites labels (existing order first) and
    merges properties key by key (top-level keys; the incoming value wins),
    and for relationships takes the incoming ``from``/``to``/``type``.

    ``weights`` combines the weights of a relationship id present on both
    sides under prefer_incoming and merge; keep_existing keeps the existing
    weight, so it only goes with the default ``incoming``.
    """

    conflict: ConflictPolicy = ConflictPolicy.MERGE
    weights: WeightRule = WeightRule.INCOMING

    def __post_init__(self) -> None:
        object.__setattr__(self, "conflict", ConflictPolicy(self.conflict))
        object.__setattr__(self, "weights", WeightRule(self.weights))
        if (
            self.conflict is ConflictPolicy.KEEP_EXISTING
            and self.weights is not WeightRule.INCOMING
        ):
            raise GraphError(
                f"weights {self.weights.value!r} has no effect with policy keep_existing, "
                "which keeps existing relationships whole",
                fix="drop --weights, or use --policy merge or prefer_incoming to combine weights",
            )

    def combine(self, existing: float, incoming: float) -> float:
        if self.conflict is ConflictPolicy.KEEP_EXISTING:
            return existing
        if self.weights is WeightRule.MAX:
            return max(existing, incoming)
        if self.weights is WeightRule.SUM:
            return existing + incoming
        return incoming

    def to_dict(self) -> dict[str, str]:
        return {"conflict": self.conflict.value, "weights": self.weights.value}


def same_value(left: Any, right: Any) -> bool:
    """JSON equality: unlike ``==``, 1, 1.0 and true differ; key order does not matter."""
    if left is right or (
        isinstance(left, dict) and isinstance(right, dict) and not left and not right
    ):
        return True
    if left != right:
        return False
    return jsonio.dumps(left, sort_keys=True) == jsonio.dumps(right, sort_keys=True)


def _node_fields(left: GraphNode, right: GraphNode) -> tuple[str, ...]:
    differ = []
    if left.labels != right.labels:
        differ.append("labels")
    if not same_value(left.properties, right.properties):
        differ.append("properties")
    return tuple(differ)


def _rel_fields(left: GraphRelationship, right: GraphRelationship) -> tuple[str, ...]:
    differ = []
    if left.source != right.source:
        differ.append("from")
    if left.target != right.target:
        differ.append("to")
    if left.type != right.type:
        differ.append("type")
    if left.weight != right.weight:
        differ.append("weight")
    if not same_value(left.properties, right.properties):
        differ.append("properties")
    return tuple(differ)


def _resolve_node(old: GraphNode, new: GraphNode, policy: MergePolicy) -> GraphNode:
    if policy.conflict is ConflictPolicy.KEEP_EXISTING:
        return old
    if policy.conflict is ConflictPolicy.PREFER_INCOMING:
        return new
    labels = tuple(dict.fromkeys(old.labels + new.labels))
    properties = {**old.properties, **new.properties} if new.properties else old.properties
    return GraphNode(old.id, labels, properties)


def _resolve_rel(
    old: GraphRelationship, new: GraphRelationship, policy: MergePolicy
) -> GraphRelationship:
    weight = policy.combine(old.weight, new.weight)
    if policy.conflict is ConflictPolicy.KEEP_EXISTING:
        return old
    if policy.conflict is ConflictPolicy.PREFER_INCOMING:
        properties = new.properties
    else:
        properties = {**old.properties, **new.properties} if new.properties else old.properties
    return GraphRelationship(new.id, new.source, new.target, new.type, weight, properties)


def _same_node(a: GraphNode, b: GraphNode) -> bool:
    return a is b or (a.labels == b.labels and same_value(a.properties, b.properties))


def _same_rel(a: GraphRelationship, b: GraphRelationship) -> bool:
    return a is b or (
        (a.source, a.target, a.type) == (b.source, b.target, b.type)
        and a.weight == b.weight
        and same_value(a.properties, b.properties)
    )


@gc_paused()
def merge_into(
    nodes: dict[str, GraphNode],
    rels: dict[str, GraphRelationship],
    incoming: GraphSnapshot,
    policy: MergePolicy,
    caps: GraphCaps,
    *,
    source: str | None = None,
) -> tuple[dict[str, GraphNode], dict[str, GraphRelationship], MergeReport]:
    """Merge a valid ``incoming`` into copies of ``nodes``/``rels``; the originals are not touched.

    Raises GraphError when the result would exceed ``caps`` and eviction is off.
    """
    before = (len(nodes), len(rels))
    nodes, rels = dict(nodes), dict(rels)
    conflicts: list[Conflict] = []
    node_changes = _merge_items(nodes, incoming.nodes, policy, _NODE_RULES, conflicts)
    rel_changes = _merge_items(rels, incoming.relationships, policy, _REL_RULES, conflicts)
    _check_weights(rels, rel_changes)
    evicted = enforce_caps(nodes, rels, caps, action="merge")
    report = MergeReport(
        policy,
        caps,
        before,
        (len(nodes), len(rels)),
        node_changes,
        rel_changes,
        tuple(conflicts),
        evicted,
        source,
    )
    return nodes, rels, report


Item = TypeVar("Item", GraphNode, GraphRelationship)


@dataclass(frozen=True, slots=True)
class _Rules(Generic[Item]):
    """How one kind of item (nodes or relationships) compares, resolves and reports a conflict."""

    kind: Literal["node", "relationship"]
    same: Callable[[Item, Item], bool]
    resolve: Callable[[Item, Item, MergePolicy], Item]
    fields: Callable[[Item, Item], tuple[str, ...]]
    # (existing, incoming, combined) weights, for the kinds that have one.
    weights: Callable[[Item, Item, MergePolicy], tuple[float, float, float] | None]


def _rel_weights(
    old: GraphRelationship, new: GraphRelationship, policy: MergePolicy
) -> tuple[float, float, float]:
    return (old.weight, new.weight, policy.combine(old.weight, new.weight))


_NODE_RULES: _Rules[GraphNode] = _Rules("node", _same_node, _resolve_node, _node_fields, lambda *_: None)
_REL_RULES: _Rules[GraphRelationship] = _Rules(
    "relationship", _same_rel, _resolve_rel, _rel_fields, _rel_weights
)


def _merge_items(
    items: dict[str, Item],
    incoming: Sequence[Item],
    policy: MergePolicy,
    rules: _Rules[Item],
    conflicts: list[Conflict],
) -> ChangeSet:
    """Merge ``incoming`` into ``items`` in place, adding a Conflict for each id on both sides
    whose items differ (or whose weights the rule changes)."""
    added: list[str] = []
    updated: list[str] = []
    unchanged = 0
    resolution = _RESOLUTIONS[policy.conflict]
    for item in incoming:
        old = items.get(item.id)
        if old is None:
            items[item.id] = item
            added.append(item.id)
            continue
        weights = rules.weights(old, item, policy)
        if rules.same(old, item) and (weights is None or weights[2] == weights[0]):
            unchanged += 1
            continue
        result = rules.resolve(old, item, policy)
        outcome: Literal["updated", "unchanged"] = "unchanged"
        if rules.same(result, old):
            unchanged += 1
        else:
            items[item.id] = result
            updated.append(item.id)
            outcome = "updated"
        fields = rules.fields(old, item)
        conflicts.append(Conflict(rules.kind, item.id, fields, resolution, outcome, weights))
    return ChangeSet(tuple(added), tuple(updated), unchanged)


def _check_weights(rels: Mapping[str, GraphRelationship], changes: ChangeSet) -> None:
    """Summing two finite weights can overflow to infinity: refuse rather than store it."""
    for rel_id in changes.updated:
        if not math.isfinite(rels[rel_id].weight):
            raise GraphError(
                f"merge refused: the weights of relationship {rel_id!r} sum to infinity; "
                "nothing was changed",
                fix="use --weights max or incoming, or smaller weights",
            )


@gc_paused()
def import_into(
    snapshot: GraphSnapshot,
    before: tuple[int, int],
    caps: GraphCaps,
    *,
    warnings: int = 0,
    source: str | None = None,
) -> tuple[dict[str, GraphNode], dict[str, GraphRelationship], GraphImportReport]:
    """Dicts holding a valid ``snapshot`` alone, fitted to ``caps``, and the report."""
    nodes = {node.id: node for node in snapshot.nodes}
    rels = {rel.id: rel for rel in snapshot.relationships}
    evicted = enforce_caps(nodes, rels, caps, action="import")
    labels: Counter[str] = Counter()
    for node in nodes.values():
        labels.update(node.labels)
    types = Counter(rel.type for rel in rels.values())
    total = exact_sum([rel.weight for rel in rels.values()])
    report = GraphImportReport(
        caps,
        before,
        (len(nodes), len(rels)),
        dict(labels),
        dict(types),
        total,
        warnings,
        evicted,
        source,
    )
    return nodes, rels, report
