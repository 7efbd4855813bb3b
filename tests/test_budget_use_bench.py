"""bench/budget_use.py: every budget from 10% to 95% of a transcript, and which runs fall short."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "budget_use.py"


def test_the_sample_session_fills_every_budget_it_must_lose_something_for(
    tmp_path: Path, samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("budget_use_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["budget_use_bench"] = module
    spec.loader.exec_module(module)
    realdata = tmp_path / "realdata"
    realdata.mkdir()
    shutil.copy(samples / "agent_session.jsonl", realdata)
    assert module.main(["--realdata", str(realdata), "--tau", "0", "--no-bundled", "--json", str(tmp_path / "rows.json")]) == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["budget"] for r in rows] == [int(rows[0]["size"] * f) for f in module.FRACTIONS]
    assert all(r["after"] <= r["budget"] for r in rows)
    # The 121k-token session: every budget is over 1,000 tokens and over its pinned floor.
    assert all(0.95 <= r["use"] for r in rows if r["must_lose"])
    # (at the 6 largest budgets, dropping stale reads is enough: nothing a model reads is lost)
    assert "18 runs; 12 must lose something a model reads; 0 of them end under 95%" in capsys.readouterr().out
