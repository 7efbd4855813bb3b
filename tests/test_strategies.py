"""Each strategy on a transcript built for it: what it removes, rewrites and must leave alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from core.engine.pipeline import Seams
from tests.helpers import (
    assistant_calls,
    call,
    invoke,
    lines_of,
    msg,
    read_messages,
    result,
    run_core,
    write_messages,
)

BIG = "def handler(event, context):\n    return process(event['records'], retries=3)\n" * 120  # ~2.4k tokens


def reads_transcript() -> list[dict]:
    return [
        msg("system", "You are a coding agent."),
        msg("user", "Fix the bug in a.py"),
        assistant_calls(call("c1", "read_file", path="a.py")),
        result("c1", "A-v1 " + BIG),
        assistant_calls(call("c2", "read_file", path="b.py"), call("c3", "read_file", path="a.py")),
        result("c2", "B-v1 " + BIG),
        result("c3", "A-v2 " + BIG),
        assistant_calls(call("c4", "read_file", path="a.py")),
        result("c4", "A-v3 " + BIG),
        msg("user", "Thanks, now explain the change."),
    ]


def test_deduplicate_file_reads_points_older_reads_at_the_newest() -> None:
    out = run_core(reads_transcript(), mode="full", strategies=["deduplicate_file_reads"])
    contents = {m.line: m.data["content"] for m in out.messages}
    assert contents[4] == "[compact: superseded by a newer read_file of a.py at line 9]"
    assert contents[7] == "[compact: superseded by a newer read_file of a.py at line 9]"
    assert contents[6].startswith("B-v1")  # only read once
    assert contents[9].startswith("A-v3")  # the newest read stays
    assert [e["line"] for e in out.report["removed"]] == [4, 7]
    assert all(e["action"] == "rewritten" for e in out.report["removed"])


def test_a_read_inside_bash_lc_is_deduplicated_like_a_plain_one() -> None:
    """``codex exec --json`` prints the command line Codex ran: the read is the script inside ``/bin/bash -lc``."""
    text = "def parse(text):\n    return text.split()\n" * 40
    messages = [
        msg("user", "Check the parser."),
        assistant_calls(call("c1", "shell", command="/bin/bash -lc \"sed -n '1,80p' src/parse.py\"")),
        result("c1", text),
        assistant_calls(call("c2", "shell", command="/bin/bash -lc 'cat src/parse.py | head'")),  # a pipeline: no read
        result("c2", text),
        assistant_calls(call("c3", "shell", command="/bin/bash -lc \"sed -n '1,80p' src/parse.py\"")),
        result("c3", text),
        msg("assistant", "The parser splits on whitespace."),
    ]
    out = run_core(messages, mode="full", strategies=["deduplicate_file_reads"])
    contents = {m.line: m.data["content"] for m in out.messages}
    assert contents[3].startswith("[compact: superseded by a newer shell of src/parse.py at line 7")
    assert contents[5] == text and contents[7] == text


def test_a_codex_exec_file_change_names_its_files() -> None:
    from core.engine.file_calls import classify, patch_files

    one = call("i1", "file_change", changes=[{"path": "src/parse.py", "kind": "update"}])
    two = call("i2", "file_change", changes=[{"path": "a.py", "kind": "add"}, {"path": "b.py", "kind": "delete"}])
    assert classify(one) == ("write", "src/parse.py", "")
    assert patch_files(two) == ["a.py", "b.py"] and classify(two) is None  # several files: the summary lists them


def test_a_call_repeated_with_the_same_result_points_the_older_result_at_the_newer() -> None:
    """The same call (tool and arguments) answered by the same text again: the older copy says
    nothing the newer does not. A different answer is history, and stays."""
    details = json.dumps({"reservation_id": "4WQ150", "flights": ["HAT170", "HAT045"], "status": "active"} | {
        "passengers": [{"first_name": "Chen", "last_name": "Jackson", "dob": f"1956-07-{n:02d}"} for n in range(1, 29)]})
    changed = details.replace('"active"', '"cancelled"')
    messages = [
        msg("system", "You are an airline agent."),
        msg("user", "Cancel reservation 4WQ150."),
        assistant_calls(call("c1", "get_reservation_details", reservation_id="4WQ150")),
        result("c1", details),
        assistant_calls(call("c2", "get_reservation_details", reservation_id="4WQ150")),
        result("c2", details),
        assistant_calls(call("c3", "cancel_reservation", reservation_id="4WQ150")),
        result("c3", "ok"),
        assistant_calls(call("c4", "get_reservation_details", reservation_id="4WQ150")),
        result("c4", changed),
        msg("user", "Thanks."),
    ]
    out = run_core(messages, mode="full", strategies=["deduplicate_file_reads"])
    contents = {m.line: m.data["content"] for m in out.messages}
    assert contents[4] == "[compact: same result as the newer get_reservation_details at line 6]"
    assert contents[6] == details and contents[10] == changed  # the newest copy, and a changed answer, stay
    assert [e["line"] for e in out.report["removed"]] == [4]
    seed = run_core(messages, mode="full", strategies=["deduplicate_file_reads:tool_name=read_file"])
    assert not seed.report["removed"]  # the seed's read_file-only rule is unchanged


def test_clear_tool_results_keeps_the_newest_pairs_and_says_what_it_cleared() -> None:
    out = run_core(reads_transcript(), mode="full", strategies=["clear_tool_results:keep_pairs=1"])
    contents = {m.line: m.data["content"] for m in out.messages}
    for line in (4, 6, 7):
        assert contents[line].startswith("[compact: tool result of read_file ")  # names the tool and its file
        assert " cleared, " in contents[line] and contents[line].endswith(" tokens]")
    assert contents[4].startswith("[compact: tool result of read_file a.py cleared, ")
    assert contents[9].startswith("A-v3")
    assert lines_of(out) == list(range(1, 11))  # nothing removed: calls and results stay paired
    ledger = {e["line"]: e for e in out.report["removed"]}
    assert f"{ledger[4]['tokens_before']:,} tokens" in contents[4]


def test_removing_strategies_stop_as_soon_as_the_budget_is_met() -> None:
    before = run_core(reads_transcript(), mode="unlimited").report["before"]["tokens"]
    # Clearing one ~2.4k-token result is enough; clear_tool_results must stop there, oldest first.
    out = run_core(reads_transcript(), max_tokens=before - 1000, strategies=["clear_tool_results:keep_pairs=0"])
    cleared = [e["line"] for e in out.report["removed"]]
    assert cleared == [4]
    assert out.report["over_budget"] is False


def test_when_only_some_results_must_go_those_the_agent_never_came_back_to_go_first() -> None:
    """The agent looked up four reservations and went on with one: clearing the three it never
    mentioned again meets the budget, so the one it works on stays whole, though it is the oldest."""
    def details(code: str, flight: str) -> str:
        return json.dumps({"reservation_id": code, "user_id": "sofia_kim_7287", "flights": [
            {"flight_number": flight, "date": "2024-05-27", "origin": "IAH", "destination": "DEN"}],
            "payment_history": [{"payment_id": f"gift_card_{n}", "amount": 100 + n} for n in range(40)]})
    messages = [msg("system", "You are an airline agent."), msg("user", "Change my Houston to Denver trip.")]
    for n, (code, flight) in enumerate((("OBUT9V", "HAT078"), ("KA7I60", "HAT511"), ("I57WUD", "HAT620"),
                                        ("AQLBTL", "HAT733"))):
        messages += [assistant_calls(call(f"c{n}", "get_reservation_details", reservation_id=code)),
                     result(f"c{n}", details(code, flight))]
    messages += [msg("assistant", "Your Houston to Denver trip is reservation OBUT9V, on flight HAT078."),
                 msg("user", "Yes, move it to the next day.")]
    before = run_core(messages, mode="unlimited").report["before"]["tokens"]
    out = run_core(messages, max_tokens=before - 1200, strategies=["clear_tool_results:keep_pairs=0"])
    contents = {m.line: m.data["content"] for m in out.messages}
    assert contents[4].startswith('{"reservation_id": "OBUT9V"')  # the one it went on with
    cleared = [e["line"] for e in out.report["removed"]]
    # The lookups it never came back to, oldest first (the last one only cut in the middle: enough).
    assert len(cleared) >= 2 and set(cleared) <= {6, 8, 10}
    assert contents[6].startswith("[compact: tool result of get_reservation_details ")
    assert out.report["over_budget"] is False
    detail = next(a["detail"] for a in out.report["actions"] if a["strategy"] == "clear_tool_results")
    assert "those the agent did not use later before the rest" in detail


def test_a_path_in_grep_output_is_the_path_the_agent_writes_later() -> None:
    from core.engine.later_use import distinct_strings

    assert {"src/app.py", "load_cache"} <= distinct_strings("src/app.py:12:def load_cache(path):")


def test_clamp_keeps_head_and_tail_token_exact() -> None:
    from tests.helpers import shared_counter

    long_text = "HEAD-START " + " ".join(f"word{i}" for i in range(6000)) + " TAIL-END"
    messages = [msg("system", "s"), msg("user", long_text), msg("assistant", "ok"), msg("user", "next")]
    out = run_core(messages, mode="full", preset="seed", strategies=["clamp_oversized_messages:max_part_tokens=200"])
    clamped = out.messages[1].data["content"]
    counter, _ = shared_counter()
    assert counter.count_batch([clamped])[0] <= 200
    assert clamped.startswith("HEAD-START word0 word1")
    assert clamped.endswith("word5999 TAIL-END")
    assert "tokens cut …]" in clamped
    # Clamping is stable: a second run leaves the clamped text alone.
    again = run_core([m.data for m in out.messages], mode="full", preset="seed",
                     strategies=["clamp_oversized_messages:max_part_tokens=200"])
    assert again.report["removed"] == []


def test_a_cut_through_code_names_what_the_cut_part_defined() -> None:
    """The body of an edit cut in the middle: the marker says which functions the cut part held,
    so a model knows they exist without the text."""
    from tests.helpers import shared_counter

    body = "".join(f"def step_{i}(rows):\n    total = sum(r.size for r in rows)\n    return total * {i}\n\n"
                   for i in range(60))
    messages = [msg("system", "s"), msg("user", "Rewrite steps.py"),
                assistant_calls(call("e1", "edit_file", path="steps.py", old_string="x", new_string=body)),
                result("e1", "ok"), msg("user", "next")]
    out = run_core(messages, mode="full", strategies=["clamp_oversized_messages:max_part_tokens=300"])
    arguments = json.loads(out.messages[2].data["tool_calls"][0]["function"]["arguments"])  # still valid JSON
    clamped = arguments["new_string"]
    counter, _ = shared_counter()
    assert counter.count_batch([clamped])[0] <= 300
    assert clamped.startswith("def step_0(rows):") and clamped.rstrip().endswith("return total * 59")
    marker = next(line for line in clamped.splitlines() if "tokens cut" in line)
    assert "tokens cut, defining step_" in marker
    cut_names = marker.split("defining ")[1].split(" and ")[0].split(", ")
    assert len(cut_names) == 8 and " more …]" in marker  # the first eight, and how many more
    assert all(f"def {name}(" not in clamped.replace(marker, "") for name in cut_names)  # all from the cut part


def test_a_long_cut_keeps_the_lines_of_its_middle_that_name_the_most() -> None:
    """A 15k-character plan written whole, cut to fit: its head and tail were kept and its middle,
    where the files to change were listed, lost (`git add cmd/entire/cli/state.go …`, the paths the
    agent went on to edit). The lines of the cut part naming the most are kept between its markers,
    in their order, and the cut stays within its room."""
    from tests.helpers import shared_counter

    prose = [f"Step {i}: keep the behaviour as it is and check it by hand before moving on." for i in range(80)]
    prose[30] = "git add cmd/entire/cli/state.go cmd/entire/cli/state_test.go cmd/entire/cli/hooks.go"
    prose[50] = "\tnewFiles, err := ComputeNewFiles(preState, worktree.Status())"
    plan = "\n".join(prose)
    messages = [msg("system", "s"), msg("user", "Write the plan"),
                assistant_calls(call("w1", "write_file", path="docs/plan.md", content=plan)),
                result("w1", "ok"), msg("user", "next")]
    out = run_core(messages, mode="full", strategies=["clamp_oversized_messages:max_part_tokens=400"])
    clamped = json.loads(out.messages[2].data["tool_calls"][0]["function"]["arguments"])["content"]
    counter, _ = shared_counter()
    assert counter.count_batch([clamped])[0] <= 400
    assert clamped.startswith("Step 0:") and clamped.endswith("Step 79: keep the behaviour as it is and check it by hand before moving on.")
    kept = clamped.split("the lines naming the most: …]\n")[1].split("\n[… compact: end of the lines kept from the cut …]")[0]
    assert kept.splitlines() == [prose[30], prose[50]]


def test_clamp_never_touches_pinned_messages() -> None:
    long_text = " ".join(f"word{i}" for i in range(3000))
    messages = [msg("system", long_text), msg("user", long_text)]
    out = run_core(messages, mode="full", strategies=["clamp_oversized_messages:max_part_tokens=100"])
    assert [m.data["content"] for m in out.messages] == [long_text, long_text]


def test_sliding_window_never_splits_a_call_from_its_results() -> None:
    messages = [
        msg("system", "s"),
        msg("user", "u1"),
        assistant_calls(call("p1", "run_shell", command="ls"), call("p2", "run_shell", command="pwd")),
        result("p1", "files"),
        result("p2", "/home"),
        msg("assistant", "done"),
        msg("user", "u2"),
    ]
    # A window of 4 would cut between the call (line 3) and its results: the whole exchange goes.
    out = run_core(messages, max_messages=4, preset="seed", strategies=["sliding_window:keep_messages=4"])
    assert lines_of(out) == [1, 6, 7]
    assert {e["line"] for e in out.report["removed"]} == {2, 3, 4, 5}


def test_sliding_window_keeps_fewer_when_a_token_budget_demands_it() -> None:
    messages = [msg("system", "s")] + [msg("user" if i % 2 == 0 else "assistant", BIG) for i in range(6)] + [msg("user", "last")]
    out = run_core(messages, max_tokens=6000, preset="seed", strategies=["sliding_window:keep_messages=40"])
    assert out.report["after"]["tokens"] < 6000
    assert lines_of(out)[0] == 1 and lines_of(out)[-1] == 8
    assert lines_of(out) == sorted(lines_of(out))


def test_drop_observations_removes_old_pairs_and_keeps_the_assistant_text() -> None:
    messages = [
        msg("system", "s"),
        msg("user", "u1"),
        assistant_calls(call("a", "grep", pattern="x"), content="Let me search."),
        result("a", BIG),
        msg("user", "u2"),
        assistant_calls(call("b", "grep", pattern="y")),
        result("b", "current turn result"),
    ]
    out = run_core(messages, mode="full", strategies=["drop_observations"])
    by_line = {m.line: m.data for m in out.messages}
    assert 4 not in by_line  # the old result is gone
    assert by_line[3] == {"role": "assistant", "content": "Let me search."}  # its call went with it
    assert 6 in by_line and 7 in by_line  # the current turn is untouched
    actions = {(e["line"], e["action"]) for e in out.report["removed"]}
    assert actions == {(4, "removed"), (3, "rewritten")}


def test_drop_turns_removes_offload_turns_oldest_first_never_the_current() -> None:
    messages = [msg("system", "s")]
    for turn in range(5):
        messages += [msg("user", f"u{turn} " + BIG), msg("assistant", f"a{turn}")]
    out = run_core(messages, mode="full", offload_turns=2, preset="seed", strategies=["drop_turns"])
    assert lines_of(out) == [1, 6, 7, 8, 9, 10, 11]
    budget = run_core(messages, max_tokens=100, offload_turns=1, preset="seed", strategies=["drop_turns"])
    # One turn per pass, at most 4 passes; the current turn (lines 10-11) always stays.
    assert lines_of(budget) == [1, 10, 11]
    assert budget.report["passes"] == 4
    assert budget.report["over_budget"] is True


def test_drop_turns_takes_its_own_turns_parameter_over_offload_turns() -> None:
    messages = [msg("system", "s")]
    for turn in range(5):
        messages += [msg("user", f"u{turn} " + BIG), msg("assistant", f"a{turn}")]
    out = run_core(messages, mode="full", offload_turns=1, preset="seed", strategies=["drop_turns:turns=3"])
    assert lines_of(out) == [1, 8, 9, 10, 11]


@pytest.mark.parametrize(
    "rule",
    ["tool:read_file", "line:4", "match:A-v1", "role:tool"],
)
def test_keep_rules_are_honoured_by_every_strategy(rule: str) -> None:
    out = run_core(reads_transcript(), max_tokens=10, keep=[rule])
    by_line = {m.line: m for m in out.messages}
    assert 4 in by_line and by_line[4].source is not None  # kept byte for byte
    assert 3 in by_line  # and its call stays with it
    assert all(e["line"] != 4 for e in out.report["removed"])


def test_pinned_messages_survive_untouched_even_over_budget() -> None:
    messages = [msg("system", BIG), msg("user", "u1"), msg("assistant", "a1"), msg("user", BIG)]
    out = run_core(messages, max_tokens=100, preset="seed")
    assert lines_of(out) == [1, 4]
    assert out.report["over_budget"] is True
    floor = out.report["budget"]["floor"]
    assert floor["messages"] == 2 and floor["tokens"] == out.report["after"]["tokens"]


def test_pinned_messages_that_fit_are_never_cut_when_the_strategies_fall_short() -> None:
    # A strategy list that cannot reach the budget (here: one that only clears tool results) leaves
    # the run over budget; the last resort is for pinned messages that alone exceed it, so the
    # system prompt and the newest request, which fit, stay whole.
    system, request = "You are terse. " * 60, "Now fix the failing test in parser.py. " * 60
    messages = [msg("system", system), *[msg(role, f"Step {i}: " + "the log is quiet. " * 40)
                                         for i in range(10) for role in ("user", "assistant")], msg("user", request)]
    out = run_core(messages, max_tokens=2000, strategies=["clear_tool_results"])
    assert out.report["over_budget"] is True
    assert out.report["budget"]["floor"]["tokens"] < 2000
    assert out.messages[0].data["content"] == system and out.messages[-1].data["content"] == request
    assert not any(a["strategy"] == "clamp_pinned" for a in out.report["actions"])


def test_pinned_messages_over_the_budget_are_cut_by_their_own_excess_only() -> None:
    # The pinned request alone exceeds the budget, and a short list (clear_tool_results) leaves the
    # unpinned turns in place: the request is cut down to what fits beside the other pins, not
    # further to pay for turns the list did not remove.
    request = "Fix the parser: " + "the tokenizer drops the last byte of every chunk. " * 120
    messages = [msg("system", "You are terse."), *[msg(role, f"Step {i}: " + "quiet log. " * 30)
                                                  for i in range(6) for role in ("user", "assistant")],
                msg("user", request)]
    out = run_core(messages, max_tokens=1000, strategies=["clear_tool_results"])
    [cut] = [m for m in out.messages if m.line == len(messages)]
    floor = out.report["budget"]["floor"]["tokens"]
    assert any(a["strategy"] == "clamp_pinned" for a in out.report["actions"])
    assert 900 <= floor <= 1000  # the pins now fit, with the cut no deeper than that
    assert "[… compact:" in cut.data["content"]


def test_without_a_user_message_the_newest_message_is_kept_not_an_empty_transcript(tmp_path: Path) -> None:
    # Nothing is pinned by role here: an empty output would be no transcript at all.
    messages = [msg("assistant", "the first answer, long enough to count"), msg("assistant", "the last word, which is itself longer than the budget")]
    for preset in ("default", "seed"):
        out = run_core(messages, max_tokens=5, preset=preset)
        assert lines_of(out) == [2]
        assert out.report["over_budget"] is True
    only_system = [msg("system", "you are terse"), msg("assistant", "a reply that does not fit the budget")]
    assert lines_of(run_core(only_system, max_tokens=5)) == [1, 2]
    # The usage warning compact appends, or a system note at the end, is not the conversation's last word.
    steps = [msg("assistant", f"Step {i}: " + "work " * 20) for i in range(12)]
    warned = invoke(str(write_messages(tmp_path / "steps.jsonl", steps)), "--max-tokens", "150", "--warn-fraction", "0.0001")
    assert steps[-1] in read_messages(warned.stdout)
    noted = run_core([*steps, msg("system", "a note at the end " * 5)], max_tokens=150)
    assert 12 in lines_of(noted)


def test_the_window_leaves_its_trace_when_the_trace_fits_beside_the_pinned_messages() -> None:
    # The room kept for the trace is judged by the trace's real size, not by a fixed 120 tokens:
    # here the pinned messages take 46 tokens and the trace about 64, within 120.
    messages = [msg("system", "You are a coding agent.")]
    for t in range(10):
        messages += [msg("user", f"Turn {t}: please do task {t} " + "detail " * 10),
                     msg("assistant", f"Done with {t}. " + "words " * 30)]
    out = run_core(messages, max_tokens=120, summarizer="none")
    assert out.report["after"]["tokens"] <= 120
    assert any(str(m.data.get("content", "")).startswith("[compact:") for m in out.messages)


def test_a_budget_too_small_for_the_window_trace_still_keeps_the_newest_messages_that_fit() -> None:
    # The window keeps room for its trace line while it cuts; when no trace could ever fit, that
    # room must not cost the newest reply, which fits.
    messages = [msg("user", "first question " * 50), msg("assistant", "answer " * 80), msg("user", "q2"),
                msg("assistant", "a2")]
    out = run_core(messages, max_tokens=40, summarizer="none")
    assert lines_of(out) == [3, 4]
    assert out.report["over_budget"] is False


def test_orphans_in_the_input_are_warned_and_repair_drops_them() -> None:
    messages = [
        msg("system", "s"),
        msg("user", "u"),
        assistant_calls(call("cut", "run_shell", command="make"), content="Building."),
        result("ghost", "a result whose call is gone"),
        msg("user", "again"),
    ]
    warned = run_core(messages, mode="unlimited")
    assert warned.report["orphans"] == {"results": [4], "calls": [{"line": 3, "id": "cut"}]}
    assert lines_of(warned) == [1, 2, 3, 4, 5]
    repaired = run_core(messages, mode="unlimited", repair=True)
    assert lines_of(repaired) == [1, 2, 3, 5]
    assert repaired.messages[2].data == {"role": "assistant", "content": "Building."}
    assert {(e["line"], e["action"]) for e in repaired.report["removed"]} == {(4, "removed"), (3, "rewritten")}


def test_strategies_without_their_seam_are_skipped_with_the_reason() -> None:
    out = run_core(reads_transcript(), max_tokens=10, preset="seed")
    assert {"strategy": "offload", "reason": "no store"} in out.report["skipped"]
    assert {"strategy": "summarize", "reason": "no summarizer"} in out.report["skipped"]


class ExplodingSummarizer:
    name = "exploding"
    fits_its_room = False

    def identity(self) -> str:
        return "exploding"

    def summarize(self, request, counter):  # type: ignore[no-untyped-def]
        from core.errors import StrategyError

        raise StrategyError("the summarizer is down")


def test_a_failing_strategy_is_rolled_back_recorded_and_the_pipeline_goes_on() -> None:
    out = run_core(reads_transcript(), max_tokens=10, seams=Seams(summarizer=ExplodingSummarizer()),
                   strategies=["summarize", "sliding_window"])
    assert out.report["last_error"] == "summarize: the summarizer is down"
    failed = out.report["actions"][0]
    assert failed["strategy"] == "summarize" and failed["error"] == "the summarizer is down"
    assert failed["messages_removed"] == 0
    assert all(e["strategy"] != "summarize" for e in out.report["removed"])
    assert any(a["strategy"] == "sliding_window" and a["messages_removed"] for a in out.report["actions"])


def test_unlimited_compacts_nothing_and_full_ignores_the_budget() -> None:
    unlimited = run_core(reads_transcript(), mode="unlimited", max_tokens=10)
    assert lines_of(unlimited) == list(range(1, 11)) and unlimited.report["removed"] == []
    full = run_core(reads_transcript(), mode="full", max_tokens=10**9)
    assert full.report["removed"] != []
    assert full.report["passes"] == 1


def test_under_budget_input_is_left_alone() -> None:
    out = run_core(reads_transcript(), max_tokens=10**6)
    assert out.report["triggered"] is False
    assert all(m.source is not None for m in out.messages)


def test_reused_call_ids_pair_with_the_nearest_call_before_them() -> None:
    # tau-bench reuses one call id in two assistant messages; each result answers the call just before it.
    messages = [
        msg("system", "s"),
        msg("user", "u1"),
        assistant_calls(call("dup", "get_reservation", id="A")),
        result("dup", BIG),
        msg("user", "u2"),
        assistant_calls(call("dup", "update_reservation", id="A")),
        result("dup", "Error: balance too low"),
        msg("user", "u3"),
    ]
    out = run_core(messages, max_messages=5, preset="seed", strategies=["sliding_window:keep_messages=5"])
    assert lines_of(out) == [1, 5, 6, 7, 8]
    dropped = run_core(messages, mode="full", strategies=["drop_observations"])
    assert lines_of(dropped) == [1, 2, 5, 8]


def test_a_placeholder_never_makes_a_result_bigger(samples, tmp_path) -> None:
    import json

    from tests.helpers import invoke

    report = tmp_path / "r.json"
    invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "8000", "--report", str(report))
    ledger = json.loads(report.read_text())["removed"]
    assert all(e["tokens_after"] < e["tokens_before"] for e in ledger if e["action"] == "rewritten")


def test_legacy_function_calls_stay_with_their_results() -> None:
    messages = [
        msg("system", "s"),
        msg("user", "u1"),
        {"role": "assistant", "content": None, "function_call": {"name": "get", "arguments": "{}"}},
        {"role": "function", "name": "get", "content": "42"},
        msg("assistant", "It is 42."),
        msg("user", "u2"),
    ]
    out = run_core(messages, max_messages=4, preset="seed", strategies=["sliding_window:keep_messages=4"])
    # Keeping 4 would split the call (line 3) from its result (line 4): the exchange goes whole.
    assert out.report["orphans"] == {"results": [], "calls": []}
    assert lines_of(out) == [1, 5, 6]


def test_a_message_rewritten_then_removed_in_one_step_is_one_ledger_line() -> None:
    """drop_observations takes two calls of one message one by one: the message goes once, as removed."""
    messages = [
        msg("system", "s"),
        msg("user", "u1"),
        assistant_calls(call("a", "grep", pattern="x"), call("b", "grep", pattern="y")),
        result("a", BIG),
        result("b", BIG),
        msg("user", "u2"),
    ]
    out = run_core(messages, mode="full", strategies=["drop_observations"])
    entries = [(e["line"], e["action"]) for e in out.report["removed"]]
    assert sorted(entries) == [(3, "removed"), (4, "removed"), (5, "removed")]
    assert out.report["actions"][0]["messages_changed"] == 0
    assert out.report["actions"][0]["messages_removed"] == 3


def test_the_default_preset_goes_on_while_it_makes_progress_so_a_rerun_changes_nothing() -> None:
    messages = [msg("system", "s")]
    for turn in range(8):
        messages += [msg("user", f"u{turn} " + BIG), msg("assistant", f"a{turn}")]
    seed = run_core(messages, max_tokens=6000, offload_turns=1, preset="seed", strategies=["drop_turns"])
    assert seed.report["passes"] == 4 and seed.report["over_budget"] is True  # the seed's cap
    out = run_core(messages, max_tokens=6000, offload_turns=1, summarizer="none", strategies=["drop_turns"])
    assert out.report["over_budget"] is False and out.report["passes"] > 4
    again = run_core([m.data for m in out.messages], max_tokens=6000, offload_turns=1, summarizer="none",
                     strategies=["drop_turns"])
    assert [m.data for m in again.messages] == [m.data for m in out.messages]


@pytest.mark.parametrize("budget", [2000, 4000, 6000, 8000, 12000, 16000, 32000])
def test_a_run_over_budget_ends_between_95_and_100_percent_of_it(samples, tmp_path, budget: int) -> None:
    """Budget first: the long sample session comes back using the budget, with a record of what went."""
    import json

    from tests.helpers import invoke, read_messages

    report = tmp_path / "r.json"
    result = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", str(budget), "--report", str(report))
    assert result.exit_code == 0, result.output
    after = json.loads(report.read_text())["after"]["tokens"]
    assert 0.95 * budget <= after < budget
    summaries = [m["content"] for m in read_messages(result.stdout) if str(m["content"]).startswith("CUCA summary:")]
    removed = [e for e in json.loads(report.read_text())["removed"] if e["action"] == "removed"]
    if removed:  # whatever went is recorded where it was: what was asked and what was done
        assert len(summaries) == 1
        # (at 2,000 tokens the newest files touched were reads: the changes are the digest's own lines)
        done = ("Files changed:", "- assistant: Changes: ", "- changed ")
        assert "- user asked (turn " in summaries[0] and any(line in summaries[0] for line in done)


def test_the_trace_of_a_removal_says_what_went_and_how_to_recall_it(tmp_path) -> None:
    from core.store import OffloadStore

    messages = [msg("system", "s"), msg("user", "Fix the parser in a.py")]
    for i in range(6):
        messages += [assistant_calls(call(f"c{i}", "read_file", path=f"src/m{i}.py")), result(f"c{i}", BIG)]
    messages.append(msg("user", "now run the tests"))
    store_path = tmp_path / "s.sqlite"
    with OffloadStore.open(store_path, create=True) as store:
        out = run_core(messages, max_tokens=4000, summarizer="none", seams=Seams(store=store),
                       strategies=["sliding_window"])
    trace = next(m.data["content"] for m in out.messages if m.line is None)
    assert trace.startswith("[compact: ") and "earlier message(s) removed" in trace
    assert "read_file ×" in trace and "src/m" in trace  # the tool and its targets
    assert f"compact recall WORDS --store {store_path}" in trace


def _workspace_with_a_long_reply() -> tuple[Any, list[Any]]:
    """A workspace of three messages (the reply 400 words long) under a 10k-token budget, and its input."""
    from core.counting.counter import MessageCounter
    from core.engine.budget import Budget
    from core.engine.workspace import Workspace
    from core.messages import Message
    from tests.helpers import shared_counter

    counter = MessageCounter(shared_counter()[0])
    texts = [("user", "the task"), ("assistant", "word " * 400), ("user", "go on")]
    messages = counter.count_messages([Message({"role": r, "content": c}, line=n) for n, (r, c) in enumerate(texts, 1)])
    budget = Budget.resolve(max_messages=None, max_tokens=10_000, max_fraction=None, window=128_000, window_resolved=False)
    return Workspace(messages, budget=budget, counter=counter), messages


def test_a_message_given_back_in_part_counts_once_and_keeps_one_ledger_line() -> None:
    """give_back puts the input's message back and cuts its middle: one rewrite in the report, and
    the ledger says how the kept message differs from the input (the earlier clearing line goes)."""
    workspace, messages = _workspace_with_a_long_reply()
    workspace.begin("clear_tool_results", 1)
    workspace.rewrite(1, {"role": "assistant", "content": "[compact: cleared]"}, "cleared")
    workspace.end()
    workspace.begin("give_back", 0)
    original = workspace.restorable(1)
    assert original is not None and original is messages[1]
    workspace.restore(1, original, {"role": "assistant", "content": "word " * 50}, "given back in part")
    assert workspace.end().rewritten == 1
    assert [(e.strategy, e.action, e.tokens_before) for e in workspace.ledger] == [
        ("give_back", "rewritten", messages[1].tokens)]


@pytest.mark.parametrize("budget", [4000, 16000])
def test_every_placeholder_left_in_the_output_names_what_its_result_defined(budget: int) -> None:
    """The gist of a cleared result ("defines f, g" or its error) is what the model can act on; a
    long session's results are cleared by the thousand, and the ones still in the output keep it."""
    from core.engine import placeholders
    from core.engine.file_calls import quotes_files
    from core.messages import content_text
    from tests.test_generator import generator

    messages = [json.loads(line) for line in generator.generate(1500, seed=3, size_scale=0.3)]
    out = run_core(messages, max_tokens=budget, summarizer="none")
    by_line = {i: m for i, m in enumerate(messages, start=1)}
    calls = {c["id"]: c for m in messages for c in m.get("tool_calls") or ()}
    checked = 0
    for message in out.messages:
        text = content_text(message.data)
        if message.role != "tool" or not text.startswith("[compact: tool result of "):
            continue
        original = by_line[message.line]
        call = calls[original["tool_call_id"]]
        gist = placeholders.result_gist(content_text(original), quotes_files=quotes_files(call),
                                        target=placeholders.call_target(call))
        if gist:
            assert text.endswith(f"; {gist}]"), text
            checked += 1
    assert checked >= 1  # (not vacuous: how many survive depends on how the budget packs)


