"""`compact batch` takes the options of `compact FILE` (but -o and --in-place): each input's output is the one
`compact FILE` writes with the same option, because both go through core.api.compact_source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.helpers import invoke

GRAPH = ROOT / "sample_transcripts" / "graph" / "valid.json"
DELTA = ROOT / "sample_transcripts" / "graph" / "delta.json"
FORMATS = ROOT / "tests" / "fixtures" / "formats"


def batch(*args: str) -> tuple[Any, dict[str, Any]]:
    """`compact batch ... --report -`: the result and the report."""
    result = invoke("batch", *args, "-q", "--report", "-")
    return result, json.loads(result.stdout)


def single(path: Path, *args: str) -> Any:
    result = invoke(str(path), *args)
    assert result.exit_code == 0, result.stderr
    return result


@pytest.fixture
def inputs(tmp_path: Path, samples: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(samples / "agent_session.jsonl", folder / "session.jsonl")
    return folder


def test_from_reads_each_input_as_that_format(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    source = shutil.copy(FORMATS / "sharegpt_conversation.jsonl", folder / "one.jsonl")
    out = tmp_path / "out"
    result, report = batch(str(folder), "--out", str(out), "--max-tokens", "200", "--from", "dataset")
    assert result.exit_code == 0, result.stderr
    assert report["rows"][0]["kind"] == "dataset", "without --from, one ShareGPT conversation is a transcript"
    assert (out / "one.jsonl").read_bytes() == single(Path(source), "--max-tokens", "200", "--from", "dataset").stdout_bytes

    _, detected = batch(str(folder), "--out", str(tmp_path / "out2"), "--max-tokens", "200")
    assert detected["rows"][0]["kind"] == "transcript"


def test_from_a_wrong_format_fails_the_input_with_the_error_of_compact_file(inputs: Path, tmp_path: Path) -> None:
    alone = invoke(str(inputs / "session.jsonl"), "--from", "anthropic")
    assert alone.exit_code == 2
    result, report = batch(str(inputs), "--out", str(tmp_path / "out"), "--from", "anthropic")
    assert result.exit_code == 1
    assert report["rows"][0]["status"] == "failed"
    assert report["rows"][0]["error"] in alone.stderr


def test_to_converts_each_output_as_compact_file_does(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result, report = batch(str(inputs), "--out", str(out), "--max-tokens", "3000", "--to", "anthropic")
    assert result.exit_code == 0, result.stderr
    expected = single(inputs / "session.jsonl", "--max-tokens", "3000", "--to", "anthropic").stdout_bytes
    assert (out / "session.jsonl").read_bytes() == expected
    assert b'"role":"tool"' not in expected, "the output is in the Anthropic format"
    assert report["rows"][0]["status"] == "compacted"

    _, again = batch(str(inputs), "--out", str(out), "--max-tokens", "3000")
    assert again["rows"][0]["status"] == "compacted", "another --to is another setting: the output is redone"


def test_to_a_dataset_is_refused_as_compact_file_refuses_it(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(FORMATS / "sharegpt_dataset.jsonl", folder / "set.jsonl")
    result, report = batch(str(folder), "--out", str(tmp_path / "out"), "--to", "anthropic")
    assert result.exit_code == 1
    assert "--to cannot convert a conversation-per-line dataset" in report["rows"][0]["error"]


def test_graph_renders_the_working_graph_into_each_output(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--max-tokens", "3000", "--graph", str(GRAPH), "--graph-merge", str(DELTA)]
    result, _ = batch(str(inputs), "--out", str(out), *args, "--graph-out", str(tmp_path / "graph.json"))
    assert result.exit_code == 0, result.stderr
    expected = single(inputs / "session.jsonl", *args).stdout_bytes
    assert (out / "session.jsonl").read_bytes() == expected
    assert b"CUCA graph memory:" in expected
    assert json.loads((tmp_path / "graph.json").read_text())["nodes"], "--graph-out writes the merged graph"


def test_another_graph_snapshot_redoes_the_outputs(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    snapshot = shutil.copy(GRAPH, tmp_path / "graph.json")
    args = [str(inputs), "--out", str(out), "--max-tokens", "3000", "--graph", str(snapshot)]
    batch(*args)
    _, same = batch(*args)
    assert same["rows"][0]["status"] == "up_to_date"
    shutil.copy(DELTA, snapshot)
    _, changed = batch(*args)
    assert changed["rows"][0]["status"] == "compacted", "the snapshot's bytes are part of the settings"


def test_graph_fails_a_dataset_input_as_compact_file_refuses_it(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    dataset = shutil.copy(FORMATS / "sharegpt_dataset.jsonl", folder / "set.jsonl")
    alone = invoke(str(dataset), "--graph", str(GRAPH))
    assert alone.exit_code == 2 and "--graph works on one transcript" in alone.stderr
    result, report = batch(str(folder), "--out", str(tmp_path / "out"), "--graph", str(GRAPH))
    assert result.exit_code == 1
    assert "--graph works on one transcript" in report["rows"][0]["error"]


def test_check_for_fails_an_input_the_provider_would_reject_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    source = folder / "in.jsonl"  # an Anthropic file that opens with the assistant, written back as it is
    source.write_text('{"system": "s"}\n{"role": "assistant", "content": "a"}\n{"role": "user", "content": "last"}\n')
    out = tmp_path / "out"
    result, report = batch(str(folder), "--out", str(out), "--unlimited", "--check-for", "anthropic")
    assert result.exit_code == 1
    row = report["rows"][0]
    assert (row["status"], row["error_type"]) == ("failed", "ProviderRejected")
    assert "would be rejected by anthropic" in row["error"]
    assert "line 2 of the result: the first message is assistant, not user" in row["error"]
    assert not (out / "in.jsonl").exists()

    result, _ = batch(str(folder), "--out", str(out), "--unlimited", "--check-for", "openai")
    assert result.exit_code == 0
    expected = single(source, "--unlimited", "--check-for", "openai").stdout_bytes
    assert (out / "in.jsonl").read_bytes() == expected


def test_an_unknown_check_for_provider_is_bad_usage_before_anything_runs(inputs: Path, tmp_path: Path) -> None:
    result = invoke("batch", str(inputs), "--out", str(tmp_path / "out"), "--check-for", "gemini")
    assert result.exit_code == 2
    assert "unknown provider 'gemini'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_strict_exits_3_when_an_input_is_still_over_budget(inputs: Path, tmp_path: Path) -> None:
    args = [str(inputs), "--out", str(tmp_path / "out"), "--max-tokens", "10", "--keep", "role:user"]
    result, report = batch(*args, "--strict")
    assert report["totals"]["over_budget"] == 1
    assert result.exit_code == 3
    assert batch(*args)[0].exit_code == 0, "without --strict, over budget is not an error"


def test_batch_offers_every_option_of_compact_file_but_the_single_output_ones() -> None:
    import typer.main

    from cli.app import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    run = {opt for param in commands["run"].params for opt in param.opts}
    batch_options = {opt for param in commands["batch"].params for opt in param.opts}
    assert len(run) > 40
    assert run - batch_options == {"--in-place", "--output", "file"}  # (file: run's FILE argument)


def test_dry_run_writes_nothing_and_its_rows_are_those_of_the_real_run(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = tmp_path / "store.sqlite"
    args = [str(inputs), "--out", str(out), "--max-tokens", "3000", "--preset", "seed", "--store", str(store)]
    result, dry = batch(*args, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert not out.exists() and not store.exists(), "no output, no sidecar, no store"
    alone = invoke(str(inputs / "session.jsonl"), "--max-tokens", "3000", "--preset", "seed", "--store", str(store),
                   "--dry-run", "--report", "-")
    plan = json.loads(alone.stdout)
    row = dry["rows"][0]
    assert row["status"] == "compacted"
    assert (row["tokens_before"], row["tokens_after"]) == (plan["before"]["tokens"], plan["after"]["tokens"])

    _, real = batch(*args)
    for key in ("status", "messages_before", "messages_after", "tokens_before", "tokens_after", "strategies"):
        assert real["rows"][0][key] == row[key], key
