"""SlidingWindow{keep_messages}: keeps the newest messages, pinned ones counted in.

Under a token budget the window still exceeds, it keeps fewer: the newest
messages that fit (like LangChain's ``trim_messages(strategy="last")``), so a
long current turn can still be brought under budget. A call is never split
from its results: the cut moves later, taking the whole exchange.
"""

from __future__ import annotations

from core.strategies.base import Param, StrategyInfo
from core.workspace import Workspace


def apply(workspace: Workspace, *, keep_messages: int) -> str:
    structure = workspace.structure
    before = workspace.live_messages
    for position in range(len(workspace.messages)):
        within_window = workspace.live_messages <= keep_messages
        if within_window and (workspace.full or not workspace.over_budget()):
            break
        if not workspace.alive(position) or workspace.pinned(position) or not structure.counted[position]:
            continue
        workspace.remove([position], "outside the sliding window")
    return f"kept the newest {workspace.live_messages} of {before} messages (window {keep_messages})"


STRATEGY = StrategyInfo(
    name="sliding_window",
    alias="SlidingWindow",
    summary="keep the newest keep_messages messages (fewer if still over a token budget)",
    params=(Param("keep_messages", int, 40, "how many of the newest messages to keep, pinned included"),),
    apply=apply,
)
