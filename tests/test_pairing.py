"""One pairing of tool calls with their results, whoever asks: a result answers the nearest earlier
call with its id (docs/formats.md), even when the transcript uses that id again (tau-bench does)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.counting.counter import MessageCounter
from core.summarizers.base import SummaryRequest
from core.summarizers.extractive import ExtractiveSummarizer
from tests.helpers import (
    assistant_calls,
    call,
    invoke,
    msg,
    read_messages,
    result,
    run_core,
    shared_counter,
    write_messages,
)

TAU = "openai-chat/tau-bench-airline-task3.jsonl"


def _summary(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "system" and m["content"].startswith("CUCA summary:"))


def test_a_reused_call_id_does_not_lend_a_later_error_to_an_earlier_lookup(realdata: Path) -> None:
    """Line 45 reuses line 11's call id; line 46's error answers line 45, not the lookup of AQLBTL
    (which found the reservation). Line 51 reuses line 41's id the same way."""
    outcome = invoke(str(realdata / TAU), "--max-tokens", "2000")
    assert outcome.exit_code == 0, outcome.output
    summary = _summary(read_messages(outcome.stdout))
    assert "get_reservation_details(AQLBTL): Error" not in summary
    # With a little more room the summary has the calls' lines, each with its own answer.
    roomier = invoke(str(realdata / TAU), "--max-tokens", "3000")
    assert roomier.exit_code == 0, roomier.output
    summary = _summary(read_messages(roomier.stdout))
    assert "get_reservation_details(AQLBTL): Error" not in summary
    errors = [line for line in summary.splitlines() if line.startswith("- update_reservation_flights(OBUT9V): Error")]
    # Lines 41, 45, 51, 53, 55 in order: no seats, gift card twice... each call's own answer.
    said = [line.split(": ", 1)[1] for line in errors]
    assert said[:2] == ["Error: not enough seats on flight HAT229", "Error: gift card balance is not enough"], errors


def test_a_tool_pin_does_not_keep_another_tools_result_under_a_reused_id(realdata: Path) -> None:
    """`-k tool:update_reservation_flights` pins that tool's calls and results; line 12 (the
    get_reservation_details answer under the id line 45 reuses) is not one of them."""
    outcome = invoke(str(realdata / TAU), "--max-tokens", "2000", "-k", "tool:update_reservation_flights")
    assert outcome.exit_code == 0, outcome.output
    kept = read_messages(outcome.stdout)
    assert not any(str(m["content"]).startswith('{"reservation_id": "AQLBTL"') for m in kept)
    assert sum(1 for m in kept if m.get("name") == "update_reservation_flights") == 6  # lines 42-60, pinned


# -- a property: no summary line joins a call with a result the reader did not pair with it ----

IDS = st.sampled_from(["c0", "c1", "c2"])  # few ids: reused all the time
PADDING = " ".join(["padding"] * 60)  # long enough that clearing a result saves tokens
ANSWERS = st.sampled_from([
    "Error: fault {m} seen\n" + PADDING,  # an error line
    '{{"booking": "{m}", "notes": "' + PADDING + '"}}',  # a record: its ids
    "The answer code is {m} for this one.\n" + PADDING,  # a fact stated in the output
])


@st.composite
def reused_ids(draw: Any) -> tuple[list[dict[str, Any]], set[tuple[int, int]]]:
    """A transcript whose calls reuse ids, and the (call, result) pairs the nearest-earlier rule gives.

    Call k is ``tool_k(Tk…)``; result m carries the marker ``R<m>Q``, so a summary line naming both
    says which call it joined with which result."""
    messages: list[dict[str, Any]] = [msg("user", "Start the work on the bookings.")]
    pairs: set[tuple[int, int]] = set()
    latest: dict[str, int] = {}
    calls = answers = 0
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            messages.append(msg("user", f"Next step {len(messages)} please."))
        ids = draw(st.lists(IDS, min_size=1, max_size=2, unique=True))
        made = []
        for cid in ids:
            calls += 1
            made.append(call(cid, f"tool_{calls}", target=f"T{calls}X"))
            latest[cid] = calls
        messages.append(assistant_calls(*made))
        for cid in draw(st.lists(IDS, max_size=3)):  # an id of this call, of an earlier one, or of none
            answers += 1
            messages.append(result(cid, draw(ANSWERS).format(m=f"R{answers}Q")))
            if cid in latest:
                pairs.add((latest[cid], answers))
    messages.append(msg("user", "What did you find?"))
    return messages, pairs


