"""Real public transcripts (../shared/realdata): what synthetic data hides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.io.schema_loader import validator
from core.messages import call_ids, result_ids
from tests.helpers import invoke

CANONICAL = ["openai-chat/tau-bench-airline-task3.jsonl", "openai-chat/swe-agent-marshmallow-1867.jsonl"]


@pytest.mark.parametrize("name", CANONICAL)
def test_round_trip_is_byte_for_byte(name: str, realdata: Path) -> None:
    path = realdata / name
    result = invoke(str(path), "--unlimited")
    assert result.exit_code == 0, result.output
    assert result.stdout.encode() == path.read_bytes()


@pytest.mark.parametrize("name", CANONICAL)
@pytest.mark.parametrize("budget", [500, 2000, 4000])
def test_compaction_keeps_the_invariants(name: str, budget: int, realdata: Path, tmp_path: Path) -> None:
    path = realdata / name
    original = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    report_path = tmp_path / "r.json"
    result = invoke(str(path), "--max-tokens", str(budget), "--report", str(report_path))
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    validator("report").validate(report)
    out = [json.loads(line) for line in result.stdout.splitlines()]
    for message in out:
        validator("message").validate(message)
    calls = {cid for m in out for cid in call_ids(m)}
    results = {rid for m in out for rid in result_ids(m)}
    assert calls == results  # no orphan either way (these inputs have none)
    if out[0] != original[0]:
        # Pinned, but the last resort when the pins alone exceed the budget: head and tail stay.
        assert any(a["strategy"] == "clamp_pinned" for a in report["actions"])
        assert out[0]["content"].startswith(original[0]["content"][:100])
        assert "tokens cut" in out[0]["content"]
    last_user = original[max(i for i, m in enumerate(original) if m["role"] == "user")]
    if last_user not in out:  # the same last resort: its middle cut, its head and tail kept
        head = last_user["content"][:100]
        assert any(m["role"] == "user" and m["content"].startswith(head) and "tokens cut" in m["content"] for m in out)
    if report["budget"]["floor"]["tokens"] < budget:
        assert report["after"]["tokens"] < budget
    removed = {e["line"] for e in report["removed"] if e["action"] == "removed"}
    added = sum(a["messages_added"] for a in report["actions"])
    assert len(original) - len(out) + added == len(removed)


def test_swe_agent_tool_call_ids_lists_pair_like_tool_call_id(realdata: Path) -> None:
    report = invoke("count", str(realdata / CANONICAL[1]), "--format", "json")
    usage = json.loads(report.stdout)
    assert usage["orphans"] == {"results": [], "calls": []}


def compact_to_budget(path: Path, budget: int, tmp_path: Path) -> dict:
    """Compact ``path`` to ``out.jsonl`` under ``budget``; the report, after checking the run ends
    between 95% and 100% of the budget."""
    report_path = tmp_path / "r.json"
    result = invoke(str(path), "--max-tokens", str(budget), "--report", str(report_path), "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    assert 0.95 * budget <= report["after"]["tokens"] < budget
    return report


@pytest.mark.parametrize("budget", [4000, 8000, 12000])
def test_results_cleared_before_a_summary_took_the_span_come_back_when_they_fit(
        budget: int, realdata: Path, tmp_path: Path) -> None:
    """Clearing runs before summarize; once the summary has taken the oldest span, the results it
    cleared nearer the kept window are given back whole while they fit: the run fills its budget
    with the agent's own output instead of placeholders (the Rust-port session: 13.9k tokens)."""
    path = realdata / "claude-code" / "claude-reliability-python-to-rust-port.jsonl"
    report = compact_to_budget(path, budget, tmp_path)
    kept = {json.loads(line).get("uuid") for line in (tmp_path / "out.jsonl").read_text().splitlines()}
    cleared = [e for e in report["removed"] if e["action"] == "rewritten" and e["strategy"] == "clear_tool_results"]
    # Every ledger line for a kept message describes how it differs from the input: none is restored.
    original = {json.loads(line).get("uuid"): line for line in path.read_text().splitlines()}
    by_line = {n: json.loads(line).get("uuid") for n, line in enumerate(path.read_text().splitlines(), start=1)}
    for entry in cleared:
        uuid = by_line[entry["line"]]
        if uuid in kept:
            assert original[uuid] not in (tmp_path / "out.jsonl").read_text()


