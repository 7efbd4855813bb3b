"""Regressions found in review: files that are not plain files, staged writes, clamp edge cases."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from core.counting.tokenizers import bpe_available
from tests.helpers import invoke, msg, read_messages, write_messages


@pytest.mark.skipif(not bpe_available(), reason="the [fast] extra is not installed")
def test_clamp_cuts_inside_multibyte_text_with_the_bpe_backend(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.jsonl", [msg("system", "s"), msg("user", "héllo 🎉 " * 2000),
                                                    msg("assistant", "ok"), msg("user", "last")])
    report = tmp_path / "r.json"
    invoke(str(source), "--full", "--backend", "bpe", "--strategy", "clamp_oversized_messages:max_part_tokens=100",
           "--preset", "seed", "--report", str(report))
    data = json.loads(report.read_text())
    assert data["last_error"] is None
    assert [e["line"] for e in data["removed"]] == [2]


def test_clamp_with_a_limit_below_its_marker_changes_nothing_and_settles(samples: Path, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "10", "--strategy",
           "clamp_oversized_messages:max_part_tokens=16", "--preset", "seed", "--report", str(report))
    data = json.loads(report.read_text())
    assert all(e["tokens_after"] < e["tokens_before"] for e in data["removed"])
    assert data["passes"] == 1 or all(a["pass"] == 1 for a in data["actions"])


def test_strategy_flags_get_the_schema_checks_of_config_files(samples: Path) -> None:
    result = invoke(str(samples / "short_chat.jsonl"), "--strategy", "clear_tool_results:keep_pairs=-1")
    assert result.exit_code == 2
    assert "strategy clear_tool_results: keep_pairs: -1 is less than the minimum of 0" in result.stderr


def test_max_fraction_zero_is_refused(samples: Path) -> None:
    result = invoke(str(samples / "short_chat.jsonl"), "--max-fraction", "0")
    assert result.exit_code == 2 and "max_fraction must be above 0" in result.stderr


def test_a_pipe_is_read_once(samples: Path) -> None:
    data = (samples / "seed_example.jsonl").read_bytes()
    process = subprocess.run(["compact", "/dev/stdin", "--max-messages", "6"], input=data, capture_output=True,
                             check=False)
    assert process.returncode == 0, process.stderr
    assert len(process.stdout.splitlines()) == 6


def test_in_place_writes_through_a_symlink(samples: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_bytes((samples / "seed_example.jsonl").read_bytes())
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    result = invoke(str(link), "--max-messages", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert len(read_messages(real.read_text())) == 4
    assert (tmp_path / "real.jsonl.bak").read_bytes() == (samples / "seed_example.jsonl").read_bytes()


def test_report_or_output_naming_the_input_is_refused(samples: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes((samples / "seed_example.jsonl").read_bytes())
    for flag in ("--report", "-o"):
        result = invoke(str(source), "--max-messages", "4", flag, str(source))
        assert result.exit_code == 2 and "names the input file" in result.stderr
    assert source.read_bytes() == (samples / "seed_example.jsonl").read_bytes()


def test_new_files_follow_the_umask(samples: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        invoke(str(samples / "seed_example.jsonl"), "--max-messages", "4", "-o", str(tmp_path / "o.jsonl"),
               "--report", str(tmp_path / "r.json"))
    finally:
        os.umask(old)
    for name in ("o.jsonl", "r.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


def test_a_failed_write_leaves_no_report_and_no_traceback(samples: Path, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    result = invoke(str(samples / "seed_example.jsonl"), "--max-messages", "4", "--report", str(report),
                    "-o", str(tmp_path / "missing" / "x.jsonl"))
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and "cannot write" in result.stderr
    assert not report.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    into_folder = invoke(str(samples / "seed_example.jsonl"), "--max-messages", "4", "-o", str(tmp_path / "o.jsonl"),
                         "--report", str(tmp_path))
    assert into_folder.exit_code == 2 and "Traceback" not in into_folder.output
    assert not (tmp_path / "o.jsonl").exists()


def test_without_a_system_prompt_summaries_fold_into_one(tmp_path: Path) -> None:
    messages = []
    for turn in range(8):
        messages += [msg("user", f"question {turn} " * 40), msg("assistant", f"answer {turn} " * 40)]
    source = write_messages(tmp_path / "nosys.jsonl", messages)
    result = invoke(str(source), "--summarizer", "extractive", "--strategy", "summarize:turns=3",
                    "--max-tokens", "400")
    out = read_messages(result.stdout)
    assert sum(m["content"].startswith("CUCA summary:") for m in out) == 1
