"""`compact diff BEFORE AFTER`: known pairs, compact's own output against its ledger, and speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.analysis.diff import diff_messages, match_keys
from core.messages import Message
from tests.helpers import assistant_calls, call, invoke, msg, result, run_core
from tests.test_provider_check import transcripts

MARKERS = ("CUCA context warning:", "CUCA graph memory:")
S = msg("system", "You are a coding agent.")
U1, A1 = msg("user", "Read a.py"), msg("assistant", "It defines f.")
U2, A2 = msg("user", "Now b.py"), msg("assistant", "It defines g.")


def loaded(messages: list[dict[str, Any]]) -> list[Message]:
    return [
        Message(data=m, line=i, tokens=len(orjson.dumps(m)))
        for i, m in enumerate(messages, start=1)
    ]


def changes(before: list[dict], after: list[dict]) -> list[tuple[str, int | None, int | None]]:
    found, _ = diff_messages(loaded(before), loaded(after), markers=MARKERS)
    return [(c.change, c.before_line, c.after_line) for c in found]


def test_identical_transcripts_have_no_changes() -> None:
    found, kept = diff_messages(loaded([S, U1, A1]), loaded([S, U1, A1]))
    assert found == [] and kept == [(0, 0), (1, 1), (2, 2)]


def test_removed_messages_keep_their_before_lines() -> None:
    assert changes([S, U1, A1, U2, A2], [S, U2, A2]) == [("removed", 2, None), ("removed", 3, None)]


def test_a_rewritten_tool_result_pairs_by_role_and_call_id() -> None:
    before = [
        S,
        U1,
        assistant_calls(call("c1", "read_file", path="a.py"), call("c2", "read_file", path="b.py")),
        result("c1", "A" * 500),
        result("c2", "B" * 500),
        A1,
    ]
    after = [
        *before[:3],
        result("c1", "[compact: tool result cleared, 120 tokens]"),
        result("c2", "[compact: tool result cleared, 120 tokens]"),
        A1,
    ]
    assert changes(before, after) == [("rewritten", 4, 4), ("rewritten", 5, 5)]


def test_an_assistant_message_that_lost_its_call_is_rewritten() -> None:
    calling = assistant_calls(call("c1", "grep", pattern="f"), content="Let me look.")
    before = [U1, calling, result("c1", "a.py:1"), A1, U2]
    after = [U1, msg("assistant", "Let me look."), A1, U2]
    assert changes(before, after) == [("rewritten", 2, 2), ("removed", 3, None)]


def test_the_warning_is_added_and_a_replaced_graph_message_is_rewritten() -> None:
    graph_v1 = msg("system", "CUCA graph memory: a -> b")
    graph_v2 = msg("system", "CUCA graph memory: a -> b -> c")
    warning = msg("system", "CUCA context warning: this conversation uses 90% of the window")
    before = [S, graph_v1, U1, A1, U2, msg("system", "an operator note")]
    after = [S, graph_v2, U2, warning]
    # The warning does not take the place of the removed system note: it starts with a marker, the note does not.
    assert changes(before, after) == [
        ("rewritten", 2, 2),
        ("removed", 3, None),
        ("removed", 4, None),
        ("removed", 6, None),
        ("added", None, 4),
    ]


def test_of_identical_messages_the_newest_are_kept() -> None:
    noted = msg("assistant", "noted")
    before = [
        S,
        msg("user", "1"),
        noted,
        msg("user", "2"),
        noted,
        msg("user", "3"),
        noted,
        msg("user", "q"),
    ]
    after = [S, noted, msg("user", "q")]
    assert [c[1] for c in changes(before, after)] == [2, 3, 4, 5, 6]  # line 7 is the "noted" kept


def test_a_rewrite_identical_to_an_older_message_does_not_derail_the_alignment() -> None:
    # Dropping line 5's call leaves exactly line 3's value; line 3 itself was removed.
    checking = msg("assistant", "Checking.")
    calling = assistant_calls(call("c1", "grep", pattern="x"), content="Checking.")
    before = [S, U1, checking, U2, calling, result("c1", "out"), A1, msg("user", "three"), A2]
    after = [S, U2, checking, A1, msg("user", "three"), A2]
    assert changes(before, after) == [
        ("removed", 2, None),
        ("removed", 3, None),
        ("rewritten", 5, 3),
        ("removed", 6, None),
    ]


def test_key_order_does_not_matter() -> None:
    reordered = {"content": "Read a.py", "role": "user"}
    assert changes([S, U1], [S, reordered]) == []


def run_compact(
    samples: Path, tmp_path: Path, name: str, *options: str
) -> tuple[Path, Path, dict[str, Any]]:
    source = samples / f"{name}.jsonl"
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    run = invoke(str(source), *options, "-o", str(out), "--report", str(report))
    assert run.exit_code == 0, run.stderr
    return source, out, json.loads(report.read_text())


RUNS = [
    ("agent_session", ["--max-tokens", "8000"]),
    ("agent_session", ["--max-tokens", "40000", "--warn-fraction", "0.5"]),
    ("agent_session", ["--max-messages", "30"]),
    ("agent_session", ["--full"]),
    (
        "agent_session",
        ["--max-tokens", "60000", "-s", "clear_tool_results:keep_pairs=5", "-s", "drop_turns"],
    ),
    ("short_chat", ["--max-messages", "3"]),
    (
        "seed_example",
        [
            "--max-messages",
            "6",
            "--context-window",
            "256",
            "--warn-fraction",
            "0.2",
            "--strategy",
            "sliding_window:keep_messages=4",
        ],
    ),
]


@pytest.mark.parametrize(("name", "options"), RUNS)
def test_diff_of_compact_output_agrees_with_the_report_ledger(
    samples: Path, tmp_path: Path, name: str, options: list[str]
) -> None:
    source, out, report = run_compact(samples, tmp_path, name, *options)
    run = invoke("diff", str(source), str(out), "--format", "json")
    assert run.exit_code == 0, run.stderr
    diff = json.loads(run.stdout)
    ledger_removed = {e["line"] for e in report["removed"] if e["action"] == "removed"}
    ledger_rewritten = {
        e["line"] for e in report["removed"] if e["action"] == "rewritten"
    } - ledger_removed
    by_kind: dict[str, list[int]] = {"removed": [], "rewritten": [], "added": []}
    for change in diff["changes"]:
        by_kind[change["change"]].append(
            change["after_line" if change["change"] == "added" else "before_line"]
        )
    assert sorted(by_kind["removed"]) == sorted(ledger_removed)
    assert sorted(by_kind["rewritten"]) == sorted(ledger_rewritten)
    added_by_strategies = sum(a["messages_added"] for a in report["actions"])
    assert len(by_kind["added"]) == int(report["warning_appended"]) + added_by_strategies
    assert (diff["before"]["messages"], diff["before"]["tokens"]) == (
        report["before"]["messages"],
        report["before"]["tokens"],
    )
    assert (diff["after"]["messages"], diff["after"]["tokens"]) == (
        report["after"]["messages"],
        report["after"]["tokens"],
    )
    summary = diff["summary"]
    kept_and_changed = (
        summary["kept"]["tokens_after"]
        + summary["rewritten"]["tokens_after"]
        + summary["added"]["tokens_after"]
    )
    assert (
        summary["kept"]["tokens_before"]
        + summary["removed"]["tokens_before"]
        + summary["rewritten"]["tokens_before"]
        == diff["before"]["tokens"]
    )
    assert kept_and_changed == diff["after"]["tokens"]


def test_the_table_shows_totals_and_runs_of_removed_lines(samples: Path, tmp_path: Path) -> None:
    source, out, _ = run_compact(
        samples,
        tmp_path,
        "seed_example",
        "--max-messages",
        "6",
        "--context-window",
        "256",
        "--warn-fraction",
        "0.2",
        "--strategy",
        "sliding_window:keep_messages=4",
        "--preset",
        "seed",
    )
    run = invoke("diff", str(source), str(out))
    assert run.exit_code == 0 and run.stderr == ""
    text = run.stdout
    assert f"compact diff · {source} → {out}" in text
    assert "removed ×5" in text and "2–6" in text  # S U A U A U A U -> S A U + warning
    assert "added" in text


def test_a_run_of_removed_messages_goes_on_over_lines_that_hold_no_message(realdata: Path, tmp_path: Path) -> None:
    """A Claude Code log holds lines that are no message (snapshots, hook progress): removed messages
    around them are one run, not a row for every gap (the summary of cctrace made some 80 rows)."""
    source = realdata / "claude-code" / "cctrace-phase0-investigation.jsonl"
    out = tmp_path / "out.jsonl"
    assert invoke(str(source), "--max-tokens", "8000", "-o", str(out), "-q").exit_code == 0
    document = json.loads(invoke("diff", str(source), str(out), "--format", "json").stdout)
    removed = [c for c in document["changes"] if c["change"] == "removed"]
    table = invoke("diff", str(source), str(out)).stdout
    rows = [line for line in table.splitlines() if line.startswith("removed") and line.count("│") == 5]
    assert len(rows) < len(removed) / 4
    assert sum(int(r.split()[1].lstrip("×")) if "×" in r else 1 for r in rows) == len(removed)


def test_bad_usage_and_input_exit_2(samples: Path, tmp_path: Path) -> None:
    both_stdin = invoke("diff", "-", "-")
    assert both_stdin.exit_code == 2 and "cannot both be stdin" in both_stdin.stderr
    bad = invoke(
        "diff", str(samples / "short_chat.jsonl"), str(samples / "errors" / "unknown_role.jsonl")
    )
    assert bad.exit_code == 2 and "unknown role 'robot'" in bad.stderr
    piped = invoke(
        "diff",
        "-",
        str(samples / "short_chat.jsonl"),
        "--format",
        "json",
        input=(samples / "short_chat.jsonl").read_bytes(),
    )
    assert json.loads(piped.stdout)["changes"] == []


def test_ten_thousand_messages_align_exactly() -> None:
    before: list[dict[str, Any]] = []
    for i in range(2000):
        before += [
            msg("user", f"step {i}"),
            assistant_calls(call(f"c{i}", "read_file", path=f"f{i % 50}.py")),
            result(f"c{i}", f"content {i} " * 20),
            msg("assistant", "ok"),
            msg("assistant", "ok"),
        ]
    after = []
    for i, m in enumerate(before):
        if i % 7 == 0:
            continue  # removed
        after.append(
            result(m["tool_call_id"], "[compact: cleared]") if m["role"] == "tool" and i % 2 else m
        )
    after.append(msg("system", "CUCA context warning: ..."))
    old, new = loaded(before), loaded(after)
    # Speed is the benchmark's business (no timed tests); this checks the large case is right.
    found, kept = diff_messages(old, new, markers=MARKERS)
    assert sum(c.change == "removed" for c in found) == len(range(0, 10000, 7))
    assert len(kept) + sum(c.change != "removed" for c in found) == len(after)


def test_many_identical_messages_keep_the_newest() -> None:
    keys = ["same"] * 20000
    pairs = match_keys([[k] for k in keys], [[k] for k in keys[:10000]], range(20000), range(10000))
    assert pairs == [(10000 + j, j) for j in range(10000)]  # the newest are kept


def with_unique_texts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same transcript with every text made unique: nothing but content tells messages apart."""
    return [
        {**m, "content": f"{m['content']} #{k}"} if isinstance(m.get("content"), str) else m
        for k, m in enumerate(messages)
    ]


