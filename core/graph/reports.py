"""The reports of a merge and of an import: values with a JSON-ready ``to_dict``.

Their JSON shape (stable key order) is schemas/graph-report.schema.json.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from core.graph.caps import Evicted, GraphCaps

if TYPE_CHECKING:
    from core.graph.merge import MergePolicy

REPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Conflict:
    """An id on both sides whose items differ (or whose weights the rule changes)."""

    kind: Literal["node", "relationship"]
    id: str
    fields: tuple[str, ...]
    resolution: str
    outcome: Literal["updated", "unchanged"]
    weight: tuple[float, float, float] | None = None  # existing, incoming, result

    def to_dict(self) -> dict[str, Any]:
        weight = None
        if self.weight is not None:
            existing, incoming, result = self.weight
            weight = {"existing": existing, "incoming": incoming, "result": result}
        return {
            "kind": self.kind,
            "id": self.id,
            "fields": list(self.fields),
            "resolution": self.resolution,
            "outcome": self.outcome,
            "weight": weight,
        }


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Ids added and updated, and how many incoming items changed nothing."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": self.unchanged,
            "added_ids": list(self.added),
            "updated_ids": list(self.updated),
        }


def _counts(nodes: int, relationships: int) -> dict[str, int]:
    return {"nodes": nodes, "relationships": relationships}


@dataclass(frozen=True)
class MergeReport:
    """What a merge did. Eviction, if any, happened after the merge step it counts."""

    policy: MergePolicy
    caps: GraphCaps
    before: tuple[int, int]
    after: tuple[int, int]
    nodes: ChangeSet
    relationships: ChangeSet
    conflicts: tuple[Conflict, ...] = ()
    evicted: Evicted = field(default_factory=Evicted)
    source: str | None = None

    @property
    def changed(self) -> bool:
        return bool(
            self.nodes.added
            or self.nodes.updated
            or self.relationships.added
            or self.relationships.updated
            or self.evicted.nodes
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "graph-merge",
            "version": REPORT_VERSION,
            "source": self.source,
            "policy": self.policy.to_dict(),
            "caps": self.caps.to_dict(),
            "before": _counts(*self.before),
            "after": _counts(*self.after),
            "nodes": self.nodes.to_dict(),
            "relationships": self.relationships.to_dict(),
            "conflicts": [conflict.to_dict() for conflict in self.conflicts],
            "evicted": self.evicted.to_dict(),
        }

    def summary(self) -> str:
        n, r = self.nodes, self.relationships
        text = (
            f"merged: nodes {len(n.added)} added, {len(n.updated)} updated, "
            f"{n.unchanged} unchanged; relationships {len(r.added)} added, "
            f"{len(r.updated)} updated, {r.unchanged} unchanged; "
            f"{len(self.conflicts)} conflicts ({self.policy.conflict.value}, weights "
            f"{self.policy.weights.value})"
        )
        if self.evicted.nodes:
            text += (
                f"; evicted {len(self.evicted.nodes)} nodes and "
                f"{self.evicted.relationship_count} relationships (lightest first)"
            )
        return text + f"; graph now {self.after[0]} nodes, {self.after[1]} relationships"


@dataclass(frozen=True)
class GraphImportReport:
    """What an import (replacing the graph by a snapshot) brought in."""

    caps: GraphCaps
    before: tuple[int, int]
    after: tuple[int, int]
    labels: Mapping[str, int]
    types: Mapping[str, int]
    total_weight: float
    warnings: int = 0
    evicted: Evicted = field(default_factory=Evicted)
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "graph-import",
            "version": REPORT_VERSION,
            "source": self.source,
            "caps": self.caps.to_dict(),
            "before": _counts(*self.before),
            "after": _counts(*self.after),
            "labels": dict(sorted(self.labels.items())),
            "types": dict(sorted(self.types.items())),
            "total_weight": self.total_weight if math.isfinite(self.total_weight) else None,
            "warnings": self.warnings,
            "evicted": self.evicted.to_dict(),
        }

    def summary(self) -> str:
        text = (
            f"imported: {self.after[0]} nodes ({len(self.labels)} labels), {self.after[1]} "
            f"relationships ({len(self.types)} types), total weight {self.total_weight:g}; "
            f"replaced {self.before[0]} nodes, {self.before[1]} relationships"
        )
        if self.warnings:
            text += f"; {self.warnings} warnings"
        if self.evicted.nodes:
            text += (
                f"; evicted {len(self.evicted.nodes)} nodes and "
                f"{self.evicted.relationship_count} relationships (lightest first)"
            )
        return text
