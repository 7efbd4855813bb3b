"""The whole-run memo: an unchanged transcript with unchanged settings is answered from the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from core.config import MemoryConfig
from core.counting.counter import MessageCounter
from tests.helpers import invoke


def test_a_rerun_gives_the_same_bytes_without_counting(samples: Path, tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "session.jsonl"
    shutil.copy(samples / "agent_session.jsonl", source)
    first = invoke(str(source), "--max-tokens", "8000", "--report", str(tmp_path / "a.json"))

    def refuse(*args, **kwargs):
        raise AssertionError("the memo should have answered: nothing may be counted")

    monkeypatch.setattr(MessageCounter, "count_texts", refuse)
    second = invoke(str(source), "--max-tokens", "8000", "--report", str(tmp_path / "b.json"))
    assert second.exit_code == 0, second.output
    assert second.stdout == first.stdout
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())


def test_any_change_to_the_file_or_the_settings_misses(samples: Path, tmp_path: Path) -> None:
    source = tmp_path / "session.jsonl"
    shutil.copy(samples / "seed_example.jsonl", source)
    first = invoke(str(source), "--max-messages", "6")
    other_settings = invoke(str(source), "--max-messages", "4")
    assert other_settings.stdout != first.stdout
    with source.open("a") as handle:
        handle.write('{"role": "assistant", "content": "Lisbon."}\n')
    grown = invoke(str(source), "--max-messages", "6")
    assert grown.stdout != first.stdout and grown.stdout.rstrip().endswith('"Lisbon."}')
    assert MemoryConfig().with_overrides(max_messages=6) != MemoryConfig().with_overrides(max_messages=4)


def test_no_cache_skips_the_memo(samples: Path, tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "session.jsonl"
    shutil.copy(samples / "seed_example.jsonl", source)
    invoke(str(source), "--max-messages", "6")
    calls = []
    real = MessageCounter.count_texts
    monkeypatch.setattr(MessageCounter, "count_texts", lambda self, texts: calls.append(1) or real(self, texts))
    invoke(str(source), "--max-messages", "6", "--no-cache")
    assert calls
