"""DropOldThinking: the thinking of turns before the current one goes, oldest first.

Anthropic's API strips the thinking blocks of earlier turns itself: the model
never sees them again, and they do not count toward the context window.
OpenAI's reasoning models discard their reasoning after each turn too (a
Responses ``reasoning`` item of an earlier turn may be left out; those since
the newest user message must be sent with the calls they led to). So only the
current turn's thinking (since the newest user message, the tool-use loop in
progress) stays, signatures and encrypted content intact; keeping an earlier
turn's spends the budget on text no model reads. This step removes it before
any step that loses something a model would see. An assistant message that
held nothing but thinking goes whole. Oldest first, and only as much as the
budget needs.
"""

from __future__ import annotations

from typing import Any

from core.engine.workspace import Workspace
from core.messages import has_text, tool_calls
from core.strategies.base import StrategyInfo

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})  # Anthropic; Responses
REASON = "thinking of an earlier turn: the API discards it, no model reads it again"


def _is_thinking(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in THINKING_BLOCKS


def apply(workspace: Workspace) -> str:
    messages = workspace.messages
    current = workspace.structure.current_turn_start
    end = current if current is not None else 0  # no user message: every turn is the current one
    dropped = blocks = 0
    for position in range(end):
        message = messages[position]
        content = message.data.get("content")
        if not isinstance(content, list) or message.role != "assistant":
            continue  # (most messages: checked before anything costlier)
        kept = [part for part in content if not _is_thinking(part)]
        if len(kept) == len(content) or not workspace.alive(position):
            continue
        if not workspace.should_continue():
            break
        if workspace.pinned(position) or workspace.must_go(position):
            continue  # (a message the window removes anyway is left to it)
        data = {**message.data, "content": kept}
        if not has_text(data) and not tool_calls(data) and not any(isinstance(p, dict) for p in kept):
            if not workspace.remove([position], REASON):
                continue
            dropped += 1
        else:
            workspace.rewrite(position, data, REASON)
        blocks += len(content) - len(kept)
    whole = f"; {dropped} message(s) held nothing else and went whole" if dropped else ""
    return f"dropped {blocks} thinking block(s) of earlier turns, oldest first{whole}"


STRATEGY = StrategyInfo(
    name="drop_old_thinking",
    alias="DropOldThinking",
    summary="remove the thinking of earlier turns (the APIs discard it; no model reads it again)",
    params=(),
    apply=apply,
)
