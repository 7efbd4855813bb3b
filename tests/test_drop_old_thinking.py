"""drop_old_thinking: earlier turns' thinking goes first, oldest first; the current turn's stays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def test_the_oldest_thinking_goes_first_and_only_as_much_as_the_budget_needs(tmp_path: Path) -> None:
    path = session(tmp_path)
    budget = total_tokens(path) - 20  # less than one thinking block over
    result, report = invoke_with_report(str(path), "--max-tokens", str(budget), tmp_path=tmp_path)
    assert thoughts(result.stdout) == ["sig-2", "sig-3"]
    assert [a["strategy"] for a in report["actions"]] == ["drop_old_thinking"]
    assert "Reading it." in result.stdout and "add() subtracts" in result.stdout  # nothing a model reads is lost
    assert report["after"]["tokens"] <= budget


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
