"""DropObservations: removes tool call/result pairs outside the current turn, oldest first."""

from __future__ import annotations

from core.engine.workspace import Workspace
from core.messages import call_ids
from core.strategies.base import StrategyInfo


def apply(workspace: Workspace) -> str:
    structure = workspace.structure
    current = structure.current_turn_start
    end = current if current is not None else len(workspace.messages)
    dropped = 0
    for position in range(end):
        for call_id in call_ids(workspace.messages[position].data):
            if not workspace.should_continue():
                return f"removed {dropped} tool call/result pair(s) outside the current turn"
            if workspace.alive(position) and workspace.remove_pair(position, call_id, "observation outside the current turn"):
                dropped += 1
    return f"removed {dropped} tool call/result pair(s) outside the current turn"


STRATEGY = StrategyInfo(
    name="drop_observations",
    alias="DropObservations",
    summary="remove tool call/result pairs outside the current turn",
    params=(),
    apply=apply,
)
