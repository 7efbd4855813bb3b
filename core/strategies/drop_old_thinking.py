"""DropOldThinking: the thinking of turns before the current one goes, oldest first.

Earlier turns' thinking is the first thing to go when a run must shrink: older
Claude models and OpenAI's reasoning models discard it between turns themselves,
and on Claude models with preserved thinking (Fable 5.1, Opus 5.5, ...) a
thinking block is bound to everything before it, so once compaction changes
the conversation ahead of it the API refuses it or drops it. So only the
current turn's thinking (since the newest user message, the tool-use loop in
progress) stays, signatures and encrypted content intact. This step removes it
before any step that loses something a model would see, oldest first and only
as much as the budget needs; the pipeline's ``thinking_after_change`` step then
removes what is left behind the first change. An assistant message that held
nothing but thinking goes whole.
"""

from __future__ import annotations

from core.engine.bound_thinking import THINKING_BLOCKS, shed
from core.engine.workspace import Workspace
from core.strategies.base import StrategyInfo

REASON = "thinking of an earlier turn: the first thing to go (the APIs discard or refuse it once the run changes what came before it)"


def apply(workspace: Workspace) -> str:
    messages = workspace.messages
    current = workspace.structure.current_turn_start
    end = current if current is not None else 0  # no user message: every turn is the current one
    dropped = blocks = 0
    for position in range(end):
        message = messages[position]
        if message.role != "assistant" or not isinstance(message.data.get("content"), list):
            continue
        if not workspace.should_continue():
            break
        if workspace.pinned(position) or workspace.must_go(position):
            continue  # (a message the window removes anyway is left to it)
        shed_now = shed(workspace, position, THINKING_BLOCKS, REASON)
        blocks += shed_now
        dropped += bool(shed_now) and not workspace.alive(position)
    whole = f"; {dropped} message(s) held nothing else and went whole" if dropped else ""
    return f"dropped {blocks} thinking block(s) of earlier turns, oldest first{whole}"


STRATEGY = StrategyInfo(
    name="drop_old_thinking",
    alias="DropOldThinking",
    summary="remove the thinking of earlier turns first (once compaction changes what came before it, the APIs discard or refuse it)",
    params=(),
    apply=apply,
)
