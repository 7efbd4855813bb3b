"""The working graph inside a compaction run: rendered after compaction, never counted against it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.io.schema_loader import validator
from tests.helpers import invoke, read_messages

GRAPH = "sample_transcripts/graph/valid.json"
DELTA = "sample_transcripts/graph/delta.json"
MARKER = "CUCA graph memory:"


def graph_messages(messages: list[dict]) -> list[int]:
    return [i for i, m in enumerate(messages) if isinstance(m.get("content"), str) and m["content"].startswith(MARKER)]


def test_graph_message_goes_after_the_first_system_message_and_survives_compaction(samples: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    result = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "3000",
                    "--graph", str(samples.parent / GRAPH), "--report", str(report_path))
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    assert graph_messages(out) == [1]
    assert out[0]["role"] == "system" and out[1]["role"] == "system"
    report = json.loads(report_path.read_text())
    validator("report").validate(report)
    graph = report["graph"]
    assert graph["action"] == "inserted" and graph["tokens"] > 0
    assert graph["report"]["kind"] == "graph-import"
    # Its tokens are not counted against the budget that triggered compaction.
    assert report["after"]["tokens"] < 3000
    assert report["after"]["messages"] == len(out) - 1


def test_graph_tokens_do_not_trigger_compaction(samples: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    source = samples / "seed_example.jsonl"
    # The transcript alone is 53 tokens; with the graph message it would be far over 60.
    result = invoke(str(source), "--max-tokens", "60", "--graph", str(samples.parent / GRAPH), "--report", str(report_path))
    report = json.loads(report_path.read_text())
    assert report["triggered"] is False and report["removed"] == []
    assert report["graph"]["tokens"] > 60
    assert len(read_messages(result.stdout)) == 9


def test_a_later_run_replaces_the_graph_message_in_place_and_an_empty_graph_removes_it(samples: Path, tmp_path: Path) -> None:
    first = invoke(str(samples / "seed_example.jsonl"), "--unlimited", "--graph", str(samples.parent / GRAPH))
    once = tmp_path / "once.jsonl"
    once.write_text(first.stdout)
    merged = invoke(str(once), "--unlimited", "--graph", str(samples.parent / GRAPH), "--graph-merge", str(samples.parent / DELTA),
                    "--report", str(tmp_path / "r.json"))
    out = read_messages(merged.stdout)
    assert graph_messages(out) == [1]
    assert out[1]["content"] != read_messages(first.stdout)[1]["content"]
    assert json.loads((tmp_path / "r.json").read_text())["graph"]["action"] == "replaced"
    empty = tmp_path / "empty.json"
    empty.write_text('{"nodes": [], "relationships": []}')
    cleared = invoke(str(once), "--unlimited", "--graph", str(empty))
    assert graph_messages(read_messages(cleared.stdout)) == []
    assert cleared.stdout == (samples / "seed_example.jsonl").read_text()  # back to the original, byte for byte


def test_compaction_never_deletes_an_existing_graph_message(samples: Path, tmp_path: Path) -> None:
    first = invoke(str(samples / "agent_session.jsonl"), "--unlimited", "--graph", str(samples.parent / GRAPH))
    with_graph = tmp_path / "with_graph.jsonl"
    with_graph.write_text(first.stdout)
    # No --graph this time: the message is left where it is, pinned and uncounted.
    result = invoke(str(with_graph), "--max-tokens", "2000")
    assert graph_messages(read_messages(result.stdout)) == [1]


def test_graph_out_writes_the_merged_snapshot(samples: Path, tmp_path: Path) -> None:
    out = tmp_path / "graph.json"
    result = invoke(str(samples / "seed_example.jsonl"), "--unlimited", "--graph", str(samples.parent / GRAPH),
                    "--graph-merge", str(samples.parent / DELTA), "--graph-out", str(out))
    assert result.exit_code == 0, result.output
    snapshot = json.loads(out.read_text())
    validator("graph-snapshot").validate(snapshot)
    assert len(snapshot["nodes"]) == 5


def test_an_invalid_graph_stops_the_run_before_anything_is_written(samples: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    result = invoke(str(samples / "seed_example.jsonl"), "--graph", str(samples / "graph" / "invalid.json"), "-o", str(target))
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and "invalid.json" in result.stderr
    assert not target.exists()


@pytest.mark.parametrize("failing", ["-o", "--report"])
def test_graph_out_is_not_written_when_the_run_fails(failing: str, samples: Path, tmp_path: Path) -> None:
    """--graph-out was saved before the transcript and the report: a run that then failed to write
    one of them (exit 2) had merged the delta into the graph already, so the rerun merged it twice."""
    graph = tmp_path / "graph.json"
    shutil.copyfile(samples.parent / GRAPH, graph)
    before = graph.read_bytes()
    args = ["--graph", str(graph), "--graph-merge", str(samples.parent / DELTA), "--merge-weights", "sum",
            "--graph-out", str(graph), "--unlimited"]
    outputs = {"-o": str(tmp_path / "out.jsonl"), "--report": str(tmp_path / "r.json")}
    unwritable = {**outputs, failing: str(tmp_path / "missing" / "x.json")}
    failed = invoke(str(samples / "short_chat.jsonl"), *args, *[a for pair in unwritable.items() for a in pair])
    assert failed.exit_code == 2 and "cannot write" in failed.stderr
    assert graph.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]
    done = invoke(str(samples / "short_chat.jsonl"), *args, "-o", outputs["-o"])  # the rerun merges the delta once
    assert done.exit_code == 0, done.output
    weights = {r["id"]: r["weight"] for r in json.loads(graph.read_text())["relationships"]}
    assert weights["r1"] == 3


def test_graph_out_is_written_with_the_transcript_when_strict_exits_3(samples: Path, tmp_path: Path) -> None:
    graph, out = tmp_path / "graph.json", tmp_path / "out.jsonl"
    result = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "5", "--strict", "-o", str(out),
                    "--graph", str(samples.parent / GRAPH), "--graph-merge", str(samples.parent / DELTA),
                    "--graph-out", str(graph))
    assert result.exit_code == 3, result.output
    assert out.stat().st_size > 0 and len(json.loads(graph.read_text())["nodes"]) == 5
