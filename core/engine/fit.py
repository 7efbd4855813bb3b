"""The chooser: how far a run goes under a token budget, in one place.

Under a token budget a run lands at or under the policy's aim share of it, and above its fill
share when it can. This is the only module that reads the two shares: a strategy asks here how
much the run still needs, whether an edit would overshoot, and where its aim lies; the closing
step ``give_back`` (here too) fills the room later steps left.
"""

from __future__ import annotations

from core.engine.clamp import cut_to
from core.engine.workspace import StepOutcome, Workspace
from core.messages import Message
from core.report import GIVE_BACK, line_ranges

# A stale read or a superseded plan points at the newer one: giving it back would repeat it;
# thinking behind a change is discarded or refused by the APIs; a repair is what the API takes.
NEVER_GIVEN_BACK = frozenset({"deduplicate_file_reads", "supersede_plans", "drop_old_thinking",
                              "thinking_after_change", "repair"})
# A message given back in part brings at least this many tokens more than its placeholder.
GIVE_BACK_MIN_TOKENS = 96


def _limit(workspace: Workspace) -> float:
    return workspace.budget.limit or 0


def aim_tokens(workspace: Workspace) -> int:
    """The tokens a run aims to land at or under."""
    return int(workspace.policy.aim_share * _limit(workspace))


def pinned_aim(workspace: Workspace) -> int:
    """The tokens a run whose pinned messages alone exceed the budget is cut down to."""
    return int(workspace.policy.pinned_share * _limit(workspace))


def fills(workspace: Workspace, tokens: float) -> bool:
    """Whether a run at ``tokens`` uses the budget (lands above the fill share of it)."""
    return tokens >= workspace.policy.fill_share * _limit(workspace)


def near_aim(workspace: Workspace, tokens: float) -> bool:
    """Whether a run at ``tokens`` is close enough to the aim (halfway between fill and aim, or above)."""
    policy = workspace.policy
    return tokens >= (policy.fill_share + policy.aim_share) / 2 * _limit(workspace)


def still_needed(workspace: Workspace) -> int:
    """Tokens the run must still lose to land just under a token budget (0 without one)."""
    if workspace.full or workspace.budget.token_limit is None:
        return 0
    return max(0, workspace.live_tokens - aim_tokens(workspace))


def would_overshoot(workspace: Workspace, tokens: int) -> int:
    """When taking ``tokens`` from the run would land it far under the aim (below the fill share),
    the tokens it still needs, to cut instead; 0 when taking them whole is right (or the preset
    does not fill the budget)."""
    if not workspace.policy.fill_budget or workspace.full or workspace.budget.token_limit is None:
        return 0
    needed = workspace.live_tokens - aim_tokens(workspace)
    if needed <= 0 or fills(workspace, workspace.live_tokens - tokens):
        return 0
    return needed


def must_go_before(workspace: Workspace, window_follows: bool) -> int:
    """Where the messages that must go end, when a later strategy keeps only the newest that fit (a
    sliding window): rewriting older ones (clearing, clamping) would be work for messages the run then
    removes. 0 when none follows or the preset leaves that alone."""
    if not workspace.policy.spare_what_must_go or not window_follows:
        return 0
    return workspace.oldest_that_can_stay()


def give_back(workspace: Workspace) -> StepOutcome | None:
    """Strategies run in order, each as far as the budget then needed: results cleared early may
    no longer need to be once a later step (the summary) took the oldest span. Those still in
    the kept window are put back as they were, newest first, while they fit; the newest that
    does not fit whole comes back with its middle cut, when the room left is worth it. The
    step's detail names their lines (the ledger loses a rewrite once it is given back)."""
    if workspace.budget.token_limit is None or workspace.full:
        return None
    aim = aim_tokens(workspace)
    if workspace.live_tokens >= aim:
        return None
    workspace.begin(GIVE_BACK, 0)
    cut_one = False
    given: list[int] = []  # the original lines of what was given back
    for position in range(len(workspace.messages) - 1, -1, -1):
        original = workspace.restorable(position)
        if original is None or workspace.rewritten_by(position) & NEVER_GIVEN_BACK or workspace.pinned(position):
            continue
        current = workspace.messages[position]
        if workspace.live_tokens + original.tokens - current.tokens <= aim:
            workspace.restore(position, original)
        elif cut_one or not _give_back_in_part(workspace, position, original, aim):
            continue
        else:
            cut_one = True  # (only one message comes back in part)
        if original.line is not None:
            given.append(original.line)
    where = f" (line(s) {line_ranges(given)})" if given else ""
    return workspace.end(f"gave back rewritten messages{where}, newest first, while they fit the budget")


def _give_back_in_part(workspace: Workspace, position: int, original: Message, aim: int) -> bool:
    """The input's text of a rewritten message, its middle cut to fill the room left (head and tail kept)."""
    current = workspace.messages[position]
    room = aim - workspace.live_tokens
    if room < GIVE_BACK_MIN_TOKENS:
        return False
    data = cut_to(original, current.tokens + room, workspace.counter)
    if data is None or workspace.counter.count_message(original.rewritten(data)).tokens <= current.tokens:
        return False  # (no cut that fits keeps more than the message holds now)
    workspace.restore(position, original, data, "given back in part: its middle cut to fit the room later steps made")
    return True
