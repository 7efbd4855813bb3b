"""The values a graph operation is asked for: policies, directions and defaults.

Standard library only, so `cli.graph` declares its options from these very
enums and defaults at start-up without loading the graph code.
"""

from __future__ import annotations

from enum import StrEnum

DEFAULT_MAX_NODES = 1_000_000
DEFAULT_MAX_RELATIONSHIPS = 5_000_000
DEFAULT_MARKER = "CUCA graph memory:"  # the first words of the graph's system message


class ConflictPolicy(StrEnum):
    """Who wins when an incoming node or relationship has an id the graph already holds."""

    KEEP_EXISTING = "keep_existing"
    PREFER_INCOMING = "prefer_incoming"
    MERGE = "merge"


class WeightRule(StrEnum):
    """How the weights of two relationships with the same id combine."""

    INCOMING = "incoming"
    MAX = "max"
    SUM = "sum"


class Eviction(StrEnum):
    """What a merge or import does when its result would exceed a cap."""

    NONE = "none"
    LIGHTEST = "lightest"


class GraphDirection(StrEnum):
    """Which relationships a focus walk follows: outgoing, incoming or both."""

    OUT = "out"
    IN = "in"
    BOTH = "both"
