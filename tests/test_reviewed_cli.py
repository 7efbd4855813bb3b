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


# -- a tool: keep rule in a batch: per input it may pin nothing -------------------------


def test_a_batch_tool_rule_that_some_inputs_lack_does_not_fail_them(realdata: Path, tmp_path: Path) -> None:
    """Two of the four Claude Code sessions call TodoWrite: the other two failed ("pins nothing"), exit 1."""
    out = tmp_path / "b"
    result = invoke("batch", str(realdata / "claude-code"), "-k", "tool:TodoWrite", "--out", str(out), "--jobs", "1",
                    "--no-table", "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert result.stderr == "compact: warning: keep rule 'tool:TodoWrite' pinned nothing in 2 of 4 inputs (the report's rows say which)\n"
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert sorted(len(row["unpinned_rules"]) for row in rows) == [0, 0, 1, 1]
    assert len(list(out.glob("*.jsonl"))) == 4
    quiet = invoke("batch", str(realdata / "claude-code"), "-k", "tool:TodoWrite", "--out", str(out), "--jobs", "1", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output  # up to date: the rows remember, -q says nothing


def test_a_batch_tool_rule_that_pins_nothing_in_every_input_is_an_error(realdata: Path, tmp_path: Path) -> None:
    result = invoke("batch", str(realdata / "claude-code"), "-k", "tool:bash", "--out", str(tmp_path / "b"),
                    "--jobs", "1", "-q")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("compact: error: keep rule 'tool:bash' pins nothing in any of the 4 inputs"), result.stderr
    assert "did you mean tool:Bash?" in result.stderr and len(result.stderr.splitlines()) == 1


# -- a tool: keep rule on a conversation-per-line dataset --------------------------------


def test_a_tool_rule_that_pins_nothing_in_any_conversation_of_a_dataset_is_an_error(
        realdata: Path, tmp_path: Path) -> None:
    for dataset, rule in ((realdata / "sharegpt" / "glaive_toolcall_en_demo.json", "tool:zzz"),
                          (realdata / "openai-chat" / "tau-bench-airline-trajectories.jsonl", "tool:foo")):
        target = tmp_path / "g.json"
        result = invoke(str(dataset), "-k", rule, "--max-tokens", "100", "-o", str(target), "-q")
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"compact: error: {dataset}: keep rule {rule!r} pins nothing in any of the "), \
            result.stderr
        assert "the dataset's tools: " in result.stderr and len(result.stderr.splitlines()) == 1
        assert not target.exists()


def test_a_tool_rule_that_pins_in_one_conversation_of_a_dataset_runs(realdata: Path, tmp_path: Path) -> None:
    dataset = realdata / "openai-chat" / "tau-bench-airline-trajectories.jsonl"
    result = invoke(str(dataset), "-k", "tool:list_all_airports", "--max-tokens", "100",
                    "-o", str(tmp_path / "t.jsonl"), "-q")
    assert result.exit_code == 0, result.output


# -- -q silences the warning lines (errors still print) ----------------------------------


def test_quiet_silences_the_unknown_model_and_missing_key_warnings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    warned = ("--model", "gpt4o", "--summarizer", "openai", "--api-key-env", "NO_SUCH_KEY_VAR",
              "--summarizer-url", "http://127.0.0.1:9/v1", "--summarizer-model", "m")  # (no request: within budget)
    loud = invoke(str(SAMPLES / "short_chat.jsonl"), *warned, "-o", str(tmp_path / "a.jsonl"))
    assert loud.exit_code == 0, loud.output
    assert "unknown model 'gpt4o'" in loud.stderr and "$NO_SUCH_KEY_VAR is not set" in loud.stderr
    quiet = invoke(str(SAMPLES / "short_chat.jsonl"), *warned, "-q", "-o", str(tmp_path / "q.jsonl"))
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output
    assert (tmp_path / "q.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    batch = invoke("batch", str(SAMPLES / "short_chat.jsonl"), *warned, "--out", str(tmp_path / "b"), "--jobs", "1",
                   "-q")
    assert batch.exit_code == 0 and batch.stderr == "", batch.output


def test_quiet_still_prints_errors(tmp_path: Path) -> None:
    result = invoke(str(SAMPLES / "short_chat.jsonl"), "--model", "gpt4o", "-k", "tool:read_file", "-q",
                    "-o", str(tmp_path / "q.jsonl"))
    assert result.exit_code == 2
    assert result.stderr.startswith("compact: error: ") and len(result.stderr.splitlines()) == 1, result.stderr


# -- an orphan --repair kept because it is pinned -----------------------------------------


def test_a_pinned_orphan_under_repair_is_said_to_be_kept_by_repair(tmp_path: Path) -> None:
    """--repair was given and line 3 pinned: the warning told the user to run --repair."""
    orphan = SAMPLES / "errors" / "orphan_call.jsonl"
    result = invoke(str(orphan), "--repair", "-k", "line:3", "-o", str(tmp_path / "e.jsonl"))
    assert result.exit_code == 0, result.output
    assert result.stderr == ("compact: warning: 1 tool call(s) without a result kept "
                             "(line 3, pinned, so --repair kept them)\n")
    table = invoke(str(orphan), "--repair", "-k", "line:3", "--table", "-o", str(tmp_path / "e.jsonl"))
    assert "pinned, so --repair kept them" in table.stderr and "--repair drops them" not in table.stderr
    plain = invoke(str(orphan), "-k", "line:3", "-o", str(tmp_path / "e.jsonl"))
    assert plain.stderr.endswith("(line 3, --repair drops them)\n"), plain.stderr


# -- a conversion that would write no message ---------------------------------------------


def test_a_conversion_that_would_write_no_message_is_refused(realdata: Path, tmp_path: Path) -> None:
    """A Codex session whose only messages are user and system ones, --to codex-exec (which prints
    none): exit 0 and a file compact itself could not read back."""
    session = realdata / "codex-cli" / "simonw-codex-homelab-session-head.jsonl"
    target = tmp_path / "x.jsonl"
    result = invoke(str(session), "--to", "codex-exec", "-o", str(target))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"compact: error: {session}: --to codex-exec would write no message"), result.stderr
    assert "user and system messages" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not target.exists()
    kept = invoke(str(session), "--to", "openai", "-o", str(target))
    assert kept.exit_code == 0, kept.output
    assert invoke(str(target), "-o", str(tmp_path / "again.jsonl")).exit_code == 0
