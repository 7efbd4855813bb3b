"""Defects a reviewer reproduced on the CLI: each test runs the command the review ran."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import invoke

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_transcripts"


# -- a batch report inside the --out folder the batch creates ---------------------------


def test_a_batch_report_inside_the_out_folder_it_creates_is_written(realdata: Path, tmp_path: Path) -> None:
    """`--out NEW --report NEW/batch.json` was refused: NEW does not exist yet, though batch creates it."""
    out = tmp_path / "no"
    result = invoke("batch", str(realdata / "gemini-cli"), "--out", str(out), "--report", str(out / "batch.json"),
                    "--jobs", "1", "-q")
    assert result.exit_code == 0, result.output
    document = json.loads((out / "batch.json").read_text())
    assert document["totals"]["inputs"] == 5


def test_a_batch_report_in_a_new_subfolder_of_out_is_written_even_on_a_dry_run(tmp_path: Path) -> None:
    """A dry run creates no output, so the folder the report names is made for the report itself."""
    out = tmp_path / "out"
    report = out / "reports" / "batch.json"
    result = invoke("batch", str(SAMPLES / "short_chat.jsonl"), "--out", str(out), "--report", str(report),
                    "--jobs", "1", "--dry-run", "-q")
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["totals"]["inputs"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["reports"]  # no output beside it


def test_a_batch_report_in_a_missing_folder_outside_out_is_still_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("batch", str(SAMPLES / "short_chat.jsonl"), "--out", str(out), "--report",
                    str(tmp_path / "elsewhere" / "batch.json"), "--jobs", "1", "-q")
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.stderr and not out.exists()
