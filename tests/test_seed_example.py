"""The seed's own example (memory-plugin.txt, "Example"), end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import invoke, read_messages

SEED_ARGS = (
    "--max-messages", "6", "--context-window", "256", "--warn-fraction", "0.2",
    "--strategy", "sliding_window:keep_messages=4", "--preset", "seed",
)


def shape(messages: list[dict]) -> str:
    return "".join(m["role"][0].upper() for m in messages)


def test_seed_example_keeps_saus_and_appends_the_warning_once(samples: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    result = invoke(str(samples / "seed_example.jsonl"), *SEED_ARGS, "--report", str(report_path))
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    assert shape(out) == "SAUS"
    assert out[0]["content"] == "You are a helpful assistant."
    assert out[2]["content"] == "Where is the vault? Answer in one word."
    assert out[3]["content"].startswith("CUCA context warning:")
    report = json.loads(report_path.read_text())
    assert report["warning_appended"] is True
    assert report["before"]["messages"] == 8
    assert report["after"]["messages"] == 4
    assert report["triggered"] is True and report["over_budget"] is False
    assert [e["line"] for e in report["removed"]] == [2, 3, 4, 5, 6]


def test_seed_example_warning_is_one_shot(samples: Path, tmp_path: Path) -> None:
    first = invoke(str(samples / "seed_example.jsonl"), *SEED_ARGS)
    again_in = tmp_path / "again.jsonl"
    again_in.write_text(first.stdout)
    second = invoke(str(again_in), *SEED_ARGS)
    out = read_messages(second.stdout)
    assert sum(m["content"].startswith("CUCA context warning:") for m in out) == 1
    assert second.stdout == first.stdout


def test_the_default_preset_keeps_the_task_and_opens_at_a_turn(samples: Path) -> None:
    """Without the seed preset, the same run keeps the task statement and a user-first window."""
    args = [a for a in SEED_ARGS if a not in ("--preset", "seed")]
    result = invoke(str(samples / "seed_example.jsonl"), *args)
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    assert out[1]["content"].startswith("The vault is in Lisbon")  # the task statement stays pinned
    assert out[1]["role"] == "user"
    assert "Where is the vault? Answer in one word." in [m["content"] for m in out]
