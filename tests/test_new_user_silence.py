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


# -- item 3: an output compact cannot write is refused before anything is written ------


def _unusable(tmp_path: Path, kind: str) -> Path:
    """A path no report can be written to: a folder, a path in a missing folder, a path under a file."""
    if kind == "a folder":
        (tmp_path / "reports").mkdir()
        return tmp_path / "reports"
    if kind == "a missing folder":
        return tmp_path / "missing" / "r.json"
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "r.json"


@pytest.mark.parametrize("kind", ["a folder", "a missing folder", "under a file"])
def test_a_report_compact_cannot_write_fails_before_the_transcript_reaches_stdout(kind: str, tmp_path: Path) -> None:
    """`--report DIR` wrote the whole transcript to stdout, then failed (exit 2): the README promises
    a failed run writes nothing."""
    target = _unusable(tmp_path, kind)
    result = invoke(str(SESSION), "--max-tokens", "3000", "--report", str(target))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"compact: error: {target}: cannot write: "), result.stderr
    assert "--report" in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_report_into_a_folder_leaves_the_other_outputs_unwritten(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(SESSION.read_bytes())
    target = _unusable(tmp_path, "a folder")
    for outputs in (["-o", str(tmp_path / "out.jsonl")], ["--in-place"]):
        result = invoke(str(source), "--max-tokens", "3000", "--report", str(target), "--store",
                        str(tmp_path / "s.sqlite"), *outputs)
        assert result.exit_code == 2, result.output
        assert "names a folder" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "reports"]  # no output, store nor backup
    assert source.read_bytes() == SESSION.read_bytes()


def test_an_output_in_a_missing_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    """Refused up front, not after the compaction's work: the store it names is not created either."""
    target = tmp_path / "missing" / "out.jsonl"
    result = invoke(str(SESSION), "--max-tokens", "3000", "-o", str(target), "--store", str(tmp_path / "s.sqlite"))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"compact: error: {target}: cannot write: "), result.stderr
    assert "the folder" in result.stderr and "does not exist" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_dry_run_report_into_a_folder_prints_no_plan(tmp_path: Path) -> None:
    target = _unusable(tmp_path, "a folder")
    result = invoke(str(SESSION), "--max-tokens", "3000", "--dry-run", "--report", str(target))
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert "names a folder" in result.stderr


def test_a_batch_report_into_a_folder_fails_before_any_input_is_compacted(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "short.jsonl").write_bytes((SAMPLES / "short_chat.jsonl").read_bytes())
    target = _unusable(tmp_path, "a folder")
    result = invoke("batch", str(folder), "--out", str(tmp_path / "out"), "--max-tokens", "3000", "--jobs", "1",
                    "--report", str(target))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"compact: error: {target}: cannot write: "), result.stderr
    assert not (tmp_path / "out").exists()


# -- item 5: one warning line on stderr when the run falls short, whatever the terminal ---


def _warning(result: object) -> str:
    """The run's one warning line (CliRunner's stderr is no terminal: no table is drawn)."""
    lines = result.stderr.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("compact: warning: "), lines
    return lines[0]


def test_a_missed_budget_is_one_warning_line_off_a_terminal(realdata: Path, tmp_path: Path) -> None:
    """`-k tool:Bash` pins more than 8,000 tokens of cctrace: the run ended far over budget, exit 0,
    and said nothing unless --table, --report or --strict was given."""
    report = tmp_path / "r.json"
    result = invoke(str(_cctrace(realdata)), "--max-tokens", "8000", "-k", "tool:Bash", "-o", str(tmp_path / "out"),
                    "--report", str(report))
    assert result.exit_code == 0, result.output
    line = _warning(result)
    import json

    after, floor = (json.loads(report.read_text())[key] for key in ("after", "budget"))
    assert f"the budget (under 8,000 tokens) was not reached: {after['tokens']:,} tokens" in line, line
    assert f"pinned messages alone need {floor['floor']['tokens']:,} tokens" in line, line
    quiet = invoke(str(_cctrace(realdata)), "--max-tokens", "8000", "-k", "tool:Bash", "-o", str(tmp_path / "out"),
                   "-q")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr


def test_strict_says_why_it_exits_3(tmp_path: Path) -> None:
    result = invoke(str(SESSION), "--max-tokens", "10", "--strict", "-o", str(tmp_path / "out"))
    assert result.exit_code == 3
    assert "the budget (under 10 tokens) was not reached" in _warning(result)