def test_a_cleared_record_names_the_ids_it_held_by_field() -> None:
    """A customer-service agent books with the payment method ids a user lookup returned long
    before: the cleared record keeps its ids, each under the field that held it, and nothing else
    (no prices, dates or names)."""
    user = {"user_id": "sofia_kim_7287", "name": {"first_name": "Sofia", "last_name": "Kim"},
            "address": {"city": "Houston", "zip": "77051"}, "email": "sofia.kim7788@example.com",
            "payment_methods": {"gift_card_7480005": {"source": "gift_card", "amount": 7, "id": "gift_card_7480005"},
                                "credit_card_9879898": {"source": "credit_card", "brand": "visa", "last_four": "9725",
                                                        "id": "credit_card_9879898"}},
            "saved_passengers": [{"first_name": "Ethan", "last_name": "Kim", "dob": "1981-03-06"}],
            "membership": "silver", "reservations": ["OI5L9G", "AQLBTL", "KA7I60"]}
    messages = [
        msg("system", "You are an airline agent."),
        msg("user", "Change my flight back to Houston. My user id is sofia_kim_7287."),
        assistant_calls(call("c1", "get_user_details", user_id="sofia_kim_7287")),
        result("c1", json.dumps(user)),
        assistant_calls(call("c2", "get_reservation_details", reservation_id="OI5L9G")),
        result("c2", json.dumps({"reservation_id": "OI5L9G", "flights": [{"flight_number": "HAT078", "date": "2024-05-27"}]})),
        msg("user", "Use the economy cabin, please."),
    ]
    out = run_core(messages, mode="full", strategies=["clear_tool_results:keep_pairs=1"])
    placeholder = out.messages[3].data["content"]
    assert placeholder.startswith("[compact: tool result of get_user_details cleared, ")
    # (the user id the call asked for is in the call, kept beside it)
    assert placeholder.endswith("; ids: payment_methods gift_card_7480005, credit_card_9879898; "
                                "reservations OI5L9G, AQLBTL, KA7I60]"), placeholder


