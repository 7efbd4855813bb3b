"""--dry-run, --check-for, the prompt-cache figure, and what reaches stdout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import invoke, msg, read_messages, write_messages


def test_dry_run_writes_nothing_and_predicts_the_real_run(samples: Path, tmp_path: Path) -> None:
    source = samples / "agent_session.jsonl"
    target = tmp_path / "out.jsonl"
    dry_report, real_report = tmp_path / "dry.json", tmp_path / "real.json"
    dry = invoke(str(source), "--max-tokens", "8000", "--dry-run", "-o", str(target), "--report", str(dry_report))
    assert dry.exit_code == 0, dry.output
    assert not target.exists()
    assert dry.stdout.startswith(f"dry run: {source} — nothing written\n")
    # (the span's newest exchange may stay partly, its long texts cut: a rewrite beside the removal)
    assert re.search(r"^summarize \(pass 1\): would remove \d+ message\(s\) \(line\(s\) 3-\d+(, \d+-\d+)*\); "
                     r"(would rewrite \d+ message\(s\) \(line\(s\) [^)]*\); )?would add 1 message\(s\); saves ", dry.stdout, re.MULTILINE)
    real = invoke(str(source), "--max-tokens", "8000", "-o", str(target), "--report", str(real_report))
    assert real.exit_code == 0
    predicted, actual = json.loads(dry_report.read_text()), json.loads(real_report.read_text())
    after = actual["after"]
    assert dry.stdout.rstrip().endswith(
        f"the budget (under 8,000 tokens) would be met: {after['messages']} messages, {after['tokens']:,} tokens")
    assert predicted["actions"] == actual["actions"]
    assert predicted["removed"] == actual["removed"]
    assert predicted["after"] == actual["after"]


def test_dry_run_with_a_store_leaves_the_store_untouched(samples: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    dry = invoke(str(samples / "seed_example.jsonl"), "--max-messages", "4", "--store", str(store), "--dry-run",
                 "--strategy", "offload:turns=2", "--preset", "seed")
    # (two placeholders would not fit beside the pinned two: one stands for both turns)
    assert "offload (pass 1): would remove 4 message(s) (line(s) 2-5); would add 1 message(s)" in dry.stdout
    assert not store.exists()


@pytest.mark.parametrize("extra", [(), ("--summarizer", "none")])
def test_dry_run_with_a_store_predicts_the_real_run(extra: tuple[str, ...], realdata: Path, tmp_path: Path) -> None:
    # The summary (or the removal trace) tells the reader `compact recall WORDS --store PATH`: a dry run
    # must print the store the user gave, not its throwaway copy, or its figures are not the real run's.
    source = realdata / "openai-chat/tau-bench-airline-task3.jsonl"
    store, dry_report, real_report = tmp_path / "offload.sqlite", tmp_path / "dry.json", tmp_path / "real.json"
    common = (str(source), "--max-tokens", "2000", "--store", str(store), *extra)
    dry = invoke(*common, "--dry-run", "--report", str(dry_report))
    assert dry.exit_code == 0, dry.output
    assert not store.exists()
    real = invoke(*common, "-o", str(tmp_path / "out.jsonl"), "--report", str(real_report))
    assert real.exit_code == 0, real.output
    assert f"--store {store}" in (tmp_path / "out.jsonl").read_text()
    predicted, actual = json.loads(dry_report.read_text()), json.loads(real_report.read_text())
    assert predicted["actions"] == actual["actions"]
    assert predicted["after"] == actual["after"]
    assert predicted["removed"] == actual["removed"]


def test_check_for_refuses_to_write_a_transcript_the_provider_would_reject(tmp_path: Path) -> None:
    # Anthropic wants a user message first; OpenAI chat does not. An Anthropic file that opens with the
    # assistant is written back as it is (--to anthropic would add a user note first). The problem names
    # the result's line, and --repair is not offered: it would not fix this.
    source = tmp_path / "in.jsonl"
    source.write_text('{"system": "s"}\n{"role": "assistant", "content": "a"}\n{"role": "user", "content": "last"}\n')
    target = tmp_path / "out.jsonl"
    result = invoke(str(source), "--unlimited", "--check-for", "anthropic", "-o", str(target))
    assert result.exit_code == 1
    assert "compact: line 2 of the result: the first message is assistant, not user" in result.stderr
    assert "would be rejected by anthropic" in result.stderr and "--repair" not in result.stderr
    assert not target.exists()
    ok = invoke(str(source), "--unlimited", "--check-for", "openai", "-o", str(target))
    assert ok.exit_code == 0 and target.exists()


def test_prompt_cache_figure_names_the_first_change(tmp_path: Path) -> None:
    messages = [msg("system", "s"), msg("user", "u1 " * 200), msg("assistant", "a1 " * 200), msg("user", "u2"),
                msg("assistant", "a2"), msg("user", "last")]
    source = write_messages(tmp_path / "in.jsonl", messages)
    report = tmp_path / "r.json"
    invoke(str(source), "--max-messages", "4", "--strategy", "sliding_window:keep_messages=4", "--preset", "seed",
           "--report", str(report))
    cache = json.loads(report.read_text())["prompt_cache"]
    # Lines 2 and 3 go: the system prompt (line 1) is the prefix that survives.
    assert cache["prefix_messages"] == 1 and cache["first_changed_line"] == 2
    assert cache["tokens_to_rewrite"] > 0
    unchanged = invoke(str(source), "--unlimited", "--warn-fraction", "0.0001", "--report", str(report))
    cache = json.loads(report.read_text())["prompt_cache"]
    assert cache["prefix_messages"] == 6 and cache["first_changed_line"] is None  # only the warning was appended
    assert len(read_messages(unchanged.stdout)) == 7


def test_quiet_and_piping_keep_stderr_and_stdout_clean(samples: Path) -> None:
    result = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "8000", "--quiet", "--table")
    assert result.stderr == ""
    assert all(line.startswith("{") for line in result.stdout.splitlines())


_PLAN_ROW = re.compile(r"^(\w+) \(pass (\d+)\): (.*); saves (-?[\d,]+) tokens: (.*)$")


def _counted(what: str, verb: str) -> int:
    found = re.search(rf"would {verb} (\d+) message\(s\)", what)
    return int(found.group(1)) if found else 0


def test_dry_run_rows_say_what_the_real_runs_table_says(realdata: Path, tmp_path: Path) -> None:
    """On the Rust-port session at 8,000 tokens give_back puts 8 cleared results back: the table
    said "rewritten 8", the dry run "no change; saves -70 tokens" (and listed 11 of the 19
    results clear_tool_results rewrote). Each dry-run row now gives the table's figures."""
    source = realdata / "claude-code/claude-reliability-python-to-rust-port.jsonl"
    report = tmp_path / "real.json"
    real = invoke(str(source), "--max-tokens", "8000", "-o", str(tmp_path / "out.jsonl"), "--report", str(report))
    assert real.exit_code == 0, real.output
    dry = invoke(str(source), "--max-tokens", "8000", "--dry-run")
    assert dry.exit_code == 0, dry.output
    rows = [_PLAN_ROW.match(line) for line in dry.stdout.splitlines()[1:-1]]
    assert all(rows), dry.stdout
    said = [(m[1], int(m[2]), _counted(m[3], "remove"), _counted(m[3], "rewrite"), int(m[4].replace(",", "")), m[5])
            for m in rows if m is not None]
    table = [(a["strategy"], a["pass"], a["messages_removed"], a["messages_changed"], a["tokens_saved"], a["detail"])
             for a in json.loads(report.read_text())["actions"]]
    assert said == table
    give_back = next(line for line in dry.stdout.splitlines() if line.startswith("give_back"))
    assert "no change" not in give_back
    changed = next(a["messages_changed"] for a in json.loads(report.read_text())["actions"] if a["strategy"] == "give_back")
    assert changed >= 1
    assert re.search(rf"would rewrite {changed} message\(s\) .*: gave back rewritten messages \(line\(s\) \d", give_back)
