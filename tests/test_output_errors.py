"""A file compact cannot write is an OutputError: its own class, the same one line and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import CompactError, InputError, OutputError
from core.io.staged import atomic_write_bytes
from tests.helpers import invoke


def test_a_write_into_a_missing_folder_is_an_output_error_not_an_input_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.json"
    with pytest.raises(OutputError, match="cannot write") as caught:
        atomic_write_bytes(target, b"{}")
    assert not isinstance(caught.value, InputError)
    assert isinstance(caught.value, CompactError) and caught.value.exit_code == 2
    assert str(caught.value).startswith(f"{target}: cannot write")


def test_the_cli_shows_an_output_error_as_one_line_and_exits_2(samples: Path, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "x.jsonl"
    result = invoke(str(samples / "short_chat.jsonl"), "-o", str(target))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"compact: error: {target}: cannot write: ")
    assert len(result.stderr.splitlines()) == 1


def test_graph_save_into_a_missing_folder_exits_2(tmp_path: Path) -> None:
    snapshot = tmp_path / "g.json"
    snapshot.write_text('{"nodes": [{"id": "a"}], "relationships": []}')
    result = invoke("graph", "import", str(snapshot), "-o", str(tmp_path / "missing" / "out.json"))
    assert result.exit_code == 2
    assert "cannot write" in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("collision", [
    ("-o", "X", "--store", "X"),
    ("-o", "o.jsonl", "--report", "S", "--store", "S"),
    ("-o", "Y", "--report", "Y"),
    ("-o", "o.jsonl", "--store", "IN"),
])
def test_two_outputs_naming_one_file_are_refused_before_anything_is_written(
        collision: tuple[str, ...], samples: Path, tmp_path: Path) -> None:
    """-o, --report and --store naming the same file destroyed one of them (a store overwritten by
    the report lost every original offloaded to it), exit 0. Now: exit 2, one line, nothing touched."""
    source = tmp_path / "in.jsonl"
    source.write_bytes((samples / "agent_session.jsonl").read_bytes())
    store = tmp_path / "S"
    if "S" in collision:  # an existing store with something in it
        first = invoke(str(source), "--max-tokens", "3000", "-o", str(tmp_path / "first.jsonl"), "--store", str(store))
        assert first.exit_code == 0, first.output
    before = store.read_bytes() if store.exists() else None
    args = [str(source) if a == "IN" else (str(tmp_path / a) if a in ("X", "Y", "S", "o.jsonl") else a)
            for a in collision]
    result = invoke(str(source), "--max-tokens", "3000", *args)
    assert result.exit_code == 2, result.output
    assert "same file" in result.output
    assert (store.read_bytes() if store.exists() else None) == before
    assert not (tmp_path / "X").exists() and not (tmp_path / "Y").exists() and not (tmp_path / "o.jsonl").exists()
    assert source.read_bytes() == (samples / "agent_session.jsonl").read_bytes()