def test_messages_the_run_must_remove_anyway_are_not_rewritten_first() -> None:
    """Far over a token budget, the oldest results cannot stay whatever is cleared: clearing them
    before the window removes them is wasted work, and each leaves one ledger line, "removed"."""
    from tests.test_generator import generator

    messages = [json.loads(line) for line in generator.generate(1500, seed=3, size_scale=0.3)]
    out = run_core(messages, max_tokens=4000, summarizer="none")
    ledger = out.report["removed"]
    cleared = [e for e in ledger if e["strategy"] == "clear_tool_results"]
    results = sum(1 for m in messages if m["role"] == "tool")
    assert cleared and len(cleared) < results // 2  # the results nearer the kept window only
    older = [e for e in ledger if e["line"] < min(e["line"] for e in cleared)]
    assert len(older) > 500 and all(e["action"] == "removed" for e in older)
    assert len({e["line"] for e in older}) == len(older)  # one ledger line each


def test_without_a_window_step_every_old_result_is_still_cleared() -> None:
    """Only a later sliding_window makes the oldest messages certain to go: a list without one
    still clears every old result, however far over the budget the run stays."""
    from tests.test_generator import generator

    messages = [json.loads(line) for line in generator.generate(600, seed=3, size_scale=0.3)]
    out = run_core(messages, max_tokens=4000, summarizer="none", strategies=["clear_tool_results"])
    results = sum(1 for m in messages if m["role"] == "tool")
    cleared = [e for e in out.report["removed"] if e["strategy"] == "clear_tool_results"]
    assert len(cleared) >= results - 50


