"""Golden files for the report and the table (fixed width, no colour)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from cli.render import usage_table
from core.io.schema_loader import validator
from tests.conftest import ROOT
from tests.helpers import invoke

CASES = {
    "seed": ["sample_transcripts/seed_example.jsonl", "--max-messages", "6", "--context-window", "256",
             "--warn-fraction", "0.2", "--strategy", "sliding_window:keep_messages=4", "--preset", "seed"],
    "agent": ["sample_transcripts/agent_session.jsonl", "--max-tokens", "8000"],
    "floor": ["sample_transcripts/agent_session.jsonl", "--max-tokens", "100"],
    "orphans": ["sample_transcripts/errors/orphan_result.jsonl", "--unlimited"],
}


def render(report: dict) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=100, no_color=True, color_system=None, force_terminal=False)
    console.print(usage_table(report, compacted=report["mode"] != "unlimited"))
    return buffer.getvalue()


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_and_table_match_their_golden_files(case: str, golden, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    report_path = tmp_path / "report.json"
    result = invoke(*CASES[case], "--report", str(report_path), "--backend", "tiktoken")
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    validator("report").validate(report)
    golden(f"{case}.report.json", json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    golden(f"{case}.table.txt", render(report))