def compact_and_diff(
    messages: list[dict[str, Any]], fraction: float, full: bool
) -> tuple[Any, list[Any], Any]:
    total = run_core(messages, mode="unlimited").report["before"]["tokens"]
    mode = "full" if full else "budget"
    # The seed preset adds no summary or trace: every change is a removal, a rewrite or the warning.
    out = run_core(messages, max_tokens=max(1, int(total * fraction)), mode=mode, warn_fraction=0.3, preset="seed")
    after = [Message(data=m.data, line=k) for k, m in enumerate(out.messages, start=1)]
    found, kept = diff_messages(loaded(messages), after, markers=MARKERS)
    return out, found, kept


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(transcripts().map(with_unique_texts), st.floats(0.02, 1.0), st.booleans())
def test_diff_agrees_with_the_ledger_when_texts_are_unique(
    messages: list[dict[str, Any]], fraction: float, full: bool
) -> None:
    out, found, _ = compact_and_diff(messages, fraction, full)
    ledger = out.report["removed"]
    removed = {e["line"] for e in ledger if e["action"] == "removed"}
    rewritten = {e["line"] for e in ledger if e["action"] == "rewritten"} - removed
    assert {c.before_line for c in found if c.change == "removed"} == removed
    assert {c.before_line for c in found if c.change == "rewritten"} == rewritten
    assert sum(c.change == "added" for c in found) == int(out.report["warning_appended"])


@PROPERTY
@given(transcripts(), st.floats(0.02, 1.0), st.booleans())
def test_diff_always_accounts_for_every_message_once_in_order(
    messages: list[dict[str, Any]], fraction: float, full: bool
) -> None:
    # With repeated texts a rewrite can equal another message word for word; the diff may then
    # name a different line than the ledger, but it is still a complete, ordered account.
    out, found, kept = compact_and_diff(messages, fraction, full)
    after = [m.data for m in out.messages]
    assert all(messages[i] == after[j] for i, j in kept)
    pairs = [
        *kept,
        *((c.before_line - 1, c.after_line - 1) for c in found if c.change == "rewritten"),
    ]
    pairs.sort()
    assert [j for _, j in pairs] == sorted(j for _, j in pairs)
    before_seen = [i for i, _ in pairs] + [
        c.before_line - 1 for c in found if c.change == "removed"
    ]
    after_seen = [j for _, j in pairs] + [c.after_line - 1 for c in found if c.change == "added"]
    assert sorted(before_seen) == list(range(len(messages)))
    assert sorted(after_seen) == list(range(len(after)))
