"""drop_old_thinking: earlier turns' thinking goes first, oldest first; the current turn's stays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from tests.helpers import invoke, invoke_with_report, read_messages

CLAUDE_CODE = "claude-code/cctrace-phase0-investigation.jsonl"


def thinking(n: int) -> dict[str, Any]:
    words = " ".join(f"consider-{n}-{i}" for i in range(120))
    return {"type": "thinking", "thinking": f"Thought {n}: {words}", "signature": f"sig-{n}"}


def session(tmp_path: Path) -> Path:
    """Two earlier turns with thinking (one assistant message holds nothing else), then the current turn."""
    lines = [
        {"system": "You are a careful coding assistant."},
        {"role": "user", "content": "Read app.py."},
        {"role": "assistant", "content": [thinking(1), {"type": "text", "text": "Reading it."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "app.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def add(a, b):\n    return a - b\n"}]},
        {"role": "assistant", "content": [thinking(2)]},
        {"role": "assistant", "content": [{"type": "text", "text": "add() subtracts: that is the bug."}]},
        {"role": "user", "content": "Fix it and run the tests."},
        {"role": "assistant", "content": [thinking(3), {"type": "tool_use", "id": "toolu_2", "name": "Bash",
                                                         "input": {"command": "pytest -q"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "1 failed"}]},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def thoughts(stdout: str) -> list[str]:
    return [b["signature"] for line in read_messages(stdout) if isinstance(line.get("content"), list)
            for b in line["content"] if b.get("type") == "thinking"]


def total_tokens(path: Path) -> int:
    return int(json.loads(invoke("count", str(path), "--format", "json").stdout)["before"]["tokens"])


def test_once_the_oldest_thinking_goes_the_thinking_after_it_goes_too(tmp_path: Path) -> None:
    """The budget needs one block; but a thinking block is bound to everything before it: on models with
    preserved thinking (Claude Fable 5.1, Opus 5.5, ...) the API refuses one whose earlier conversation
    changed (400, "bound to a different conversation"). So the earlier turns' thinking after the first
    change goes as well; the current turn's stays, since no --model says it would be refused."""
    path = session(tmp_path)
    budget = total_tokens(path) - 20  # less than one thinking block over
    result, report = invoke_with_report(str(path), "--max-tokens", str(budget), tmp_path=tmp_path)
    assert thoughts(result.stdout) == ["sig-3"]
    assert [a["strategy"] for a in report["actions"]] == ["drop_old_thinking", "thinking_after_change"]
    assert "Reading it." in result.stdout and "add() subtracts" in result.stdout  # nothing a model reads is lost
    assert report["after"]["tokens"] <= budget
    after_change = [e for e in report["removed"] if e["strategy"] == "thinking_after_change"]
    assert after_change and all("bound to" in e["reason"] for e in after_change)


@pytest.mark.parametrize(("model", "kept"), [("claude-opus-5-5", []), ("claude-fable-5-1-20260901", []),
                                             ("anthropic/claude-opus-5.5", []), ("claude-opus-4-5", ["sig-3"])])
