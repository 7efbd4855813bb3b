"""The chooser (core/engine/fit.py): what it takes of the rewrites a strategy proposes."""

from __future__ import annotations

from typing import Any

from core.counting.counter import MessageCounter
from core.engine import fit
from core.engine.budget import Budget
from core.engine.structure import PinRules
from core.engine.workspace import Workspace
from core.messages import Message
from tests.helpers import shared_counter

WORDS = "the handler retries the queue three times before it gives up " * 40  # ~440 tokens


def _workspace(max_tokens: int, *, keep_first: bool = False) -> Workspace:
    """A task, four long replies and a last request, under ``max_tokens``; ``keep_first``: the first reply pinned."""
    counter = MessageCounter(shared_counter()[0])
    texts = [("user", "the task"), *[("assistant", f"reply {n}: {WORDS}") for n in range(4)], ("user", "go on")]
    messages = counter.count_messages([Message({"role": r, "content": c}, line=n) for n, (r, c) in enumerate(texts, 1)])
    budget = Budget.resolve(max_messages=None, max_tokens=max_tokens, max_fraction=None, window=128_000,
                            window_resolved=False)
    pins = PinRules(kept=frozenset({2}) if keep_first else frozenset())
    return Workspace(messages, budget=budget, counter=counter, pins=pins)


def _shortening(workspace: Workspace, position: int, made: list[int]) -> fit.Proposal:
    def make() -> fit.Rewrite:
        made.append(position)
        return fit.Rewrite({"role": "assistant", "content": f"[reply {position} shortened]"}, "shortened")
    return fit.Proposal(position, make)


def _take(workspace: Workspace, positions: list[int]) -> tuple[int, list[int]]:
    made: list[int] = []
    workspace.begin("test", 1)
    taken = fit.take(workspace, (_shortening(workspace, p, made) for p in positions))
    workspace.end()
    return taken, made


def test_the_chooser_takes_proposals_in_their_order_only_while_the_run_needs_them() -> None:
    """Two of four long replies shortened meet the budget: the third and fourth stay whole, and their
    rewrites are never made (the proposer's work is spent only on what is taken)."""
    workspace = _workspace(1_300)
    taken, made = _take(workspace, [4, 3, 2, 1])
    assert (taken, made) == (2, [4, 3])
    assert workspace.live_tokens <= 1_300
    assert "shortened" in workspace.messages[4].data["content"] and WORDS in workspace.messages[1].data["content"]


def test_the_chooser_never_rewrites_a_pinned_message() -> None:
    workspace = _workspace(300, keep_first=True)
    taken, made = _take(workspace, [1, 2, 3, 4])
    assert 1 not in made and WORDS in workspace.messages[1].data["content"]
    assert taken == 3


def test_a_result_whose_clearing_would_overshoot_is_cut_to_land_at_the_aim() -> None:
    """Clearing a 440-token reply would land the run far under the budget: its middle is cut instead
    (head and tail kept), the run lands between the fill and aim shares, and the chooser stops."""
    workspace = _workspace(1_700)
    made: list[int] = []
    proposals = [fit.Proposal(p, _shortening(workspace, p, made).make, cut_if_overshoot=True) for p in (1, 2)]
    workspace.begin("test", 1)
    assert fit.take(workspace, proposals) == 1
    workspace.end()
    assert made == []
    text: Any = workspace.messages[1].data["content"]
    assert text.startswith("reply 0:") and "compact" in text and len(text) < len(f"reply 0: {WORDS}")
    assert 0.95 * 1_700 <= workspace.live_tokens <= 0.98 * 1_700
