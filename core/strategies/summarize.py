"""Summarize{turns}: replaces the oldest turns with one summary message.

The summarizer seam is not built yet: without a summarizer the pipeline
skips this strategy and the report says `skipped: no summarizer`.
"""

from __future__ import annotations

from core.errors import StrategyError
from core.strategies.base import Param, StrategyInfo
from core.workspace import Workspace


def apply(workspace: Workspace, *, turns: int) -> str:
    raise StrategyError("summarize needs a summarizer, which this version does not provide yet")


STRATEGY = StrategyInfo(
    name="summarize",
    alias="Summarize",
    summary="replace the oldest turns with one summary (needs a summarizer)",
    params=(Param("turns", int, 10, "how many of the oldest turns to summarize"),),
    apply=apply,
    needs="summarizer",
)
