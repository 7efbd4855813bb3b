"""SlidingWindow{keep_messages}: keeps the newest messages, pinned ones counted in.

Under a token budget it keeps the newest messages that fit (like LangChain's
``trim_messages(strategy="last")``); no message-count cap applies unless one was
asked for (``keep_messages``, or a message budget). A call is never split from
its results: the cut moves later, taking the whole exchange. What it removed is
named in one trace line at the cut, unless the run leaves no traces (the seed preset).
"""

from __future__ import annotations

from core.engine import placeholders
from core.engine.workspace import Workspace
from core.messages import Message
from core.strategies.base import Param, StrategyInfo

# Under --full with no cap, the seed's window.
FULL_WINDOW = 40
# Room kept for the trace line while cutting, so that adding it does not undo the cut.
TRACE_TOKENS = 120


def apply(workspace: Workspace, *, keep_messages: int | None) -> str:
    structure = workspace.structure
    before = workspace.live_messages
    cap = keep_messages if keep_messages is not None or not workspace.full else FULL_WINDOW
    removed: list[int] = []
    reserve = (TRACE_TOKENS, 1) if workspace.policy.trace else (0, 0)
    floor_messages, floor_tokens = workspace.floor()
    if workspace.budget.over(floor_messages + reserve[1], floor_tokens + reserve[0]):
        reserve = (0, 0)  # too tight for a guess: the trace's room is made once its real size is known
    for position in range(len(workspace.messages)):
        within_window = cap is None or workspace.live_messages + reserve[1] <= cap
        if within_window and (workspace.full or not workspace.over_budget(*reserve)):
            break
        if not workspace.alive(position) or workspace.pinned(position) or not structure.counted[position]:
            continue
        closure = workspace.removal_set([position])  # the message with its pairs, not yet removed
        if closure and workspace.remove(closure, "outside the sliding window"):
            removed.extend(sorted(closure))
    if removed and workspace.policy.trace:
        leave_trace(workspace, sorted(removed), (floor_messages, floor_tokens))
    window = f"window {cap}" if cap is not None else "the newest that fit the budget"
    return f"kept the newest {workspace.live_messages} of {before} messages ({window})"


def leave_trace(workspace: Workspace, removed: list[int], floor: tuple[int, int]) -> None:
    """One placeholder where the removed messages were, saying what they held (counted: it costs tokens).

    When it does not fit, the window moves on, oldest first, until it does, as long as it can fit
    beside the pinned messages (``floor``: their messages and tokens) at all; else the report's
    ledger alone says what went."""
    floor_messages, floor_tokens = floor
    while True:
        trace = _trace(workspace, removed)
        cost = workspace.counter.count_message(trace).tokens
        if workspace.full or not workspace.over_budget(cost, 1):
            workspace.insert(removed[0], trace)
            return
        if workspace.budget.over(floor_messages + 1, floor_tokens + cost):
            return  # a budget too small for the trace
        oldest = next((p for p in range(removed[0], len(workspace.messages)) if workspace.alive(p)
                       and not workspace.pinned(p) and workspace.structure.counted[p]), None)
        closure = workspace.removal_set([oldest]) if oldest is not None else None
        if not closure or not workspace.remove(closure, "outside the sliding window"):
            return
        removed = sorted({*removed, *closure})


def _trace(workspace: Workspace, removed: list[int]) -> Message:
    messages = [workspace.messages[p] for p in removed]
    lines = [m.line for m in messages if m.line is not None]
    span = f"{min(lines)}-{max(lines)}" if lines else "?"
    turns = sorted({workspace.turn_number(p) for p in removed} - {0})
    turn_text = f", turns {turns[0]}-{turns[-1]}" if turns else ""
    store = workspace.seams.store
    text = placeholders.removal_trace(messages, span, turn_text, store.shown_path if store is not None else None)
    return Message(data={"role": "system", "content": text})


STRATEGY = StrategyInfo(
    name="sliding_window",
    alias="SlidingWindow",
    summary="keep the newest messages that fit (at most keep_messages when given)",
    params=(Param("keep_messages", int, None, "a cap on the newest messages kept, pinned included (default: none under a token budget)"),),
    apply=apply,
    cuts_to_newest=True,
)
