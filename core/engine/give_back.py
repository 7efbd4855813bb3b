"""give_back, a closing step of the default preset: what earlier steps rewrote goes back as the
input had it, when later steps made room for it (docs/strategies.md)."""

from __future__ import annotations

from core.engine.budget import AIM_SHARE
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


def give_back(workspace: Workspace) -> StepOutcome | None:
    """Strategies run in order, each as far as the budget then needed: results cleared early may
    no longer need to be once a later step (the summary) took the oldest span. Those still in
    the kept window are put back as they were, newest first, while they fit; the newest that
    does not fit whole comes back with its middle cut, when the room left is worth it. The
    step's detail names their lines (the ledger loses a rewrite once it is given back)."""
    limit = workspace.budget.token_limit
    if limit is None or workspace.full:
        return None
    aim = int(limit * AIM_SHARE)
    if workspace.live_tokens >= aim:
        return None
    workspace.begin(GIVE_BACK, 0)
    cut_one = False
    given: list[int] = []  # the original lines of what was given back
    for position in range(len(workspace.messages) - 1, -1, -1):
        original = workspace.restorable(position)
        if original is None or workspace.rewritten_by(original) & NEVER_GIVEN_BACK or workspace.pinned(position):
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
