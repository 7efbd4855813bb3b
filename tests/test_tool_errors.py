"""A failed tool call stays failed: its error flag survives compaction and conversion.

A model reads "this call failed" from the flag as well as from the text (Anthropic's
``is_error``, pi's ``isError``, Gemini CLI's ``status``); a conversion that turned a failure
into a success would mislead the next turn. Targets with no field for the flag say so in the
report instead of dropping it silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import formats
from tests.helpers import invoke

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
# Each fixture holds exactly one failed tool result.
SOURCES = ["anthropic_all_blocks.jsonl", "claude_code_session.jsonl", "pi_no_compaction.jsonl", "gemini_chat.json",
           "gemini_stream.jsonl"]
CARRY = ["anthropic", "claude-code", "pi", "gemini-chat", "gemini-stream"]
NO_FIELD = ["openai", "responses", "codex", "sharegpt"]
LOSS = "tool results marked as failed (the format has no field for it; the error text is kept)"


def failed_results(path: Path) -> list[str]:
    """The ids of the tool calls whose results the file marks as failed, read back by compact."""
    decoded = formats.read(str(path))
    return [str(m.data.get("tool_call_id")) for m in decoded.messages if m.role == "tool" and m.extra.get("failed")]


@pytest.mark.parametrize("source", SOURCES)
def test_each_format_reads_its_failed_result(source: str) -> None:
    assert len(failed_results(FIXTURES / source)) == 1


@pytest.mark.parametrize("target", CARRY)
@pytest.mark.parametrize("source", SOURCES)
def test_a_failed_result_stays_failed_in_every_format_with_a_field_for_it(source: str, target: str,
                                                                        tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    outcome = invoke(str(FIXTURES / source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report))
    assert outcome.exit_code == 0, outcome.output
    assert len(failed_results(out)) == 1
    losses = [loss["what"] for loss in json.loads(report.read_text())["format"]["losses"]]
    assert LOSS not in losses


def test_the_native_fields_say_failed(tmp_path: Path) -> None:
    source = str(FIXTURES / "anthropic_all_blocks.jsonl")
    written = {}
    for target in ("anthropic", "pi", "gemini-stream", "gemini-chat"):
        out = tmp_path / target
        assert invoke(source, "--unlimited", "--to", target, "-o", str(out)).exit_code == 0
        written[target] = out.read_text()
    anthropic = [json.loads(line) for line in written["anthropic"].splitlines()]
    flags = [b.get("is_error") for m in anthropic if isinstance(m.get("content"), list)
             for b in m["content"] if b.get("type") == "tool_result"]
    assert flags == [None, True, None]  # a success carries no flag, as the API writes it
    pi = [json.loads(line)["message"] for line in written["pi"].splitlines() if '"toolResult"' in line]
    assert [m["isError"] for m in pi] == [False, True, False]
    stream = [json.loads(line) for line in written["gemini-stream"].splitlines()]
    results = [e for e in stream if e["type"] == "tool_result"]
    assert [e["status"] for e in results] == ["success", "error", "success"]
    assert results[1]["error"]["message"].startswith("1 failed: test_add") and "output" not in results[1]
    chat = json.loads(written["gemini-chat"])
    calls = [c for m in chat["messages"] for c in m.get("toolCalls", [])]
    assert [c["status"] for c in calls] == ["success", "error", "success"]
    assert "error" in calls[1]["result"][0]["functionResponse"]["response"]


@pytest.mark.parametrize("target", NO_FIELD)
def test_a_format_without_the_field_reports_the_flag_as_a_loss(target: str, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    outcome = invoke(str(FIXTURES / "anthropic_all_blocks.jsonl"), "--unlimited", "--to", target, "-o", str(out),
                     "--report", str(report))
    assert outcome.exit_code == 0, outcome.output
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(LOSS) == 1
    assert "1 failed: test_add" in out.read_text()


def test_a_compacted_failed_result_keeps_its_flag_in_its_own_format(tmp_path: Path) -> None:
    # A rewrite (the result cleared to a placeholder) keeps the block's is_error.
    source = FIXTURES / "claude_code_session.jsonl"
    failed = failed_results(source)
    out = tmp_path / "out.jsonl"
    assert invoke(str(source), "-s", "clear_tool_results:keep_pairs=0", "--unlimited", "-o", str(out)).exit_code == 0
    assert failed_results(out) == failed