def _plan(call_id: str, *statuses: str) -> dict:
    todos = [{"content": f"Port module {i}", "status": s, "activeForm": f"Porting module {i}"} for i, s in enumerate(statuses)]
    return assistant_calls(call(call_id, "TodoWrite", todos=todos))


def test_older_plans_point_at_the_newest_one() -> None:
    """An agent rewrites its whole todo list at every step (Claude Code TodoWrite, Codex
    update_plan): only the newest list is the state, the older ones become a pointer to it,
    oldest first and only as far as the budget needs, and nothing gives them back."""
    from core.messages import call_arguments, tool_calls

    steps = [("in_progress",) + ("pending",) * 9, ("completed", "in_progress") + ("pending",) * 8,
             ("completed",) * 2 + ("in_progress",) + ("pending",) * 7, ("completed",) * 3 + ("in_progress",) + ("pending",) * 6]
    messages = [msg("system", "You are a coding agent."), msg("user", "Port the project to Rust")]
    for i, statuses in enumerate(steps):
        messages += [_plan(f"t{i}", *statuses), result(f"t{i}", "Todos have been modified successfully."),
                     msg("assistant", f"Step {i} is done: module {i} builds and its tests pass.")]
    full = run_core(messages, max_tokens=100_000, summarizer="none")
    out = run_core(messages, max_tokens=sum(m.tokens for m in full.messages) - 200, summarizer="none")
    plans = [call_arguments(c) for m in out.messages for c in tool_calls(m.data) if c["function"]["name"] == "TodoWrite"]
    assert plans[-1]["todos"][3]["status"] == "in_progress"  # the newest plan stays whole
    newest_line = out.messages[[i for i, m in enumerate(out.messages) if tool_calls(m.data)][-1]].line
    assert plans[0] == {"todos": f"[compact: plan superseded by the newer TodoWrite at line {newest_line}]"}
    assert isinstance(plans[-2]["todos"], list)  # the budget needed only the oldest
    assert [e["strategy"] for e in out.report["removed"]] == ["supersede_plans"]


