"""The benchmark transcript generator (bench/generate.py) and the sample it produced."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATOR_PATH = ROOT / "bench" / "generate.py"
# How sample_transcripts/agent_session.jsonl was made (also in sample_transcripts/README.md).
AGENT_SESSION = {"n_messages": 350, "seed": 11, "size_scale": 0.3}
ROLES = {"system", "user", "assistant", "tool"}
CALL_ID = re.compile(r"call_[A-Za-z0-9]{24}")


def _load_generator() -> ModuleType:
    # bench/ is not a package: load the script by path.
    spec = importlib.util.spec_from_file_location("bench_generate", GENERATOR_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generator = _load_generator()


def _messages(n_messages: int, seed: int = 0, **options: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in generator.generate(n_messages, seed, **options)]


@pytest.fixture(scope="module")
def session() -> list[dict[str, Any]]:
    return _messages(3000, seed=0)


def _calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for message in messages for call in message.get("tool_calls") or []]


def test_same_seed_gives_the_same_bytes() -> None:
    assert list(generator.generate(400, seed=5)) == list(generator.generate(400, seed=5))
    assert list(generator.generate(400, seed=5)) != list(generator.generate(400, seed=6))


@pytest.mark.parametrize("n_messages", [2, 3, 4, 5, 17, 250])
def test_exact_count_and_a_clean_ending(n_messages: int) -> None:
    for seed in range(5):
        messages = _messages(n_messages, seed)
        assert len(messages) == n_messages
        assert messages[0]["role"] == "system"
        assert messages[1]["role"] == "user"
        last = messages[-1]
        assert last["role"] == "user" or (last["role"] == "assistant" and "tool_calls" not in last)


def test_fewer_than_two_messages_is_refused_at_the_call() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        generator.generate(1)


def test_every_line_is_one_message_object(session: list[dict[str, Any]]) -> None:
    lines = list(generator.generate(300, seed=2))
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    for message in session:
        assert isinstance(message, dict)
        assert message["role"] in ROLES
        assert message["content"] is None or isinstance(message["content"], str)
        if message["role"] == "tool":
            assert CALL_ID.fullmatch(message["tool_call_id"])
            assert isinstance(message["name"], str)
    for call in _calls(session):
        assert CALL_ID.fullmatch(call["id"])
        assert call["type"] == "function"
        assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_each_call_has_exactly_one_result_right_after_it(session: list[dict[str, Any]]) -> None:
    call_ids = [call["id"] for call in _calls(session)]
    result_ids = [message["tool_call_id"] for message in session if message["role"] == "tool"]
    assert len(set(call_ids)) == len(call_ids)
    assert Counter(result_ids) == Counter(call_ids)
    # The results of an assistant message are the tool messages that directly follow it.
    for index, message in enumerate(session):
        calls = message.get("tool_calls") or []
        following = session[index + 1:index + 1 + len(calls)]
        assert [result.get("tool_call_id") for result in following] == [
            call["id"] for call in calls]
        assert [result["name"] for result in following] == [
            call["function"]["name"] for call in calls]


def test_parallel_calls_repeated_reads_and_null_content(session: list[dict[str, Any]]) -> None:
    with_calls = [message for message in session if message.get("tool_calls")]
    widths = Counter(len(message["tool_calls"]) for message in with_calls)
    assert set(widths) == {1, 2, 3, 4}
    nulls = sum(message["content"] is None for message in with_calls) / len(with_calls)
    assert 0.4 < nulls < 0.6

    results = {m["tool_call_id"]: m["content"] for m in session if m["role"] == "tool"}
    reads = [(json.loads(call["function"]["arguments"])["path"], results[call["id"]])
             for call in _calls(session) if call["function"]["name"] == "read_file"]
    seen: dict[str, str] = {}
    rereads = changed = 0
    for path, content in reads:
        if path in seen:
            rereads += 1
            changed += seen[path] != content
        seen[path] = content
    assert 0.2 < rereads / len(reads) < 0.4
    assert changed > 0  # an edit between two reads shows up in the second one


def test_every_tool_appears_and_some_calls_fail(session: list[dict[str, Any]]) -> None:
    names = Counter(call["function"]["name"] for call in _calls(session))
    assert set(names) == {"read_file", "write_file", "edit_file", "run_shell", "search"}
    errors = [m for m in session if m["role"] == "tool" and m["content"].startswith("Error")]
    assert errors


def test_sizes_match_the_benchmark_calibration(session: list[dict[str, Any]]) -> None:
    size = sum(len(line) for line in generator.generate(3000, seed=0))
    assert 4_000 < size / 3000 < 6_500  # 10k messages ~ 50 MB
    outputs = [len(m["content"]) for m in session if m["role"] == "tool"]
    assert any(length > 20_000 for length in outputs)
    assert sorted(outputs)[len(outputs) // 2] < 8_500  # most outputs are a few KB
    assert len(session[0]["content"]) > 5_000  # a long system prompt


def test_agent_session_sample_is_the_generator_output() -> None:
    sample = (ROOT / "sample_transcripts" / "agent_session.jsonl").read_bytes()
    assert sample == b"".join(generator.generate(
        AGENT_SESSION["n_messages"], AGENT_SESSION["seed"],
        size_scale=AGENT_SESSION["size_scale"])), "regenerate: see sample_transcripts/README.md"


def test_script_writes_what_the_function_yields(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    subprocess.run([sys.executable, str(GENERATOR_PATH), "--messages", "60", "--seed", "3",
                    "-o", str(out)], check=True)
    assert out.read_bytes() == b"".join(generator.generate(60, seed=3))
