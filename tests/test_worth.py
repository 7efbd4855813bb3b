"""Which digest lines are kept first when not all fit: the most worth per token (core/summarizers/worth.py)."""

from __future__ import annotations

from core.counting.counter import MessageCounter
from core.summarizers.base import SummaryRequest
from core.summarizers.call_lines import CHANGE, COMMAND, ERROR, FACT, REMARK, REQUEST
from core.summarizers.extractive import ExtractiveSummarizer, _Line
from core.summarizers.worth import by_worth
from tests.helpers import msg, shared_counter


def _counter() -> MessageCounter:
    return MessageCounter(shared_counter()[0])


def _ordered(lines: list[_Line], weights: dict[str, int]) -> list[str]:
    return [line.text for line in by_worth(lines, weights, _counter(), finding=lambda line: line.priority in (FACT, ERROR))]


def test_the_requests_stay_first_in_their_order() -> None:
    lines = [_Line(REQUEST, 5, "- user asked (turn 2): ship it"), _Line(FACT, 9, "- assistant: `walkCommits` returns early."),
             _Line(REQUEST, 1, "- user asked (turn 1): fix the walk")]
    assert _ordered(lines, {"walkCommits": 9})[:2] == ["- user asked (turn 2): ship it", "- user asked (turn 1): fix the walk"]


def test_a_line_naming_what_the_span_keeps_coming_back_to_outranks_a_newer_one_naming_nothing_of_it() -> None:
    lines = [_Line(COMMAND, 90, "- ran `ls -la build/output` → 12 files"),
             _Line(COMMAND, 10, "- ran `go test -run TestWalkFirstParentCommits` → ok")]
    assert _ordered(lines, {"TestWalkFirstParentCommits": 12})[0].startswith("- ran `go test")


def test_a_line_whose_names_an_earlier_choice_already_said_gives_way_to_one_with_new_names() -> None:
    """Three lines name getBranchCheckpoints; once one is chosen the others are worth only what else they name."""
    lines = [_Line(REMARK, 30, "- assistant: getBranchCheckpoints walks the branch."),
             _Line(REMARK, 20, "- assistant: getBranchCheckpoints skips merges."),
             _Line(REMARK, 10, "- assistant: isShadowBranchReachable checks the base.")]
    ordered = _ordered(lines, {"getBranchCheckpoints": 10, "isShadowBranchReachable": 6})
    assert ordered[0] == "- assistant: getBranchCheckpoints walks the branch."
    assert ordered[1] == "- assistant: isShadowBranchReachable checks the base."


def test_a_command_naming_what_a_change_names_ranks_after_the_change() -> None:
    """What the agent ran is worth half of what it changed, naming the same: the change leads."""
    lines = [_Line(COMMAND, 20, "- ran `go test -run TestWalkFirstParentCommits ./cmd/entire/cli/`"),
             _Line(CHANGE, 10, "- changed explain_test.go: defines TestWalkFirstParentCommits")]
    assert _ordered(lines, {"TestWalkFirstParentCommits": 12})[0].startswith("- changed explain_test.go")


def test_a_value_stated_once_outranks_a_remark_and_a_short_remark_is_not_worth_more_for_being_short() -> None:
    """Nobody repeats a deploy token until someone asks for it: a finding is worth something of its own.
    A remark naming nothing ("So that looks correct.") is worth nothing, however short."""
    lines = [_Line(FACT, 40, "- assistant: So that looks correct."),
             _Line(REMARK, 30, "- assistant: Looking at how the walk handles the merges of the feature branch."),
             _Line(FACT, 10, "- user: The deploy token for staging is KX-4471-QP.")]
    ordered = _ordered(lines, {})
    assert ordered[0] == "- user: The deploy token for staging is KX-4471-QP."


def test_under_a_small_room_the_digest_names_each_function_the_work_is_about_not_one_five_times() -> None:
    """Five newer findings on getBranchCheckpoints and an older one on isShadowBranchReachable, which the
    span came back to as well: a summary with room for two findings names both functions, not the
    newest two findings on one."""
    span = [msg("user", "Fix the checkpoint listing on branches with merges.")]
    span.append(msg("assistant", "`isShadowBranchReachable` returns false for 3 of the 7 shadow branches."))
    span += [msg("assistant", f"Checked `isShadowBranchReachable` against branch {i} again.") for i in range(2)]
    span += [msg("assistant", f"`getBranchCheckpoints` returned {i + 4} checkpoints on run {i}.") for i in range(5)]
    counter = _counter()
    request = SummaryRequest(messages=tuple(span), first_turn=1, last_turn=1, max_tokens=110)
    text = ExtractiveSummarizer().summarize(request, counter).text
    assert "`isShadowBranchReachable`" in text and "`getBranchCheckpoints` returned" in text
    assert counter.count_text(text) <= 110
