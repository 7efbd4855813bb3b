"""What one run is told: the resolved strategy list, the policy and the settings the engine reads.

The caller builds it from its configuration (``MemoryConfig.run_settings()``): the engine never
reads the configuration or the strategy registry itself, so neither depends on the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from core.engine.policy import Policy
from core.engine.structure import KeepRule
from core.engine.workspace import Workspace


@dataclass(frozen=True)
class Step:
    """One strategy as a run takes it, its parameters bound."""

    name: str
    label: str  # as the report lists it, parameters included
    run: Callable[[Workspace], str]  # acts on the workspace; a short sentence saying what it did
    needs: str | None = None  # the seam it needs ("store", "summarizer")
    # It keeps only the newest messages that fit: strategies before it leave what it removes alone.
    cuts_to_newest: bool = False


@dataclass(frozen=True)
class RunSettings:
    steps: tuple[Step, ...]
    policy: Policy
    max_messages: int | None
    max_tokens: int | None
    max_fraction: float | None
    window: int
    window_resolved: bool  # whether a model named the window (else the configured default)
    keep: tuple[KeepRule, ...]
    warning_marker: str
    graph_marker: str
    warn_fraction: float | None
    offload_turns: int
    model: str | None  # the model the output goes to, when configured

    def unlimited(self) -> RunSettings:
        return replace(self, max_messages=None, max_tokens=None, max_fraction=None)
