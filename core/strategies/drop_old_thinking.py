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

from core.engine.workspace import Workspace
from core.messages import has_text, tool_calls
from core.strategies.base import StrategyInfo

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})  # Anthropic; Responses
REASON = "thinking of an earlier turn: the first thing to go (the APIs discard or refuse it once the run changes what came before it)"


def shed(workspace: Workspace, position: int, kinds: frozenset[str], reason: str) -> int:
    """Remove the ``kinds`` of thinking parts from the assistant message at ``position`` (the message
    whole when nothing else is left in it); the number of parts removed (0 when none, or refused)."""
    message = workspace.messages[position]
    content = message.data.get("content")
    if not isinstance(content, list) or message.role != "assistant":
        return 0  # (most messages: checked before anything costlier)
    kept = [part for part in content if not (isinstance(part, dict) and part.get("type") in kinds)]
    if len(kept) == len(content) or not workspace.alive(position):
        return 0
    data = {**message.data, "content": kept or None}  # (calls alone: no content, as the chat format has it)
    if not has_text(data) and not tool_calls(data) and not any(isinstance(p, dict) for p in kept):
        if not workspace.remove([position], reason):
            return 0
    else:
        workspace.rewrite(position, data, reason)
    return len(content) - len(kept)


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
