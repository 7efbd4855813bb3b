"""bench/peer_summary.py: compact against Claude Code's own summaries at its real compaction points."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from tests.conftest import REALDATA
from tests.helpers import load_bench


@pytest.fixture(scope="module")
def peer():
    return load_bench("peer_summary.py", "peer_summary_bench")


@pytest.fixture(scope="module")
def two_runs(peer, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict, str]]:
    """The bench run twice on the same logs: (JSON, printed report) each."""
    folder = REALDATA / "claude-code-compactions"
    if not folder.is_dir():
        pytest.skip("../shared/realdata/claude-code-compactions is not beside this checkout")
    runs = []
    for name in ("a.json", "b.json"):
        target = tmp_path_factory.mktemp("peer") / name
        # 5e_: two whole boundaries, the second after Claude Code's first summary; e5_: a log that
        # starts mid-session, so its boundary is a slice
        argv = ["--data", str(folder), "--only", "5e_", "--only", "e5_", "--json", str(target)]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
            assert peer.main(argv) == 0
        runs.append((json.loads(target.read_text()), printed.getvalue()))
    return runs


def test_each_boundary_gets_every_row_within_its_budget_and_the_slice_is_named(peer, two_runs) -> None:
    report, table = two_runs[0]
    assert [b["label"] for b in report["boundaries"]] == ["5e_5207b424e2_0_full#1", "5e_5207b424e2_0_full#2"]
    for boundary in report["boundaries"]:
        check_rows(boundary)
    (skipped,) = report["skipped"]
    assert skipped["label"].startswith("e5_8c50537669_0_full#1") and "slice" in skipped["why"]
    assert "e5_8c50537669_0_full#1" in table and "| compact | 1×B |" in table
    loss = report["loss_map"]["1"]
    assert set(loss) >= {"by_source", "examples"}
    assert all(key.split(", ")[0] in peer.SOURCE_KINDS.values() for key in loss["by_source"])


def test_each_needle_compact_lost_says_whether_its_summary_or_its_tail_lost_it(peer, two_runs) -> None:
    """What is still lost and why: each needle only Claude Code's summary kept is told by what became
    of the newest message holding it, and the per-boundary table accounts for all of their weight."""
    report, table = two_runs[0]
    for boundary in report["boundaries"]:
        mine = boundary["methods"]["compact 1×B"]
        assert 0 < mine["summarized_messages"] < boundary["prefix_messages"]
        assert 0 < mine["summary_tokens"] <= mine["tokens"]
        for multiple in ("1", "2", "4"):
            lost = boundary["kept_by_one"][multiple]["peer_only"]
            assert {item["fate"] for item in lost} <= {peer.IN_SPAN, peer.IN_TAIL}
        lost = boundary["kept_by_one"]["1"]["peer_only"]
        row = next(line for line in table.splitlines() if line.startswith(f"| {boundary['label']} |") and "/" in line
                   and line.count("|") > 10)
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        summarized = sum(int(part) for part in cells[7].split(" / "))
        assert summarized + int(cells[8]) == sum(item["weight"] for item in lost)


def check_rows(boundary: dict) -> None:
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
        if name == "claude-code-summary":
            continue
        # every method within its budget: an earlier summary is not a system prompt to pin
        assert row["tokens"] <= int(name.split()[-1][0]) * summary_tokens, name
        if name.startswith("compact"):
            assert 0.0 <= row["bare_identifier_share"] <= 1.0
            assert 0.0 < row["summary_share"] < 1.0
    assert methods["claude-code-summary"]["tokens"] == summary_tokens


def test_two_runs_give_the_same_numbers(two_runs) -> None:
    (first, first_table), (second, second_table) = two_runs
    assert first["timing"]["all"] > 0
    assert {**first, "timing": None} == {**second, "timing": None}
    assert first_table == second_table


def test_a_bare_list_of_names_is_told_from_a_line_a_model_can_act_on(peer) -> None:
    assert peer.bare_line("Files read: cmd/cli/resume.go, cmd/cli/state.go")
    assert peer.bare_line("- `CheckpointID`, `SessionID`, migrate_checkpoint")
    assert not peer.bare_line("- read cmd/cli/state.go (54 lines): defines SessionState, WorktreeID")
    assert not peer.bare_line("- assistant: The issue is in the `GetRewindPoints` function.")
    assert not peer.bare_line("Files read: cmd/cli/resume.go")  # one name is a pointer, not a list


def test_compact_options_change_what_the_compact_rows_run_and_the_report_says_so(peer, tmp_path) -> None:
    """--compact-options measures a lever (another strategy list, a parameter) on the same boundaries."""
    folder = REALDATA / "claude-code-compactions"
    if not folder.is_dir():
        pytest.skip("../shared/realdata/claude-code-compactions is not beside this checkout")
    target = tmp_path / "window.json"
    argv = ["--data", str(folder), "--only", "5e_", "--json", str(target),
            "--compact-options", "-s sliding_window"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        assert peer.main(argv) == 0
    rows = json.loads(target.read_text())["boundaries"]
    # a window alone writes no summary of compact's own: the default list would
    assert all(r["methods"]["compact 1×B"]["summary_share"] == 0 for r in rows)
    assert "compact options: -s sliding_window" in printed.getvalue()


def test_compact_options_that_compact_refuses_are_one_line_not_a_traceback(peer, capsys) -> None:
    folder = REALDATA / "claude-code-compactions"
    if not folder.is_dir():
        pytest.skip("../shared/realdata/claude-code-compactions is not beside this checkout")
    assert peer.main(["--data", str(folder), "--only", "5e_", "--compact-options", "-s no_such_strategy"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_strategy" in err[0]