def test_skipped_lines_and_kept_orphans_are_one_warning_line(tmp_path: Path) -> None:
    skipped = invoke(str(ROOT / "tests" / "badinput" / "bad_third_line.jsonl"), "--skip-invalid", "--max-tokens",
                     "8000", "-o", str(tmp_path / "a"))
    assert skipped.exit_code == 0, skipped.output
    assert "1 invalid line(s) left out (line 3; the report lists why)" in _warning(skipped)
    orphan = invoke(str(SAMPLES / "errors" / "orphan_call.jsonl"), "--max-tokens", "8000", "-o", str(tmp_path / "b"))
    assert orphan.exit_code == 0, orphan.output
    assert "1 tool call(s) without a result kept (line 3, --repair drops them)" in _warning(orphan)
    repaired = invoke(str(SAMPLES / "errors" / "orphan_call.jsonl"), "--max-tokens", "8000", "--repair",
                      "-o", str(tmp_path / "c"))
    assert repaired.exit_code == 0 and repaired.stderr == "", repaired.stderr  # nothing left to warn about


def test_everything_that_fell_short_shares_the_one_line(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text((SAMPLES / "errors" / "orphan_call.jsonl").read_text() + "{not json\n")
    result = invoke(str(source), "--skip-invalid", "--max-tokens", "10", "-k", "line:3", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    line = _warning(result)
    assert "was not reached" in line and "invalid line(s)" in line and "without a result" in line


def test_the_table_says_it_instead_of_the_line(tmp_path: Path) -> None:
    result = invoke(str(SESSION), "--max-tokens", "10", "--table", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "NOT reached" in result.stderr
    assert "compact: warning: the budget" not in result.stderr  # said once, in the table


def test_a_dataset_with_conversations_over_budget_warns(tmp_path: Path) -> None:
    import json

    rows = [{"messages": [{"role": "user", "content": "word " * 400}]}, {"messages": [{"role": "user", "content": "hi"}]}]
    source = tmp_path / "set.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = invoke(str(source), "--max-tokens", "50", "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    assert "1 of 2 conversation(s) still over budget (line 1)" in _warning(result)


def test_an_orphan_a_strategy_removed_is_not_warned_about(tmp_path: Path) -> None:
    """At 10 tokens the sliding window drops the orphan call (line 3): it is not "kept", in the line nor the table."""
    result = invoke(str(SAMPLES / "errors" / "orphan_call.jsonl"), "--max-tokens", "10", "-o", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert "without a result" not in _warning(result)
    table = invoke(str(SAMPLES / "errors" / "orphan_call.jsonl"), "--max-tokens", "10", "--table",
                   "-o", str(tmp_path / "o"))
    assert "NOT reached" in table.stderr and "without a result" not in table.stderr


def test_the_readme_shows_the_warning_line_a_run_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    command = "$ compact sample_transcripts/agent_session.jsonl --max-tokens 50 -o small.jsonl"
    shown = readme[readme.index(command) + 1]
    monkeypatch.chdir(tmp_path)
    result = invoke(str(SESSION), "--max-tokens", "50", "-o", "small.jsonl")
    assert result.exit_code == 0, result.output
    assert result.stderr == shown + "\n"


def test_a_graph_report_into_a_folder_fails_before_the_snapshot_reaches_stdout(tmp_path: Path) -> None:
    snapshot = tmp_path / "g.json"
    snapshot.write_text('{"nodes": [{"id": "a"}], "relationships": []}')
    target = _unusable(tmp_path, "a folder")
    result = invoke("graph", "import", str(snapshot), "--report", str(target))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"compact: error: {target}: cannot write: --report names a folder")


def test_a_long_list_of_lines_shows_ten_then_an_ellipsis(tmp_path: Path) -> None:
    # The warning line and the --table warning list the same way: ten line numbers, then "…".
    import json

    calls = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function", "function": {"name": "run_shell", "arguments": "{}"}}]}
        for n in range(12)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in [{"role": "user", "content": "go"}, *calls]))
    listed = "(line 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, …"
    line = invoke(str(source), "--max-tokens", "8000", "-o", str(tmp_path / "a"))
    assert line.exit_code == 0, line.output
    assert f"12 tool call(s) without a result kept {listed}" in _warning(line)
    table = invoke(str(source), "--max-tokens", "8000", "--table", "-o", str(tmp_path / "b"))
    assert table.exit_code == 0, table.output
    assert f"12 tool call(s) without a result {listed})" in " ".join(table.stderr.split()), table.stderr
