"""Where a new user met silence (issue 29, items 3, 5, 6): a rule that pins nothing, an output
compact cannot write found only after stdout was written, a missed budget nobody hears about."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import invoke

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_transcripts"
SESSION = SAMPLES / "agent_session.jsonl"  # its tool is read_file


def _cctrace(realdata: Path) -> Path:
    return realdata / "claude-code" / "cctrace-phase0-investigation.jsonl"  # its tools: Bash, Edit, Read, ...


# -- item 6: a tool: rule that pins nothing -------------------------------------------


@pytest.mark.parametrize(("rule", "says"), [
    ("tool:bash", "keep rule 'tool:bash' pins nothing: no tool call is named 'bash' (did you mean tool:Bash?"),
    ("tool:Nope", "keep rule 'tool:Nope' pins nothing: no tool call is named 'Nope' (the transcript's tools:"),
])
def test_a_tool_rule_that_pins_nothing_is_an_error_naming_the_tools(
        rule: str, says: str, realdata: Path, tmp_path: Path) -> None:
    session = _cctrace(realdata)
    result = invoke(str(session), "--max-tokens", "8000", "-k", rule, "--store", str(tmp_path / "s.sqlite"),
                    "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [result.stderr.rstrip("\n")]  # one line
    assert result.stderr.startswith(f"compact: error: {session}: {says}"), result.stderr
    assert "Bash, Edit, Read" in result.stderr  # the tools it has, most called first
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


def test_a_tool_rule_on_a_transcript_without_tool_calls_says_so(tmp_path: Path) -> None:
    result = invoke(str(SAMPLES / "short_chat.jsonl"), "--max-tokens", "8000", "-k", "tool:read_file",
                    "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2, result.output
    assert "keep rule 'tool:read_file' pins nothing: the transcript has no tool calls" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_tool_rule_that_pins_a_call_still_runs(tmp_path: Path) -> None:
    result = invoke(str(SESSION), "--max-tokens", "8000", "-k", "tool:read_file", "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
