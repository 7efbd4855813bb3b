"""ClampOversizedMessages{max_part_tokens}: long text parts keep their head and tail, token-exact."""

from __future__ import annotations

from collections.abc import Callable

from core.engine import fit
from core.engine.clamp import MIN_PART_TOKENS, clamp_message
from core.engine.workspace import Workspace
from core.strategies.base import Param, StrategyInfo

# Without max_part_tokens, under a token budget: one part may keep at most this share of it.
PART_SHARE = 0.25
SEED_PART_TOKENS = 4096


def part_limit(workspace: Workspace, max_part_tokens: int | None) -> int:
    if max_part_tokens is not None:
        return max_part_tokens
    limit = workspace.budget.token_limit
    if limit is not None and not workspace.full:
        return max(MIN_PART_TOKENS, min(SEED_PART_TOKENS, int(limit * PART_SHARE)))
    return SEED_PART_TOKENS


def apply(workspace: Workspace, *, max_part_tokens: int | None) -> str:
    limit = part_limit(workspace, max_part_tokens)
    oversized = (fit.Proposal(p, _clamping(workspace, p, limit, max_part_tokens is None))
                 for p, message in enumerate(workspace.messages) if message.tokens > limit)
    clamped_parts = fit.take(workspace, oversized)
    return f"clamped {clamped_parts} text part(s) and argument(s) to {limit} tokens"


def _clamping(workspace: Workspace, position: int, limit: int, as_needed: bool) -> Callable[[], fit.Rewrite | None]:
    """The message at ``position`` with its long parts cut to ``limit`` tokens; ``as_needed``: only as
    much as the budget still needs (the rest of a long part is worth keeping)."""
    def make() -> fit.Rewrite | None:
        message = workspace.messages[position]
        part_room = max(limit, message.tokens - fit.still_needed(workspace)) if as_needed else limit
        data, cut = clamp_message(message.data, part_room, workspace.counter)
        if data is None or workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            return None  # nothing to gain (a limit near the marker's size)
        return fit.Rewrite(data, f"text over {part_room} tokens clamped to head and tail", parts=cut)
    return make


STRATEGY = StrategyInfo(
    name="clamp_oversized_messages",
    alias="ClampOversizedMessages",
    summary="cut long text parts and tool-call argument strings to their head and tail",
    params=(Param("max_part_tokens", int, None,
                  "the most tokens one text part or argument may keep (default: a quarter of a token budget, at most 4096)"),),
    apply=apply,
)