def test_the_current_turns_thinking_goes_after_a_change_for_a_model_that_checks_its_prefix(
        model: str, kept: list[str], tmp_path: Path) -> None:
    """The tool-use loop in progress: a model that checks a thinking block's prefix would refuse its
    thinking once the run changed an earlier message; an older model needs it to continue the loop."""
    path = session(tmp_path)
    budget = total_tokens(path) - 20
    result, _ = invoke_with_report(str(path), "--max-tokens", str(budget), "--model", model,
                                        "--check-for", "anthropic", tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert thoughts(result.stdout) == kept
    assert "pytest -q" in result.stdout  # the call stays; only its thinking went


def test_a_run_that_changes_nothing_before_the_thinking_keeps_it(tmp_path: Path) -> None:
    path = session(tmp_path)
    result, report = invoke_with_report(str(path), "--max-tokens", str(total_tokens(path) + 10),
                                        "--model", "claude-opus-5-5", tmp_path=tmp_path)
    assert thoughts(result.stdout) == ["sig-1", "sig-2", "sig-3"]
    assert report["actions"] == []


def test_every_earlier_turn_loses_its_thinking_and_the_current_turn_keeps_its_own(tmp_path: Path) -> None:
    path = session(tmp_path)
    budget = total_tokens(path) - 700  # more than one thinking block (about 600 tokens) over
    result, report = invoke_with_report(str(path), "--max-tokens", str(budget), "--check-for", "anthropic",
                                        tmp_path=tmp_path)
    assert thoughts(result.stdout) == ["sig-3"]  # the tool-use loop in progress keeps its signed thinking
    out = read_messages(result.stdout)
    assert len(out) == 8  # the assistant message that held only thinking went whole
    assert [a["strategy"] for a in report["actions"]] == ["drop_old_thinking"]
    assert {e["strategy"] for e in report["removed"]} == {"drop_old_thinking"}  # each one is in the ledger


def test_a_real_claude_code_session_sheds_earlier_thinking_before_anything_a_model_reads(
    realdata: Path, tmp_path: Path
) -> None:
    source = realdata / CLAUDE_CODE
    _, report = invoke_with_report(str(source), "--max-tokens", "8000", "-o", str(tmp_path / "out.jsonl"),
                                   tmp_path=tmp_path)
    first = report["actions"][0]
    assert first["strategy"] == "drop_old_thinking" and first["tokens_saved"] > 9000
    back = formats.read(str(tmp_path / "out.jsonl"))
    assert not back.skipped_lines
    users = [i for i, m in enumerate(back.messages) if m.role == "user"]
    earlier = [m for m in back.messages[: users[-1]] if isinstance(m.data.get("content"), list)
               and any(p.get("type") == "thinking" for p in m.data["content"] if isinstance(p, dict))]
    assert not earlier
    assert report["after"]["tokens"] <= 8000


def test_a_finished_turns_thinking_goes_after_a_change_whatever_the_model(tmp_path: Path) -> None:
    """The session ends with the agent's reply: the next request opens a new turn, where an older
    model has discarded this thinking and a newer one would refuse it, so it goes too."""
    path = session(tmp_path)
    lines = path.read_text().splitlines()
    lines.append(json.dumps({"role": "assistant", "content": [thinking(4), {"type": "text", "text": "Fixed: add() adds."}]}))
    path.write_text("\n".join(lines) + "\n")
    budget = total_tokens(path) - 20
    result, _ = invoke_with_report(str(path), "--max-tokens", str(budget), "--check-for", "anthropic",
                                        tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert thoughts(result.stdout) == []
    assert "Fixed: add() adds." in result.stdout and "pytest -q" in result.stdout


def test_a_repair_alone_is_a_change_the_thinking_after_it_cannot_survive(tmp_path: Path) -> None:
    """Under the budget nothing is compacted, but --repair drops an unanswered call: every thinking
    block after it is bound to a conversation that no longer exists."""
    path = session(tmp_path)
    lines = path.read_text().splitlines()
    orphan = {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                               {"type": "tool_use", "id": "toolu_0", "name": "Glob", "input": {"pattern": "*"}}]}
    lines[2:2] = [json.dumps(orphan), json.dumps({"role": "user", "content": "go on"})]
    path.write_text("\n".join(lines) + "\n")
    result, report = invoke_with_report(str(path), "--max-tokens", str(total_tokens(path) + 100), "--repair",
                                        "--model", "claude-opus-5-5", tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert [a["strategy"] for a in report["actions"]] == ["repair", "thinking_after_change"]
    assert thoughts(result.stdout) == []


def test_the_graph_rendered_in_is_a_change_the_thinking_after_it_cannot_survive(tmp_path: Path) -> None:
    """--graph puts its message after the system message: for a model that checks, every thinking block
    after it is bound to a conversation without it, even when nothing had to be compacted."""
    path = session(tmp_path)
    graph = Path(__file__).parent / "fixtures" / "graph" / "warnings.json"
    result, report = invoke_with_report(str(path), "--max-tokens", str(total_tokens(path) + 100), "--graph", str(graph),
                                        "--model", "claude-opus-5-5", tmp_path=tmp_path)
    assert result.exit_code == 0, result.output
    assert "CUCA graph memory" in result.stdout
    assert thoughts(result.stdout) == []
    assert [a["strategy"] for a in report["actions"]] == ["thinking_after_change"]


@pytest.mark.parametrize(("recorded", "kept"), [("claude-opus-4-5-20251101", True), ("claude-opus-5-5", False)])
def test_a_claude_code_session_says_which_model_it_runs_on(recorded: str, kept: bool, realdata: Path,
                                                           tmp_path: Path) -> None:
    """Without --model, the model the session records for its newest reply decides the current
    turn's thinking: the real cctrace session, cut inside a tool-use loop, runs on Opus 4.5 (it
    keeps its loop's thinking); the same session recorded as Opus 5.5 loses it."""
    lines = (realdata / CLAUDE_CODE).read_text().splitlines()[:202]  # line 202: a tool result
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_text("\n".join(line.replace("claude-opus-4-5-20251101", recorded) for line in lines) + "\n")
    out = tmp_path / "out.jsonl"
    invoke_with_report(str(prefix), "--max-tokens", "20000", "--repair", "-o", str(out), tmp_path=tmp_path)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    users = [i for i, e in enumerate(written) if e.get("type") == "user" and isinstance(e["message"]["content"], str)]
    thinking = [i for i, e in enumerate(written) if e.get("type") == "assistant"
                and any(b.get("type") == "thinking" for b in e["message"]["content"] if isinstance(b, dict))]
    assert all(i > users[-1] for i in thinking)  # never an earlier turn's
    assert bool(thinking) == kept