def test_a_free_form_tool_input_is_clamped_as_text() -> None:
    """A Codex custom tool (apply_patch) takes a raw patch, not JSON: clamping keeps its head and
    tail, like any long text, where it used to be left whole and the budget missed."""
    patch = "*** Begin Patch\n*** Add File: styles.css\n" + "".join(f"+.rule-{i} {{ margin: {i}px; }}\n" for i in range(400)) + "*** End Patch"
    messages = [msg("user", "Style the timer"),
                assistant_calls({"id": "p1", "type": "function", "function": {"name": "apply_patch", "arguments": patch}}),
                result("p1", "Success. Updated the following files:\nA styles.css"),
                msg("assistant", "Added styles.css.")]
    out = run_core(messages, max_tokens=100_000, summarizer="none", strategies=["clamp_oversized_messages:max_part_tokens=200"],
                   mode="full")
    arguments = out.messages[1].data["tool_calls"][0]["function"]["arguments"]
    assert arguments.startswith("*** Begin Patch\n*** Add File: styles.css\n+.rule-0 ")
    assert arguments.endswith("+.rule-399 { margin: 399px; }\n*** End Patch")
    assert "tokens cut" in arguments and len(arguments) < len(patch) // 3


def test_a_closing_step_that_fails_before_it_begins_leaves_the_steps_before_it_alone(monkeypatch: Any) -> None:
    """A closing step is rolled back when it fails; one that fails before beginning changed nothing,
    and rolling back then undid the step before it (the window kept 2 messages of a 1-message budget)."""
    from core.engine import bound_thinking

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("broken before it began")

    monkeypatch.setattr(bound_thinking, "thinking_after_change", broken)
    out = run_core([msg("user", "alpha"), msg("assistant", "alpha")], max_messages=1)
    assert len(out.messages) == 1
    assert "broken before it began" in out.report["last_error"]


