"""ClearToolResults{keep_pairs}: old tool outputs become a placeholder; calls and results stay paired.

Oldest first, and only as many as the budget needs; when clearing only some of them meets the
budget, those the agent did not use later (no string of theirs in what it wrote after them) go
first. What stays untouched: the newest ``keep_pairs`` results and, under a token budget, every
result among the newest messages that make up ``keep_recent`` of the budget (the work in hand).
The placeholder names the tool, its target and, for a source file, the names it
defines, so the model knows what it saw and can read it again.
"""

from __future__ import annotations

from collections.abc import Callable

from core.engine import fit, placeholders
from core.engine.file_calls import quotes_files
from core.engine.workspace import Workspace
from core.messages import call_arguments, call_name, call_with_id, content_text, string_values
from core.strategies.base import Param, StrategyInfo


def apply(workspace: Workspace, *, keep_pairs: int, keep_recent: float) -> str:
    messages = workspace.messages
    results = [i for i, m in enumerate(messages) if m.role in ("tool", "function") and workspace.alive(i)]
    protected_from = workspace.recent_start(keep_recent)
    candidates = [
        position for position in results[: max(0, len(results) - keep_pairs)]
        if position < protected_from and not workspace.pinned(position) and not workspace.must_go(position)
        and not placeholders.is_placeholder(messages[position])
    ]
    candidates, unused = fit.unused_first(workspace, candidates)
    cleared = fit.take(workspace, (fit.Proposal(p, _clearing(workspace, p), cut_if_overshoot=True) for p in candidates))
    order = "oldest first, those the agent did not use later before the rest" if unused else "oldest first"
    return f"cleared {cleared} tool result(s), {order}; the newest {keep_pairs} and the recent work kept"


def _clearing(workspace: Workspace, position: int) -> Callable[[], fit.Rewrite | None]:
    """The result at ``position`` as its placeholder (naming the call's tool and target, and the gist
    of what it held), the short form when that costs as much, None when even that does."""
    def make() -> fit.Rewrite | None:
        message = workspace.messages[position]
        tool, target, quoting, asked = "", "", False, set[str]()
        key = next(iter(workspace.structure.answered_by.get(position, ())), None)  # the call it answers (the first)
        if key is not None:
            call = call_with_id(workspace.messages[key[0]].data, key[1])
            if call is not None:
                tool, target, quoting = call_name(call), placeholders.call_target(call), quotes_files(call)
                asked = set(string_values(call_arguments(call)))
        gist = placeholders.result_gist(content_text(message.data), quotes_files=quoting, target=target, known=asked)
        data = placeholders.with_content(message, placeholders.cleared_result(message.tokens, tool, target, gist))
        if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            data = placeholders.with_content(message, placeholders.cleared(message.tokens))  # the short form
            if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
                return None  # even that would cost as much as the result
        return fit.Rewrite(data, "tool result cleared")
    return make


STRATEGY = StrategyInfo(
    name="clear_tool_results",
    alias="ClearToolResults",
    summary="replace old tool results with a placeholder naming what they held, oldest first",
    params=(
        Param("keep_pairs", int, 3, "how many of the newest tool results stay whole"),
        Param("keep_recent", float, 0.5, "results among the newest messages making up this share of a token budget stay whole"),
    ),
    apply=apply,
)
