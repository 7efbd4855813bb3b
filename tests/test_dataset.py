"""Conversation-per-line datasets (core.batch.dataset_run): detection, per-conversation compaction, the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.batch.dataset_run import (
    DATASET,
    TRANSCRIPT,
    compact_dataset_bytes,
    looks_like_dataset,
)
from core.config import MemoryConfig
from core.counting.counter import MessageCounter
from core.errors import InputError
from core.io.schema_loader import load_schema
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
        (b'{"conversations": [{"from": "human", "value": "hi"}], "tools": "[]"}', True),  # ShareGPT
        (b'{"conversations": "not a list"}', False),
        (b'{"from": "human", "value": "hi"}', False),  # one ShareGPT turn
    ],
)
def test_a_dataset_line_is_an_object_with_a_messages_list_and_no_role(line: bytes, expected: bool) -> None:
    assert looks_like_dataset(line) is expected


def detected(path: str, stdin: bytes | None = None) -> str:
    """What the formats detector, which every command uses, makes of a file or of stdin."""
    import io

    from core import formats

    try:
        codec = formats.sniff(path, stdin=None if stdin is None else io.BytesIO(stdin))[2]
    except InputError:
        return TRANSCRIPT  # the transcript reader says what is wrong with it
    return DATASET if codec.name == formats.DATASET else TRANSCRIPT


def sniff_file(path: str) -> str:
    return detected(path)


def sniff_bytes(data: bytes) -> str:
    return detected("-", data)


def test_detection_reads_the_first_non_blank_line(tmp_path: Path, samples: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n  \n" + dataset_bytes({"id": 1, "messages": []}))
    assert sniff_file(str(path)) == DATASET
    assert sniff_file(str(samples / "agent_session.jsonl")) == TRANSCRIPT
    assert sniff_bytes(b"") == TRANSCRIPT


SHAREGPT = {"id": "s", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
CHAT = {"id": "c", "messages": [msg("user", "hi")]}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (dataset_bytes(SHAREGPT), TRANSCRIPT),  # one ShareGPT conversation is one transcript
        (dataset_bytes(SHAREGPT, SHAREGPT), DATASET),
        (b"\n" + dataset_bytes(SHAREGPT) + b"\n\n" + dataset_bytes(CHAT), DATASET),  # the two shapes mixed
        (dataset_bytes(SHAREGPT, {"from": "human", "value": "hi"}), TRANSCRIPT),  # the reader refuses it
        (json.dumps([SHAREGPT, SHAREGPT], indent=2).encode(), DATASET),  # a JSON array of conversations
        (b"\xef\xbb\xbf" + json.dumps([SHAREGPT, CHAT]).encode(), DATASET),
        (json.dumps([SHAREGPT], indent=2).encode(), TRANSCRIPT),
        (json.dumps([CHAT], indent=2).encode(), DATASET),  # as the same line in a JSONL file
        (json.dumps([msg("user", "hi")], indent=2).encode(), TRANSCRIPT),  # an array of messages
        (b"[1, 2]", TRANSCRIPT),  # the reader says what is wrong with it
        (b"[\n  {", TRANSCRIPT),
    ],
)
def test_detection_of_sharegpt_datasets_and_json_arrays(data: bytes, expected: str, tmp_path: Path) -> None:
    assert sniff_bytes(data) == expected
    path = tmp_path / "set"
    path.write_bytes(data)
    assert sniff_file(str(path)) == expected


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


def test_skip_invalid_leaves_a_bad_conversation_out_and_lists_it() -> None:
    bad = b'{"id": 2, "messages": [{"role": "robot"}]}'
    data = dataset_bytes({"id": 1, "messages": [msg("user", "ok")]}) + bad + b"\n"
    counter, choice = shared_counter()
    output, report = compact_dataset_bytes(
        data, "set.jsonl", MemoryConfig().with_overrides(max_tokens=100), counter=MessageCounter(counter),
        encoder=choice, skip_invalid=True,
    )
    assert len(output.splitlines()) == 1 and bad not in output
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


# -- ShareGPT conversations and JSON arrays ------------------------------------------------


def sharegpt_conversation(turns: int) -> dict[str, Any]:
    """The ``conversation`` above in ShareGPT turns, with a top-level system and other fields."""
    out: list[dict[str, Any]] = []
    for turn in range(turns):
        out.append({"from": "human", "value": f"step {turn}: look at file {turn}"})
        out.append({"from": "function_call", "value": json.dumps({"name": "read_file", "arguments": {"path": f"f{turn}.py"}})})
        out.append({"from": "observation", "value": f"line {turn}\n" * 2000})
        out.append({"from": "gpt", "value": f"done with step {turn}"})
    return {"id": 9, "conversations": out, "system": "You are a careful agent.", "tools": "[]", "reward": 1.0}


def test_a_sharegpt_line_is_compacted_and_written_back_as_sharegpt() -> None:
    small = {"id": 1, "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    long = sharegpt_conversation(6)
    data = dataset_bytes(small, long, {"task_id": 3, "messages": conversation(6)})
    output, report = run(data, max_tokens=3000)
    lines = output.splitlines()
    assert lines[0] == data.splitlines()[0]
    written = orjson.loads(lines[1])
    assert list(written) == list(long) and written["tools"] == "[]" and written["reward"] == 1.0
    assert all(set(turn) == {"from", "value"} for turn in written["conversations"])
    assert written["conversations"] != long["conversations"]
    assert "messages" in orjson.loads(lines[2])  # a chat conversation stays one
    rows = report["rows"]
    assert [(r["line"], r["changed"]) for r in rows] == [(1, False), (2, True), (3, True)]
    assert rows[1]["tokens_after"] < 3000 < rows[1]["tokens_before"]
    assert rows[1]["messages_before"] == len(long["conversations"]) + 1  # the system prompt is a message too
    validate_dataset_report(report)


def test_sharegpt_and_chat_conversations_of_the_same_talk_compact_alike() -> None:
    _, report = run(dataset_bytes(sharegpt_conversation(5), {"messages": conversation(5)}), max_tokens=2500)
    sharegpt_row, chat_row = report["rows"]
    assert sharegpt_row["messages_before"] == chat_row["messages_before"]
    assert sharegpt_row["messages_after"] == chat_row["messages_after"]
    assert sharegpt_row["strategies"] == chat_row["strategies"]


def test_a_bad_sharegpt_line_names_the_line_or_is_skipped() -> None:
    bad = b'{"conversations": [{"from": "human"}]}'
    data = dataset_bytes({"messages": [msg("user", "ok")]}) + bad + b"\n"
    with pytest.raises(InputError) as caught:
        run(data, max_tokens=100)
    assert str(caught.value).startswith("set.jsonl:2: turn 1 is not a ShareGPT turn")
    counter, choice = shared_counter()
    output, report = compact_dataset_bytes(
        data, "set.jsonl", MemoryConfig().with_overrides(max_tokens=100), counter=MessageCounter(counter),
        encoder=choice, skip_invalid=True,
    )
    assert len(output.splitlines()) == 1 and bad not in output
    assert [s["line"] for s in report["skipped_lines"]] == [2]


def test_a_json_array_dataset_is_written_back_as_jsonl_one_element_per_line() -> None:
    elements = [{"id": 1, "messages": [msg("user", "hi")]}, sharegpt_conversation(6)]
    data = b"\xef\xbb\xbf" + json.dumps(elements, indent=2).encode()
    output, report = run(data, max_tokens=3000)
    lines = output.splitlines()
    assert len(lines) == 2 and orjson.loads(lines[0]) == elements[0]
    assert [(r["line"], r["changed"]) for r in report["rows"]] == [(1, False), (2, True)]
    validate_dataset_report(report)
    unlimited, _ = run(data, max_tokens=10 ** 9)
    assert [orjson.loads(line) for line in unlimited.splitlines()] == elements


@pytest.mark.parametrize(("data", "error"), [
    (b'[\n {"messages": []},\n 7\n]', "set.jsonl: element 2 of this JSON array is a number"),
    (b'[\n {"messages": []},\n', "set.jsonl:3:1: malformed JSON array"),
    (b'[{"role": "user", "content": "hi"}]', "set.jsonl:1: a single message, not a conversation"),
])
def test_a_bad_json_array_dataset_is_an_error_naming_the_file(data: bytes, error: str) -> None:
    with pytest.raises(InputError) as caught:
        run(data, max_tokens=100)
    assert str(caught.value).startswith(error)


def test_a_failed_model_summary_in_a_dataset_is_exit_4_and_named_per_conversation(
    chat_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for one transcript: the dataset is written, but a summarizer that failed is never a silent 0."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dataset")
    small = {"task_id": 0, "messages": [msg("system", "s"), msg("user", "hi")]}
    long = {"task_id": 1, "messages": conversation(6)}
    source = tmp_path / "set.jsonl"
    source.write_bytes(dataset_bytes(small, long))
    config = tmp_path / "c.toml"
    config.write_text("summarizer_retries = 0\n")
    out, report_path = tmp_path / "out.jsonl", tmp_path / "r.json"
    args = [str(source), "-o", str(out), "--report", str(report_path), "--preset", "seed", "--max-messages", "6",
            "--strategy", "summarize", "--summarizer", "openai", "--summarizer-url", chat_server.url,
            "--summarizer-model", "test-model", "--config", str(config), "-q"]
    chat_server.fail(500, '{"error": "overloaded"}')
    failed = invoke(*args)
    assert failed.exit_code == 4, failed.output
    assert "1 of 2 conversations" in failed.stderr and "line 2" in failed.stderr and "Traceback" not in failed.stderr
    report = json.loads(report_path.read_text())
    validate_dataset_report(report)
    assert [r["summary_failed"] for r in report["rows"]] == [False, True] and report["summary_failed"] == 1
    assert len(out.read_bytes().splitlines()) == 2  # written whole all the same

    chat_server.reply('<summary topic="files" compressed-from-turns="1-3">Read f0.py to f2.py.</summary>\n'
                      "## Preserved Kinds: technical_detail")
    again = invoke(*args)
    assert again.exit_code == 0, again.output
    assert json.loads(report_path.read_text())["summary_failed"] == 0
    assert "Read f0.py to f2.py." in out.read_text()


def test_to_dataset_is_a_one_line_refusal_for_one_conversation_and_no_conversion_for_a_dataset(
        realdata: Path, tmp_path: Path) -> None:
    """--to dataset was a traceback (NotImplementedError) for a transcript and for a dataset alike."""
    one = invoke(str(realdata / "openai-chat" / "tau-bench-airline-task3.jsonl"), "--max-tokens", "2000",
                 "--to", "dataset", "-o", str(tmp_path / "one.jsonl"))
    assert one.exit_code == 2, one.output
    assert "--to dataset" in one.output and not (tmp_path / "one.jsonl").exists()
    many = invoke(str(realdata / "openai-chat" / "tau-bench-airline-trajectories.jsonl"), "--max-tokens", "2000",
                  "--to", "dataset", "-o", str(tmp_path / "many.jsonl"))
    plain = invoke(str(realdata / "openai-chat" / "tau-bench-airline-trajectories.jsonl"), "--max-tokens", "2000",
                   "-o", str(tmp_path / "plain.jsonl"))
    assert many.exit_code == plain.exit_code == 0, many.output
    assert (tmp_path / "many.jsonl").read_bytes() == (tmp_path / "plain.jsonl").read_bytes()
