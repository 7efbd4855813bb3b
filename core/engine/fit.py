"""The chooser: what a run takes of what the strategies propose, and how far it goes, in one place.

Under a token budget a run lands at or under the policy's aim share of it, and above its fill
share when it can; this is the only module that reads the shares. A rewriting strategy proposes
(``Proposal``: a message and what it would become, most worth taking first; ``unused_first``
orders them by later use) and ``take`` decides: while the run still needs them, never a pinned
message or one that must go anyway, and a cut in place of a rewrite that would overshoot. A
summary's span is chosen here too (``oldest_to_go``, ``keep_newest_partly``, ``slack``), and the
closing step ``give_back`` fills the room later steps left. The strategies that remove messages
(``sliding_window``, ``offload``, ``drop_observations``, ``drop_turns``) and ``drop_old_thinking``
(its edit is ``bound_thinking.shed``) keep their own loops, each stopping where the workspace
says the budget is met (``Workspace.should_continue``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from core.engine.clamp import MIN_PART_TOKENS, clamp_message, cut_to
from core.engine.later_use import used_later
from core.engine.workspace import StepOutcome, Workspace
from core.messages import Message, written_by_compact
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


@dataclass(frozen=True)
class Rewrite:
    """What a proposed message becomes, why, and how many of the strategy's parts it counts for."""

    data: dict[str, Any]
    reason: str
    parts: int = 1


@dataclass(frozen=True)
class Proposal:
    """A strategy's proposed rewrite of one message, made only when the chooser takes it."""

    position: int
    # The rewrite, or None when it would save nothing (made then: it reads the run as it is by then).
    make: Callable[[], Rewrite | None]
    # Taking it whole would land the run far under the aim: its middle is cut to fit instead.
    cut_if_overshoot: bool = False


def take(workspace: Workspace, proposals: Iterable[Proposal]) -> int:
    """Take ``proposals`` in their order while the run still needs them (every one under --full),
    never a pinned message or one that must go anyway; returns the parts taken. A proposal that
    would overshoot is cut instead, and the run then has what it needed."""
    taken = 0
    for proposal in proposals:
        if not workspace.should_continue():
            break
        position = proposal.position
        if workspace.pinned(position) or workspace.must_go(position) or not workspace.alive(position):
            continue
        if proposal.cut_if_overshoot and _cut_instead(workspace, position):
            return taken + 1
        rewrite = proposal.make()
        if rewrite is not None:
            workspace.rewrite(position, rewrite.data, rewrite.reason)
            taken += rewrite.parts
    return taken


def unused_first(workspace: Workspace, positions: list[int]) -> tuple[list[int], bool]:
    """Proposals in the order to take them, oldest first; when taking only some of them meets the
    budget, those whose message the agent did not use later go first (the rest keep their order
    after them). And whether any went ahead of an older one."""
    limit = workspace.budget.token_limit
    if not workspace.policy.fill_budget or workspace.full or limit is None:  # (the seed's order is oldest first)
        return positions, False
    messages = workspace.messages
    if workspace.live_tokens - sum(messages[p].tokens for p in positions) > limit:
        return positions, False  # every one of them goes anyway
    used = used_later(workspace, {p: messages[p] for p in positions})
    order = [p for p in positions if p not in used] + [p for p in positions if p in used]
    return order, order != positions


def _cut_instead(workspace: Workspace, position: int) -> bool:
    """When rewriting this (large) message whole would overshoot the budget by far, cut its middle to fit."""
    message = workspace.messages[position]
    needed = would_overshoot(workspace, message.tokens)
    if not needed:
        return False  # clearing it whole does not land the run far below the aim
    if message.tokens - needed - 16 < MIN_PART_TOKENS:
        return False
    data = cut_to(message, message.tokens - needed, workspace.counter)
    if data is None:
        return False
    workspace.rewrite(position, data, "tool result cut in the middle: clearing it whole would overshoot the budget")
    return True


