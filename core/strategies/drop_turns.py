"""DropTurns{turns}: removes whole turns per pass, oldest first, never the current turn."""

from __future__ import annotations

from core.engine.workspace import Workspace
from core.strategies.base import Param, StrategyInfo


def apply(workspace: Workspace, *, turns: int | None) -> str:
    limit = workspace.offload_turns if turns is None else turns
    starts = workspace.structure.user_positions
    dropped = 0
    for turn, start in enumerate(starts[:-1]):  # the last start is the current turn
        if dropped >= limit or not workspace.should_continue():
            break
        end = starts[turn + 1]
        took = False
        for position in range(start, end):
            if workspace.alive(position) and not workspace.pinned(position):
                took = workspace.remove([position], f"turn {turn + 1} dropped") or took
        dropped += took
    return f"dropped {dropped} whole turn(s), oldest first"


STRATEGY = StrategyInfo(
    name="drop_turns",
    alias="DropTurns",
    summary="remove whole turns per pass, oldest first",
    params=(Param("turns", int, None, "whole turns removed per pass (default: the run's offload_turns)"),),
    apply=apply,
)
