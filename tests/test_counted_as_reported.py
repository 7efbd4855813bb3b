"""What the report says a run wrote is what the written file holds, in every format.

The report counts the compacted messages; a writer that drops, repeats or
rewrites text on its way to the file (a clamped reply written twice) breaks
the budget while the report says it was met. Each input is compacted in its
own format, and the file written is read back and counted as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REALDATA, ROOT
from tests.helpers import invoke

BUDGETS = (300, 3000)


def inputs() -> list[Path]:
    files = sorted((ROOT / "sample_transcripts").glob("*.jsonl")) + sorted((ROOT / "tests/fixtures/formats").glob("*.json*"))
    if REALDATA.is_dir():
        files += sorted(p for p in REALDATA.rglob("*") if p.suffix in (".jsonl", ".json"))
    return files


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("path", inputs(), ids=lambda p: p.name)
def test_the_written_file_counts_what_the_report_says(path: Path, budget: int, tmp_path: Path) -> None:
    out, report_path = tmp_path / f"out{path.suffix}", tmp_path / "report.json"
    run = invoke(str(path), "--max-tokens", str(budget), "--no-cache", "-o", str(out), "--report", str(report_path))
    assert run.exit_code == 0, run.output
    report = json.loads(report_path.read_text())
    fmt = report["format"]["output"] if report.get("kind") != "dataset" else "dataset"  # (a budget per conversation)
    counted = invoke("count", str(out), "--from", fmt, "--format", "json", "--no-cache")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["before"]["tokens"] == report["after"]["tokens"]
    if fmt != "dataset" and not report["over_budget"]:
        assert report["after"]["tokens"] <= budget
