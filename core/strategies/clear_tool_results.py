"""ClearToolResults{keep_pairs}: old tool outputs become a placeholder; calls and results stay paired."""

from __future__ import annotations

from core.strategies import placeholders
from core.strategies.base import Param, StrategyInfo
from core.workspace import Workspace


def apply(workspace: Workspace, *, keep_pairs: int) -> str:
    messages = workspace.messages
    results = [i for i, m in enumerate(messages) if m.role == "tool"]
    candidates = results[: max(0, len(results) - keep_pairs)]
    cleared = 0
    for position in candidates:
        if not workspace.should_continue():
            break
        message = messages[position]
        if workspace.pinned(position) or placeholders.is_placeholder(message):
            continue
        data = placeholders.with_content(message, placeholders.cleared(message.tokens))
        if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            continue  # the placeholder would cost as much as the result
        workspace.rewrite(position, data, "tool result cleared")
        cleared += 1
    return f"cleared {cleared} tool result(s), kept the newest {keep_pairs}"


STRATEGY = StrategyInfo(
    name="clear_tool_results",
    alias="ClearToolResults",
    summary="replace all but the newest tool results with a placeholder",
    params=(Param("keep_pairs", int, 3, "how many of the newest tool results to keep whole"),),
    apply=apply,
)