def test_what_the_run_wrote_stays_its_own_through_rewrites_and_rollbacks() -> None:
    """A summary the run inserted is its own; an input message it rewrites as its own (an earlier run's
    summary taking the new one in) becomes its own; a rolled-back step leaves neither changed."""
    from core.messages import Message

    workspace, _ = _workspace_with_a_long_reply()
    workspace.begin("summarize", 1)
    workspace.insert(1, Message({"role": "system", "content": "a summary"}))
    workspace.end()
    assert [workspace.is_own(p) for p in range(4)] == [False, True, False, False]
    workspace.begin("summarize", 2)
    workspace.rewrite_own(2, {"role": "assistant", "content": "folded"}, "folded")
    workspace.rollback()
    assert [workspace.is_own(p) for p in range(4)] == [False, True, False, False]
    workspace.begin("summarize", 2)
    workspace.rewrite_own(2, {"role": "assistant", "content": "folded"}, "folded")
    workspace.end()
    assert [workspace.is_own(p) for p in range(4)] == [False, True, True, False]
    assert workspace.pinned(1) and workspace.pinned(2)


def test_a_give_back_rolled_back_leaves_the_ledger_as_it_was() -> None:
    """A store that refuses give_back's offload rolls the step back: the message stays cleared, so the
    ledger line that says so must stay too (giving back had deleted it)."""
    workspace, _ = _workspace_with_a_long_reply()
    workspace.begin("clear_tool_results", 1)
    workspace.rewrite(1, {"role": "assistant", "content": "[compact: cleared]"}, "cleared")
    workspace.end()
    cleared = list(workspace.ledger)
    workspace.begin("give_back", 0)
    original = workspace.restorable(1)
    assert original is not None
    workspace.restore(1, original)
    workspace.rollback()
    assert workspace.messages[1].data["content"] == "[compact: cleared]"
    assert workspace.ledger == cleared
    assert workspace.rewritten_by(1) == {"clear_tool_results"}


