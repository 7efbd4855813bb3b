"""Conversation-per-line datasets (core.dataset): detection, per-conversation compaction, the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.config import MemoryConfig
from core.counting import MessageCounter
from core.dataset import (
    DATASET,
    TRANSCRIPT,
    compact_dataset_bytes,
    looks_like_dataset,
    sniff_bytes,
    sniff_file,
)
from core.errors import InputError
from core.schemas import load_schema
from tests.helpers import (
    assistant_calls,
    call,
    invoke,
    msg,
    read_messages,
    result,
    shared_counter,
    write_messages,
)


def conversation(turns: int, *, big: int = 2000) -> list[dict[str, Any]]:
    """A system prompt, then ``turns`` turns of user, a read_file call and its (large) result, and a reply."""
    messages = [msg("system", "You are a careful agent.")]
    for turn in range(turns):
        messages.append(msg("user", f"step {turn}: look at file {turn}"))
        messages.append(assistant_calls(call(f"c{turn}", "read_file", path=f"f{turn}.py")))
        messages.append(result(f"c{turn}", f"line {turn}\n" * big))
        messages.append(msg("assistant", f"done with step {turn}"))
    return messages


def dataset_bytes(*records: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def run(data: bytes, **settings: Any) -> tuple[bytes, dict[str, Any]]:
    counter, choice = shared_counter()
    config = MemoryConfig().with_overrides(**settings)
    return compact_dataset_bytes(data, "set.jsonl", config, counter=MessageCounter(counter), encoder=choice)


def validate_dataset_report(report: dict[str, Any]) -> None:
    import jsonschema

    schema = load_schema("batch-report")
    wrapper = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/dataset_report"}
    jsonschema.validate(report, wrapper)


# -- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"task_id": 1, "messages": [{"role": "user", "content": "hi"}]}', True),
        (b'{"messages": []}', True),
        (b'{"role": "user", "content": "hi", "messages": []}', False),  # a message with a stray field
        (b'{"role": "user", "content": "hi"}', False),
        (b'{"messages": "not a list"}', False),
        (b"[1, 2]", False),
        (b"{not json", False),
    ],
)
def test_a_dataset_line_is_an_object_with_a_messages_list_and_no_role(line: bytes, expected: bool) -> None:
    assert looks_like_dataset(line) is expected


def test_detection_reads_the_first_non_blank_line(tmp_path: Path, samples: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n  \n" + dataset_bytes({"id": 1, "messages": []}))
    assert sniff_file(str(path)) == DATASET
    assert sniff_file(str(samples / "agent_session.jsonl")) == TRANSCRIPT
    assert sniff_bytes(b"") == TRANSCRIPT


# -- compaction ---------------------------------------------------------------------------


def test_each_conversation_is_compacted_on_its_own_budget_and_other_fields_are_kept() -> None:
    small = {"task_id": 0, "reward": 1.0, "messages": [msg("system", "s"), msg("user", "hi")], "trial": 3}
    long = {"task_id": 1, "reward": 0.5, "messages": conversation(6), "trial": 4}
    data = dataset_bytes(small, long)
    output, report = run(data, max_tokens=3000)

    lines = output.splitlines()
    assert len(lines) == 2
    assert lines[0] == data.splitlines()[0], "a conversation nothing changed is written back byte for byte"
    changed = orjson.loads(lines[1])
    assert list(changed) == ["task_id", "reward", "messages", "trial"]
    assert (changed["task_id"], changed["reward"], changed["trial"]) == (1, 0.5, 4)
    assert len(changed["messages"]) <= len(long["messages"])

    rows = report["rows"]
    assert [r["line"] for r in rows] == [1, 2]
    assert rows[0]["changed"] is False and rows[0]["strategies"] == []
    assert rows[1]["changed"] is True and rows[1]["tokens_after"] < 3000 < rows[1]["tokens_before"]
    assert report["conversations"] == 2 and report["changed"] == 1 and report["over_budget"] == 0
    assert report["before"]["messages"] == 2 + len(long["messages"])
    assert report["after"]["tokens"] == rows[0]["tokens_after"] + rows[1]["tokens_after"]
    assert report["strategies"] == {name: 1 for name in rows[1]["strategies"]}
    validate_dataset_report(report)


def test_a_conversation_compacts_exactly_as_the_same_messages_in_a_transcript_file(tmp_path: Path) -> None:
    messages = conversation(5)
    output, _ = run(dataset_bytes({"id": 7, "messages": messages}), max_tokens=2500)
    transcript = write_messages(tmp_path / "t.jsonl", messages)
    main = invoke(str(transcript), "--max-tokens", "2500", "--no-cache")
    assert main.exit_code == 0
    assert orjson.loads(output)["messages"] == read_messages(main.stdout)


def test_blank_lines_bom_and_crlf_are_tolerated_and_empty_conversations_kept() -> None:
    data = b"\xef\xbb\xbf" + b'{"id": 1, "messages": []}\r\n\r\n' + dataset_bytes({"id": 2, "messages": [msg("user", "x")]})
    output, report = run(data, max_tokens=100)
    assert output == b'{"id": 1, "messages": []}\n' + dataset_bytes({"id": 2, "messages": [msg("user", "x")]})
    assert [r["line"] for r in report["rows"]] == [1, 3]


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b'{"id": 2, "messages": [{"role": "user", "content": "hi"}, {"role": "robot"}]}',
         "set.jsonl:2: message 2: unknown role 'robot'"),
        (b'{"id": 2, "messages": [{"role": "user", "content": "hi"}, "hello"]}',
         "set.jsonl:2: message 2 is a string, not a message object"),
        (b'{"id": 2, "messages": [', "set.jsonl:2:24: malformed JSON"),
        (b'{"role": "user", "content": "a message, not a conversation"}', "set.jsonl:2: a single message, not a conversation"),
    ],
)
def test_a_bad_line_names_the_line_and_the_message(line: bytes, error: str) -> None:
    data = dataset_bytes({"id": 1, "messages": [msg("user", "ok")]}) + line + b"\n"
    with pytest.raises(InputError) as caught:
        run(data, max_tokens=100)
    assert str(caught.value).startswith(error)


def test_skip_invalid_keeps_a_bad_conversation_verbatim_and_lists_it() -> None:
    bad = b'{"id": 2, "messages": [{"role": "robot"}]}'
    data = dataset_bytes({"id": 1, "messages": [msg("user", "ok")]}) + bad + b"\n"
    counter, choice = shared_counter()
    output, report = compact_dataset_bytes(
        data, "set.jsonl", MemoryConfig().with_overrides(max_tokens=100), counter=MessageCounter(counter),
        encoder=choice, skip_invalid=True,
    )
    assert output.splitlines()[1] == bad
    assert report["skipped_lines"] == [{"line": 2, "error": "message 1: unknown role 'robot'"}]
    assert report["conversations"] == 1
    validate_dataset_report(report)


def test_the_public_tau_bench_dataset(realdata: Path) -> None:
    path = realdata / "openai-chat" / "tau-bench-airline-trajectories.jsonl"
    data = path.read_bytes()
    output, report = run(data, max_tokens=3000)
    before, after = data.splitlines(), output.splitlines()
    assert len(after) == len(before) == report["conversations"] == 200
    for row, old, new in zip(report["rows"], before, after):
        if not row["changed"]:
            assert new == old
        else:
            kept, compacted = orjson.loads(old), orjson.loads(new)
            assert list(compacted) == list(kept)
            assert {k: v for k, v in compacted.items() if k != "messages"} == {
                k: v for k, v in kept.items() if k != "messages"}
            assert len(compacted["messages"]) == row["messages_after"]
    assert report["over_budget"] == 0
    assert 0 < report["changed"] < 200
    assert report["before"]["messages"] == 5308
    validate_dataset_report(report)
