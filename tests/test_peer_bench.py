"""bench/peer_summary.py: compact against Claude Code's own summaries at its real compaction points."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "peer_summary.py"


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("peer_summary_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_summary_bench"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def compactions(realdata: Path) -> Path:
    folder = realdata / "claude-code-compactions"
    if not folder.is_dir():
        pytest.skip("../shared/realdata/claude-code-compactions is not beside this checkout")
    return folder


def run(peer, compactions: Path, target: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    # 76_: one whole boundary; e5_: a log that starts mid-session, so its boundary is a slice
    argv = ["--data", str(compactions), "--only", "76_", "--only", "e5_", "--json", str(target)]
    assert peer.main(argv) == 0
    return json.loads(target.read_text()), capsys.readouterr().out


def test_one_boundary_gets_every_row_and_the_slice_is_named(
    peer, compactions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, table = run(peer, compactions, tmp_path / "a.json", capsys)
    (boundary,) = report["boundaries"]
    assert boundary["label"] == "76_74489fb0a9_3_full#1"
    summary_tokens = boundary["summary_tokens"]
    assert 1000 < summary_tokens < boundary["prefix_tokens"]
    methods = boundary["methods"]
    assert set(methods) == {
        "claude-code-summary",
        *(f"{name} {m}×B" for name in ("compact", "newest-that-fit", "clear-3-then-newest") for m in (1, 2, 4)),
    }
    for name, row in methods.items():
        assert set(row) >= {"weighted", "unweighted", "last_component", "tokens"}
        assert 0.0 <= row["unweighted"] <= 1.0
        # a path kept whole keeps its last component too
        assert row["last_component"] >= row["weighted"] - 1e-9
        if name.startswith("compact"):
            multiple = int(name.split()[1][0])
            assert row["tokens"] <= multiple * summary_tokens
            assert 0.0 <= row["bare_identifier_share"] <= 1.0
            assert 0.0 < row["summary_share"] < 1.0
    assert methods["claude-code-summary"]["tokens"] == summary_tokens
    (skipped,) = report["skipped"]
    assert skipped["label"].startswith("e5_8c50537669_0_full#1") and "slice" in skipped["why"]
    assert "e5_8c50537669_0_full#1" in table and "| compact | 1×B |" in table
    loss = report["loss_map"]["1"]
    assert set(loss) >= {"by_source", "examples"}
    assert all(key.split(", ")[0] in peer.SOURCE_KINDS.values() for key in loss["by_source"])


def test_two_runs_give_the_same_numbers(
    peer, compactions: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, first_table = run(peer, compactions, tmp_path / "a.json", capsys)
    second, second_table = run(peer, compactions, tmp_path / "b.json", capsys)
    assert first.pop("timing") and second.pop("timing")
    assert first == second
    assert first_table == second_table


def test_a_bare_list_of_names_is_told_from_a_line_a_model_can_act_on(peer) -> None:
    assert peer.bare_line("Files read: cmd/cli/resume.go, cmd/cli/state.go")
    assert peer.bare_line("- `CheckpointID`, `SessionID`, migrate_checkpoint")
    assert not peer.bare_line("- read cmd/cli/state.go (54 lines): defines SessionState, WorktreeID")
    assert not peer.bare_line("- assistant: The issue is in the `GetRewindPoints` function.")
    assert not peer.bare_line("Files read: cmd/cli/resume.go")  # one name is a pointer, not a list
