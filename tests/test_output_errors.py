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