def test_an_earlier_summary_with_nothing_left_to_fold_into_is_cut_before_the_run_ends_over_budget() -> None:
    # A session compacted before, compacted again to a smaller budget: only the earlier summary is
    # left between the pins, so no span can fold it in. It was kept whole and the run ended over
    # budget, its "floor" counting a summary that can shrink.
    summary = ("CUCA summary: turns 1-6 (lines 3-40, 38 messages) summarized by extractive.\n"
               '<summary topic="the parser" compressed-from-turns="1-6">\n'
               + "".join(f"- ran `pytest tests/test_case_{i}.py` → 1 failed, the tokenizer drops byte {i}\n" for i in range(80))
               + "</summary>\nFiles changed: src/parser.py")
    system = "You are terse."
    messages = [msg("system", system), msg("user", "Fix the parser."), msg("system", summary), msg("user", "Now run the tests.")]
    out = run_core(messages, max_tokens=600)
    assert out.report["over_budget"] is False and out.report["after"]["tokens"] < 600
    assert [m.line for m in out.messages] == [1, 2, 3, 4]
    cut = out.messages[2].data["content"]
    assert cut.startswith("CUCA summary: turns 1-6 ") and "[… compact:" in cut and cut.endswith("src/parser.py")
    assert out.messages[0].data["content"] == system
    assert [e["line"] for e in out.report["removed"] if e["strategy"] == "clamp_pinned"] == [3]


