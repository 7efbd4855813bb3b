"""Offload{turns}: moves the oldest turns into a store, recoverable with `compact recall`.

The store seam is not built yet: without a store the pipeline skips this
strategy and the report says `skipped: no store`.
"""

from __future__ import annotations

from core.errors import StrategyError
from core.strategies.base import Param, StrategyInfo
from core.workspace import Workspace


def apply(workspace: Workspace, *, turns: int) -> str:
    raise StrategyError("offload needs a store (--store), which this version does not provide yet")


STRATEGY = StrategyInfo(
    name="offload",
    alias="Offload",
    summary="move the oldest turns into the store (needs a store)",
    params=(Param("turns", int, 10, "how many of the oldest turns to move"),),
    apply=apply,
    needs="store",
)
