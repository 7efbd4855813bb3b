"""One path through the code: the options are checked once, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat_server import ChatServer
from tests.helpers import invoke
from tests.test_dataset import conversation, dataset_bytes


@pytest.mark.parametrize("option", [["--dry-run"], ["--check-for", "openai"], ["--graph", "sample_transcripts/graph/valid.json"]])
def test_a_dataset_is_refused_before_a_paid_summarizer_is_called(
    option: list[str], tmp_path: Path, chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "set.jsonl"
    data.write_bytes(dataset_bytes({"messages": conversation(6)}, {"messages": conversation(6)}))
    result = invoke(str(data), "--max-tokens", "3000", "--summarizer", "openai", "--summarizer-url", chat_server.url,
                    "--summarizer-model", "m", *option)
    assert result.exit_code == 2
    assert f"{option[0]} works on one transcript, and {data} is a conversation-per-line dataset" in result.stderr
    assert chat_server.requests == [], "refused before any conversation was compacted"