@pytest.mark.parametrize(("output", "gist"), [
    ('{"output":"apply_patch verification failed: Failed to find expected lines in script.js:\\nconst x = 1;","metadata":{"exit_code":1}}',
     "error: apply_patch verification failed: Failed to find expected lines in script.js:"),
    ("Failed to find expected lines in /src/app.py", "error: Failed to find expected lines in /src/app.py"),
    ("<tool_use_error>File does not exist. Did you mean .golangci.yaml?</tool_use_error>",
     "error: File does not exist. Did you mean .golangci.yaml?"),
])
def test_a_cleared_result_of_a_call_that_failed_says_it_failed(output: str, gist: str) -> None:
    """A failed patch's placeholder read like any other ("tool result of apply_patch script.js
    cleared"), with the patch still in the call beside it: it looked applied."""
    from core.engine import placeholders

    assert placeholders.result_gist(output, target="script.js") == gist
    assert placeholders.result_gist(output, quotes_files=True, target="script.js") == gist


def test_code_that_prints_a_failure_is_not_a_failed_call() -> None:
    from core.engine import placeholders

    code = '\tif err := copyMetadataDir(dst); err != nil {\n\t\tt.Fatalf("copyMetadataDir failed: %v", err)\n\t}'
    assert not placeholders.result_gist(code).startswith("error:")


@pytest.mark.parametrize(("session", "budget"), [
    ("claude-code/cctrace-phase0-investigation.jsonl", "8000"),
    ("claude-code/claude-reliability-coverage-test-fix.jsonl", "2000"),
    ("codex-cli/codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl", "2000"),
])
def test_a_pointer_names_the_line_of_the_call_it_points_at(session: str, budget: str, realdata: Path) -> None:
    """A reply written over several lines (thinking, text, then the call) is one message: "changed
    later at line 10" named its first line, a text block, and the Edit was at line 12."""
    path = realdata / session
    raw = path.read_text().splitlines()
    run = invoke(str(path), "--max-tokens", budget, "-q")
    assert run.exit_code == 0, run.stderr
    pointers = re.findall(r"(?:changed later|superseded by a newer \w+ of [^\]]*?|by the newer \w+) at line (\d+)",
                          run.stdout)
    assert pointers
    for number in map(int, pointers):  # the call, or the result of the newer read
        assert re.search(r'"type": ?"(tool_use|tool_result|function_call|function_call_output|custom_tool_call)"',
                         raw[number - 1]), raw[number - 1][:300]


def test_a_cut_through_a_plan_names_the_sections_it_took() -> None:
    """A 4k-token plan written with Write lost its middle as "[… compact: N tokens cut …]": which of
    its sections went was not said, so the model could not know what to read again."""
    plan = "# Plan\n\n" + "".join(f"## Step {i}: move the {i}th store\n\n" + "Details of the move. " * 40 + "\n\n"
                                  for i in range(12))
    messages = [msg("system", "s"), msg("user", "Write the plan"),
                assistant_calls(call("w1", "Write", file_path="PLAN.md", content=plan)),
                result("w1", "ok"), msg("user", "next")]
    out = run_core(messages, mode="full", strategies=["clamp_oversized_messages:max_part_tokens=400"])
    clamped = json.loads(out.messages[2].data["tool_calls"][0]["function"]["arguments"])["content"]
    marker = next(line for line in clamped.splitlines() if "tokens cut" in line)
    assert ", sections Step " in marker, marker
    for title in marker.split("sections ")[1].split(" and ")[0].rstrip(" …]").split("; "):
        assert f"## {title}" in plan and f"## {title}" not in clamped.replace(marker, "")  # from the cut part
    script = "#!/bin/sh\n" + "".join(f"# step {i}\necho step {i} >> log.txt\n" for i in range(300))
    assert ", sections" not in placeholders_cut_of(script)  # (a shell comment is no section)


def placeholders_cut_of(text: str) -> str:
    from core.counting.counter import MessageCounter
    from core.engine.clamp import clamp_text
    from tests.helpers import shared_counter

    return clamp_text(text, 200, MessageCounter(shared_counter()[0])) or ""
