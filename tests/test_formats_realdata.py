"""Every real transcript in ../shared/realdata: detected as its format, and round-tripped byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import invoke

EXPECTED = {
    "claude-code": "claude-code",
    "codex-cli": "codex",
    "codex-cli-2025-layout": "codex",
    "gemini-cli": "gemini-stream",
    "openai-chat": "openai",
    "sharegpt": "sharegpt",
}
DATASETS = {"tau-bench-airline-trajectories.jsonl": "dataset", "glaive_toolcall_en_demo.json": "dataset"}
ARRAYS = {"glaive_toolcall_en_demo.json"}  # JSON arrays: written back as JSONL, element by element


def expected_format(path: Path) -> str:
    if path.name in DATASETS:
        return DATASETS[path.name]
    if path.parent.name == "gemini-cli" and path.suffix == ".json":
        return "gemini-chat"  # one JSON document per session; the .jsonl files are stream-json logs
    return EXPECTED[path.parent.name]


def unlinked(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k not in ("parentUuid", "logicalParentUuid")}


def real_files(realdata: Path) -> list[Path]:
    return sorted(p for folder in EXPECTED for p in (realdata / folder).glob("*.json*"))


def test_every_real_file_is_detected_and_comes_back_unchanged(realdata: Path, tmp_path: Path) -> None:
    files = real_files(realdata)
    assert len(files) >= 16
    for path in files:
        out = invoke(str(path), "--unlimited", "-o", str(tmp_path / "out"), "--report", str(tmp_path / "r.json"))
        assert out.exit_code == 0, f"{path.name}: {out.output}"
        if path.name in ARRAYS:  # a JSON array comes back as JSONL: the same values, element by element
            written = [json.loads(line) for line in (tmp_path / "out").read_text().splitlines()]
            assert written == json.loads(path.read_text()), path.name
        else:
            assert (tmp_path / "out").read_bytes() == path.read_bytes(), path.name
        report = json.loads((tmp_path / "r.json").read_text())
        expected = expected_format(path)
        detected = report.get("format", {}).get("input", "dataset" if report.get("kind") == "dataset" else None)
        assert detected == expected, path.name


def test_batch_compacts_a_folder_of_claude_code_sessions_in_their_format(realdata: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    shutil.copytree(realdata / "claude-code", sessions)
    out = invoke("batch", str(sessions), "--out", str(tmp_path / "out"), "--max-tokens", "8000", "--jobs", "1",
                 "--report", str(tmp_path / "batch.json"))
    assert out.exit_code == 0, out.output
    for source in sessions.glob("*.jsonl"):
        written = [json.loads(line) for line in (tmp_path / "out" / source.name).read_text().splitlines()]
        original = [json.loads(line) for line in source.read_text().splitlines()]
        assert all("type" in entry for entry in written)  # still Claude Code entries, not chat messages
        kinds = {e["type"] for e in original} - {"user", "assistant"}
        # Lines that are not messages all stay, in order; only their link to a removed parent may move.
        assert [unlinked(e) for e in written if e["type"] in kinds] == [
            unlinked(e) for e in original if e["type"] in kinds]
        uuids = {e.get("uuid") for e in written}
        assert all(e.get("parentUuid") in uuids for e in written if e.get("parentUuid"))
    report = json.loads((tmp_path / "batch.json").read_text())
    assert report["totals"]["compacted"] + report["totals"]["unchanged"] == 4
    for row in report["rows"]:  # "unchanged" only for a session already within the budget
        assert (row["status"] == "unchanged") == (row["tokens_after"] == row["tokens_before"] < 8000), row
    assert report["totals"]["tokens_after"] < report["totals"]["tokens_before"]


TARGETS = ("openai", "anthropic", "responses", "claude-code", "codex", "pi", "gemini-stream", "gemini-chat")


@pytest.mark.parametrize("target", TARGETS)
def test_every_real_transcript_converts_and_reads_back(realdata: Path, tmp_path: Path, target: str) -> None:
    for path in real_files(realdata):
        if path.name in DATASETS:
            continue
        converted = tmp_path / f"{path.stem}.{target}.jsonl"
        out = invoke(str(path), "--max-tokens", "8000", "--to", target, "-o", str(converted),
                     "--report", str(tmp_path / "r.json"))
        assert out.exit_code == 0, f"{path.name} -> {target}: {out.output}"
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["format"]["output"] == target
        back = invoke("count", str(converted), "--from", target, "--format", "json")
        assert back.exit_code == 0, f"{path.name} -> {target}, read back: {back.output}"
        usage = json.loads(back.stdout)
        # The pairs survive the conversion: the same orphans (by id) as the input had, no new ones.
        assert orphan_ids(usage["orphans"]) == orphan_ids(report["orphans"]), f"{path.name} -> {target}"
        assert len(usage["orphans"]["results"]) == len(report["orphans"]["results"]), f"{path.name} -> {target}"


def orphan_ids(orphans: dict) -> set[str]:
    return {call["id"] for call in orphans["calls"]}