def oldest_to_go(workspace: Workspace, reserve_tokens: int, keep: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """The oldest messages that have to go for the rest, plus a summary of ``reserve_tokens``, to fit
    (whole exchanges; never pinned, compact's own or those in ``keep``)."""
    structure = workspace.structure
    budget = workspace.budget
    live_messages, live_tokens = workspace.live_messages, workspace.live_tokens
    chosen: set[int] = set()
    for position in range(len(workspace.messages)):
        if not budget.over(live_messages + 1, live_tokens + reserve_tokens):
            break
        if position in chosen or position in keep or not workspace.alive(position) or workspace.pinned(position):
            continue
        if written_by_compact(workspace.messages[position]) or not structure.counted[position]:
            continue
        closure = (workspace.removal_set([position]) or set()) - chosen
        if closure & keep:
            continue
        chosen |= closure
        live_messages -= sum(1 for p in closure if structure.counted[p])
        live_tokens -= sum(workspace.messages[p].tokens for p in closure if structure.counted[p])
    return sorted(chosen)


def reaches(workspace: Workspace, removable: list[int], reserve_tokens: int) -> bool:
    """Whether the run is within the budget once ``removable`` gives way to a summary of ``reserve_tokens``."""
    counted = workspace.structure.counted
    messages = workspace.live_messages - sum(1 for p in removable if counted[p]) + 1
    tokens = workspace.live_tokens - sum(workspace.messages[p].tokens for p in removable if counted[p])
    return not workspace.budget.over(messages, tokens + reserve_tokens)


def keep_newest_partly(workspace: Workspace, removable: list[int], summary_tokens: int,
                       worth_less: Callable[[set[int]], bool] = lambda exchange: False) -> set[int]:
    """When the span's newest exchanges are what make the run land well under the budget, keep them:
    newest first, whole while they fit, then the next one with its longest texts cut in the middle
    (head and tail kept), unless ``worth_less`` says that exchange is worth less than the summary's
    room. The budget is used, not wasted. Returns the positions kept (their text rewritten where
    cut), or an empty set."""
    counted = workspace.structure.counted
    span_tokens = sum(workspace.messages[p].tokens for p in removable if counted[p])
    after = workspace.live_tokens - span_tokens + summary_tokens
    kept: set[int] = set()
    remaining = list(removable)
    while not near_aim(workspace, after):
        newest = set(workspace.removal_set([remaining[-1]]) or ()) & set(remaining)
        whole = len(newest) == len(remaining)  # the span's last exchange
        if not newest or whole and kept:
            break  # the summary takes the rest
        extra = sum(workspace.messages[p].tokens for p in newest if counted[p])
        # A span of one exchange: cut, it needs no summary beside it.
        cut = after + extra - aim_tokens(workspace) - (summary_tokens if whole else 0)
        if cut > 0 and not whole and worth_less(newest):
            break
        if cut > 0 and not _cut_to_fit(workspace, newest, cut):
            break
        kept |= newest
        if cut > 0:
            break  # cut to land at the aim: nothing more fits
        after += extra
        remaining = [p for p in remaining if p not in newest]
    return kept


def _cut_to_fit(workspace: Workspace, exchange: set[int], cut: int) -> bool:
    """Cut ``cut`` tokens from the middles of the exchange's longest texts (calls' arguments too),
    longest message first; all or nothing."""
    planned: list[tuple[int, dict[str, Any]]] = []
    for position in sorted(exchange, key=lambda p: -workspace.messages[p].tokens):
        if cut <= 0:
            break
        message = workspace.messages[position]
        if workspace.pinned(position):
            continue
        # The whole cut here if it can take it, else as much as it can give and the rest from the next.
        data = cut_to(message, message.tokens - cut, workspace.counter)
        if data is None:
            data, _ = clamp_message(message.data, MIN_PART_TOKENS, workspace.counter)
        if data is None:
            continue
        saved = message.tokens - workspace.counter.count_message(message.rewritten(data)).tokens
        if saved > 0:
            planned.append((position, data))
            cut -= saved
    if cut > 0:
        return False
    for position, data in planned:
        workspace.rewrite(position, data, "among the oldest messages kept: its middle cut to fill the budget")
    return True


def slack(workspace: Workspace, after_tokens: int) -> int:
    """The tokens a run landing at ``after_tokens`` leaves unused below the aim when it does not fill
    the budget (0 when it does): room a summary that left lines out may take."""
    room = aim_tokens(workspace) - after_tokens
    return 0 if fills(workspace, after_tokens) or room <= 0 else room


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