_CALLED = re.compile(r"\btool_(\d+)\b")
_CLEARED = re.compile(r"^\[compact: tool result of tool_(\d+) ")
_ANSWER = re.compile(r"\bR(\d+)Q\b")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reused_ids())
def test_no_summary_line_joins_a_call_with_a_result_it_was_not_paired_with(
        case: tuple[list[dict[str, Any]], set[tuple[int, int]]]) -> None:
    messages, pairs = case
    counter, _ = shared_counter()
    request = SummaryRequest(tuple(messages[:-1]), 1, 1, max_tokens=4000)
    text = ExtractiveSummarizer().summarize(request, MessageCounter(counter)).text
    for line in text.splitlines():
        for k in _CALLED.findall(line):
            for m in _ANSWER.findall(line):
                assert (int(k), int(m)) in pairs, line


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reused_ids())
def test_a_cleared_result_names_the_call_it_was_paired_with(
        case: tuple[list[dict[str, Any]], set[tuple[int, int]]]) -> None:
    messages, pairs = case
    out = run_core(messages, max_tokens=60, strategies=["clear_tool_results:keep_pairs=0,keep_recent=0"])
    answers = [i for i, m in enumerate(messages, 1) if m["role"] == "tool"]  # line of result m is answers[m - 1]
    for message in out.messages:
        named = _CLEARED.match(str(message.data.get("content")))
        if named and message.line is not None:
            assert (int(named.group(1)), answers.index(message.line) + 1) in pairs, message.data["content"]


def test_the_run_summary_says_each_reused_id_result_with_its_own_call(tmp_path: Path) -> None:
    """Through the whole run (the reader, the pairing, the summary step): the older call's line
    says its own answer, not the newer call's."""
    source = write_messages(tmp_path / "reused.jsonl", [
        msg("user", "Look the booking up, then change it."),
        assistant_calls(call("c1", "get_booking", booking="AQLBTL")), result("c1", '{"status": "found"}'),
        assistant_calls(call("c1", "update_booking", booking="OBUT9V")), result("c1", "Error: balance too low"),
        msg("assistant", "The update failed."),
        msg("user", "Try again."),
    ])
    outcome = invoke(str(source), "--max-messages", "3", "--strategy", "summarize")
    assert outcome.exit_code == 0, outcome.output
    summary = _summary(read_messages(outcome.stdout))
    assert "- update_booking(OBUT9V): Error: balance too low" in summary
    assert "get_booking(AQLBTL): Error" not in summary


def test_a_swe_agent_result_is_read_with_its_call_and_without_the_shells_footer(realdata: Path) -> None:
    """SWE-agent answers through a `tool_call_ids` list: the summary read those results as having
    no call. Paired now, a command's line says what it met, not the prompt SWE-agent appends
    ("(Open file: n/a)", "(Current directory: /testbed)", "bash-$")."""
    outcome = invoke(str(realdata / "openai-chat/swe-agent-marshmallow-1867.jsonl"), "--max-tokens", "3000",
                     "--strategy", "summarize")
    assert outcome.exit_code == 0, outcome.output
    summary = _summary(read_messages(outcome.stdout))
    assert "bash-$" not in summary and "(Current directory:" not in summary
    assert "- ran `ls -F` → CONTRIBUTING.rst README.rst examples/ setup.py" in summary