@pytest.mark.parametrize("budget", [4000, 8000, 16000])
def test_the_long_claude_code_session_fills_its_budget(budget: int, realdata: Path, tmp_path: Path) -> None:
    """cctrace (121k tokens): after the summary, what room is left brings back the newest cleared
    result, whole or with its middle cut, so the run ends between 95% and 100% of the budget."""
    report = compact_to_budget(realdata / "claude-code" / "cctrace-phase0-investigation.jsonl", budget, tmp_path)
    given = [e for e in report["removed"] if e["strategy"] == "give_back"]
    assert all(e["action"] == "rewritten" and "middle cut" in e["reason"] for e in given)


@pytest.mark.parametrize("budget", [8000, 12000, 16000])
def test_a_prefix_whose_newest_swallowed_exchanges_are_large_still_fills_its_budget(
        budget: int, realdata: Path, tmp_path: Path) -> None:
    """cctrace up to its second request (50k tokens): the span the summary must take ends with the
    agent's 3k-token Write calls of its design documents. The newest exchanges are kept whole while
    they fit and the next one with its middle cut, instead of landing at 85-92% of the budget."""
    lines = (realdata / "claude-code" / "cctrace-phase0-investigation.jsonl").read_text().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines, start=1) if "walk me through the manual testing steps" in line)
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_text("".join(lines[:cut]))
    report = compact_to_budget(prefix, budget, tmp_path)
    assert any(e["strategy"] == "summarize" for e in report["actions"])


@pytest.mark.parametrize(("name", "budget"), [
    # Gemini CLI: the span the summary must take ends with a `replace` call whose old and new text
    # (2.4k and 3.2k characters) are each under any one cap: the cut has to be shared between them.
    ("gemini-cli/gemini-cli-chat-session-pomodoro-timer.json", 1631),
    ("gemini-cli/gemini-cli-chat-session-pomodoro-timer.json", 2937),
    ("gemini-cli/gemini-cli-chat-session-pomodoro-timer.json", 4895),
    # Claude Code: the cleared result is a subagent's report in two text parts.
    ("claude-code/claude-reliability-python-to-rust-port.jsonl", 11129),
    # The span the summary must take is one exchange (three write_file calls and their results):
    # cut, it fills the budget; summarized, the run ended at 89%.
    ("gemini-cli/gemini-cli-chat-session-pomodoro-timer.json", 6200),
])
def test_a_cut_shared_between_several_long_texts_still_fills_the_budget(
        name: str, budget: int, realdata: Path, tmp_path: Path) -> None:
    """Cutting the middle of a message to fill the budget cuts all its long texts as far as needed
    together (tool-call arguments too), instead of giving up because no one text alone is long
    enough, which left these runs at 58-92% of the budget. The cut is in the ledger even when
    another message decoded from the same line (a Gemini chat's call and result) is given back."""
    report = compact_to_budget(realdata / name, budget, tmp_path)
    cut = [e for e in report["removed"] if e["action"] == "rewritten" and "middle" in e["reason"]]
    assert cut, report["actions"]


def test_a_swe_agent_trajectory_is_made_valid_for_openai_by_repair(realdata: Path, tmp_path: Path) -> None:
    """SWE-agent names the call a tool message answers in a one-id `tool_call_ids` list, which the
    Chat Completions API does not take: validate says what to do, and --repair writes `tool_call_id`."""
    path = realdata / CANONICAL[1]
    check = invoke("validate", str(path), "--for", "openai")
    assert check.exit_code == 1
    assert "tool_call_ids list" in check.output and "--repair" in check.output
    assert "several calls" not in check.output  # each list holds one id
    out = tmp_path / "out.jsonl"
    result = invoke(str(path), "--max-tokens", "4000", "--repair", "--check-for", "openai", "-o", str(out))
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    tools = [m for m in written if m["role"] == "tool"]
    assert tools and all("tool_call_ids" not in m and m["tool_call_id"] for m in tools)
    assert invoke("validate", str(out), "--for", "openai").exit_code == 0


def test_a_span_too_small_around_the_working_copies_is_summarized_with_them(realdata: Path, tmp_path: Path) -> None:
    """The Codex session up to its 92nd line (5k tokens) at 4,000 tokens: its writes are most of
    what is old, so the span left around them is smaller than any summary. The summary then takes
    the writes like the rest, instead of being skipped and leaving the window to drop the turns
    with no record at all."""
    lines = (realdata / "codex-cli" / "codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl").read_text()
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_text("".join(lines.splitlines(keepends=True)[:92]))
    report = compact_to_budget(prefix, 4000, tmp_path)
    acted = [a["strategy"] for a in report["actions"]]
    assert "summarize" in acted and "sliding_window" not in acted and not report["skipped"]
