"""ShareGPT (core/formats/sharegpt.py): one turn per line, one conversation on one line, or a dataset of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from tests.helpers import check_bad_line, invoke, invoke_with_report
from tests.test_dataset import validate_dataset_report

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
TURNS = FIXTURES / "sharegpt_turns.jsonl"
CONVERSATION = FIXTURES / "sharegpt_conversation.jsonl"
DATASET = FIXTURES / "sharegpt_dataset.jsonl"  # three conversations: two that fit 1000 tokens, one that does not
GLAIVE = Path("sharegpt") / "glaive_toolcall_en_demo.json"


def read_json_lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def glaive(realdata: Path, tmp_path: Path) -> dict[str, Path]:
    """The real file (a JSON array) as the two JSONL shapes compact reads."""
    conversations = json.loads((realdata / GLAIVE).read_text(encoding="utf-8"))
    turns = tmp_path / "glaive_turns.jsonl"  # all 300 conversations' turns: one long conversation
    turns.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for c in conversations for t in c["conversations"]),
                     encoding="utf-8")
    first = tmp_path / "glaive_first.jsonl"
    first.write_text(json.dumps(conversations[0], ensure_ascii=False) + "\n", encoding="utf-8")
    several = tmp_path / "glaive_three.jsonl"
    several.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in conversations[:3]), encoding="utf-8")
    return {"turns": turns, "first": first, "several": several}


def pairing(messages: list[Any]) -> list[tuple[str, Any]]:
    """Roles and contents, calls and results named by their order (ShareGPT ids are made up from positions)."""
    ids: dict[str, int] = {}
    out: list[tuple[str, Any]] = []
    for message in messages:
        data = message.data if hasattr(message, "data") else message
        if data["role"] == "tool":
            out.append(("result", (ids.get(data["tool_call_id"], "orphan"), data["content"])))
        elif data.get("content") or not data.get("tool_calls"):
            out.append((data["role"], data.get("content")))
        for call in data.get("tool_calls") or []:  # ShareGPT writes an assistant's text, then its calls
            ids[call["id"]] = number = len(out)  # the latest call with an id (real logs reuse a few)
            out.append(("call", (number, call["function"]["name"],
                                 json.loads(call["function"]["arguments"]))))
    return out


@pytest.mark.parametrize("source", [TURNS, CONVERSATION], ids=["turns", "conversation"])
def test_fixture_round_trip(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    report = tmp_path / "r.json"
    result = invoke(str(source), "--from", "sharegpt", "--unlimited", "-o", str(out), "--report", str(report))
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == source.read_bytes()
    assert read_json_lines(out) == read_json_lines(source)


def test_reading_the_turns() -> None:
    messages = [m.data for m in formats.read(str(TURNS)).messages]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "assistant", "tool", "tool", "assistant",
                                            "user", "assistant", "tool", "tool", "assistant"]
    parallel = messages[3]["tool_calls"]
    assert [c["id"] for c in parallel] == ["call_4_1", "call_4_2"]
    assert [m["tool_call_id"] for m in messages[4:6]] == ["call_4_1", "call_4_2"]
    assert messages[5]["name"] == "get_weather" and "Porto" in messages[5]["content"]
    assert messages[9]["tool_call_id"] == "call_10"  # the call before it
    assert messages[10]["tool_call_id"] == "call_12"  # nothing waiting: an orphan with an id of its own
    assert "critic" not in json.dumps(messages)  # an unknown speaker is not a message


def test_top_level_system_is_the_first_message() -> None:
    decoded = formats.read(str(CONVERSATION), source_format="sharegpt")
    assert decoded.messages[0].data == {"role": "system", "content": json.loads(CONVERSATION.read_text())["system"]}
    assert pairing(decoded.messages) == pairing(formats.read(str(TURNS)).messages)


def test_real_file_round_trip(glaive: dict[str, Path], tmp_path: Path) -> None:
    for name in ("turns", "first"):
        out = tmp_path / f"{name}.out.jsonl"
        result = invoke(str(glaive[name]), "--unlimited", "-o", str(out), "--report", str(tmp_path / "r.json"))
        assert result.exit_code == 0, result.stderr
        assert out.read_bytes() == glaive[name].read_bytes()
        assert json.loads((tmp_path / "r.json").read_text())["format"]["input"] == "sharegpt"


def test_real_file_compaction(glaive: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    report_path = tmp_path / "r.json"
    result = invoke(str(glaive["turns"]), "--max-tokens", "8000", "-o", str(out), "--report", str(report_path))
    assert result.exit_code == 0, result.stderr
    report = json.loads(report_path.read_text())
    assert report["before"]["tokens"] > 8000 >= report["after"]["tokens"]
    assert report["removed"]
    turns = read_json_lines(out)
    assert all(set(t) == {"from", "value"} for t in turns)
    for before, after in zip([t["from"] for t in turns], [t["from"] for t in turns[1:]] + [None]):
        # Every call is answered right after it, and every observation answers a call.
        assert (before == "function_call") == (after == "observation")
    back = formats.read(str(out))
    calls = {c["id"] for m in back.messages for c in m.data.get("tool_calls") or []}
    assert calls == {m.data["tool_call_id"] for m in back.messages if m.role == "tool"}


@pytest.mark.parametrize("strategies", [("summarize:turns=3", "--summarizer", "extractive"), ("drop_turns",),
                                        ("clear_tool_results",), ("sliding_window:keep_messages=8",)])
def test_conversation_line_is_rebuilt(strategies: tuple[str, ...], glaive: dict[str, Path], tmp_path: Path) -> None:
    conversations = [c for path in (glaive["several"],) for c in read_json_lines(path)]
    big = {"conversations": [t for c in conversations * 8 for t in c["conversations"]], "tools": conversations[0]["tools"],
           "source": "glaive"}
    big["conversations"].insert(2, {"from": "critic", "value": "kept"})
    source = tmp_path / "big.jsonl"
    source.write_text(json.dumps(big) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["-s", strategies[0], *strategies[1:]]
    result = invoke(str(source), "--max-tokens", "600", *args, "-o", str(out), "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.stderr
    [written] = read_json_lines(out)
    assert list(written) == ["conversations", "tools", "source"] and written["tools"] == big["tools"]
    assert {"from": "critic", "value": "kept"} in written["conversations"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["after"]["tokens"] < report["before"]["tokens"] and report["removed"]
    froms = [t["from"] for t in written["conversations"] if t["from"] != "critic"]
    for before, after in zip(froms, froms[1:] + [None]):
        assert (before == "function_call") == (after == "observation")


def alternate(turns: list[dict[str, Any]]) -> None:
    """Every call is answered right after it, and every observation answers a call."""
    froms = [t["from"] for t in turns if t["from"] in ("human", "gpt", "function_call", "observation", "system")]
    for before, after in zip(froms, froms[1:] + [None]):
        assert (before == "function_call") == (after == "observation")


# -- several conversations: a dataset, each compacted on its own budget ---------------------


def test_several_conversations_are_a_dataset(glaive: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    report_path = tmp_path / "r.json"
    result = invoke(str(glaive["several"]), "--unlimited", "-o", str(out), "--report", str(report_path))
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == glaive["several"].read_bytes()
    report = json.loads(report_path.read_text())
    assert report["kind"] == "dataset" and [r["line"] for r in report["rows"]] == [1, 2, 3]
    validate_dataset_report(report)


@pytest.mark.parametrize("forced", [(), ("--from", "sharegpt"), ("--from", "dataset")], ids=["detected", "sharegpt", "dataset"])
def test_dataset_fixture_each_conversation_on_its_own_budget(forced: tuple[str, ...], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    report_path = tmp_path / "r.json"
    result = invoke(str(DATASET), *forced, "--max-tokens", "1000", "-o", str(out), "--report", str(report_path))
    assert result.exit_code == 0, result.stderr
    before, after = DATASET.read_bytes().splitlines(), out.read_bytes().splitlines()
    assert after[:2] == before[:2]  # the conversations that fit are written back byte for byte
    report = json.loads(report_path.read_text())
    validate_dataset_report(report)
    assert (report["kind"], report["conversations"], report["changed"]) == ("dataset", 3, 1)
    row = report["rows"][2]
    assert row["line"] == 3 and row["changed"] and row["tokens_after"] <= 1000 < row["tokens_before"]
    original, written = json.loads(before[2]), json.loads(after[2])
    assert list(written) == list(original)  # id, conversations, system, tools, score: in their order
    assert {k: v for k, v in written.items() if k != "conversations"} == {
        k: v for k, v in original.items() if k != "conversations"}
    assert len(written["conversations"]) < len(original["conversations"])
    alternate(written["conversations"])


def test_a_dataset_line_compacts_exactly_as_the_same_conversation_alone(tmp_path: Path) -> None:
    alone = tmp_path / "alone.jsonl"
    alone.write_bytes(DATASET.read_bytes().splitlines()[2] + b"\n")
    single = invoke(str(alone), "--max-tokens", "1000", "--no-cache")
    several = invoke(str(DATASET), "--max-tokens", "1000", "--no-cache")
    assert single.exit_code == several.exit_code == 0
    assert several.stdout.splitlines()[2] == single.stdout.splitlines()[0]


def test_a_dataset_may_mix_chat_and_sharegpt_conversations(tmp_path: Path) -> None:
    lines = DATASET.read_text(encoding="utf-8").splitlines()
    chat = json.dumps({"id": "chat", "messages": [{"role": "user", "content": "word " * 3000},
                                                  {"role": "assistant", "content": "ok"},
                                                  {"role": "user", "content": "and now?"}]})
    for order in ([chat, *lines], [*lines, chat]):
        mixed = tmp_path / "mixed.jsonl"
        mixed.write_text("\n".join(order) + "\n", encoding="utf-8")
        out = tmp_path / "out.jsonl"
        result = invoke(str(mixed), "--max-tokens", "1000", "-o", str(out), "--report", str(tmp_path / "r.json"))
        assert result.exit_code == 0, result.stderr
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["conversations"] == 4 and report["changed"] == 2
        written = read_json_lines(out)
        assert [("messages" in w, w["id"]) for w in written] == [("messages" in json.loads(o), json.loads(o)["id"])
                                                                 for o in order]


def test_a_turn_line_among_conversation_lines_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(DATASET.read_text(encoding="utf-8") + '{"from": "human", "value": "hi"}\n', encoding="utf-8")
    result = invoke(str(bad), "--max-tokens", "1000")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and f"{bad}:4:" in result.stderr


def test_a_bad_conversation_in_a_dataset_names_its_line(tmp_path: Path) -> None:
    lines = DATASET.read_text(encoding="utf-8").splitlines()
    lines.insert(1, json.dumps({"conversations": [{"from": "function_call", "value": "not json"}]}))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    failed, _, _ = check_bad_line(bad, 2, tmp_path, "--max-tokens", "1000")
    assert f"{bad}:2: turn 1: function_call value is not JSON" in failed.stderr


# -- JSON array files: the elements are the lines, written back as JSONL -------------------


def test_the_real_json_array_round_trip(realdata: Path, tmp_path: Path) -> None:
    source = realdata / GLAIVE
    out = tmp_path / "out.jsonl"
    report_path = tmp_path / "r.json"
    result = invoke(str(source), "--unlimited", "-o", str(out), "--report", str(report_path))
    assert result.exit_code == 0, result.stderr
    elements = json.loads(source.read_text(encoding="utf-8"))
    assert read_json_lines(out) == elements  # the same JSON values, one element per line
    report = json.loads(report_path.read_text())
    validate_dataset_report(report)
    assert (report["kind"], report["conversations"], report["changed"]) == ("dataset", 300, 0)
    assert [r["line"] for r in report["rows"]] == list(range(1, 301))


def test_the_real_json_array_compacted(realdata: Path, tmp_path: Path) -> None:
    source = realdata / GLAIVE
    out = tmp_path / "out.jsonl"
    report_path = tmp_path / "r.json"
    result = invoke(str(source), "--max-tokens", "200", "-o", str(out), "--report", str(report_path))
    assert result.exit_code == 0, result.stderr
    elements = json.loads(source.read_text(encoding="utf-8"))
    written = read_json_lines(out)
    report = json.loads(report_path.read_text())
    validate_dataset_report(report)
    assert len(written) == len(report["rows"]) == 300
    assert 0 < report["changed"] < 300 and report["after"]["tokens"] < report["before"]["tokens"]
    for row, before, after in zip(report["rows"], elements, written):
        assert row["changed"] == (after != before)
        if row["tokens_before"] <= 200:
            assert not row["changed"]
        else:
            assert row["changed"] or row["over_budget"]
        if row["changed"]:
            assert {k: v for k, v in after.items() if k != "conversations"} == {
                k: v for k, v in before.items() if k != "conversations"}
            assert len(after["conversations"]) == row["messages_after"] - bool(before.get("system"))
            alternate(after["conversations"])


def test_batch_compacts_sharegpt_datasets_and_arrays(realdata: Path, glaive: dict[str, Path], tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "glaive.json").write_bytes((realdata / GLAIVE).read_bytes())
    (inputs / "three.jsonl").write_bytes(glaive["several"].read_bytes())
    (inputs / "one.jsonl").write_bytes(glaive["first"].read_bytes())
    (inputs / "set.jsonl").write_bytes(DATASET.read_bytes())
    out = tmp_path / "out"
    names = ["glaive.json", "three.jsonl", "one.jsonl", "set.jsonl"]
    result = invoke("batch", *(str(inputs / n) for n in names), "--out", str(out), "--max-tokens", "200",
                    "--jobs", "1", "--report", str(tmp_path / "b.json"))
    assert result.exit_code == 0, result.output
    rows = {Path(r["input"]).name: r for r in json.loads((tmp_path / "b.json").read_text())["rows"]}
    assert {n: (rows[n]["kind"], rows[n]["conversations"]) for n in names} == {
        "glaive.json": ("dataset", 300), "three.jsonl": ("dataset", 3), "one.jsonl": ("transcript", 1),
        "set.jsonl": ("dataset", 3)}
    single = invoke(str(realdata / GLAIVE), "--max-tokens", "200", "--no-cache")
    # A JSON array comes back as JSONL (what `compact FILE` writes), so its output is named .jsonl.
    assert (out / "glaive.jsonl").read_text(encoding="utf-8") == single.stdout
    assert not (out / "glaive.json").exists()


def test_one_conversation_in_an_array_is_a_sharegpt_transcript(glaive: dict[str, Path], tmp_path: Path) -> None:
    array = tmp_path / "one.json"
    array.write_text(json.dumps(read_json_lines(glaive["first"]), indent=2), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = invoke(str(array), "--unlimited", "-o", str(out), "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["format"]["input"] == "sharegpt"
    assert read_json_lines(out) == read_json_lines(glaive["first"])


def test_an_array_of_chat_messages_is_one_transcript(tmp_path: Path) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "word " * 2000},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and now?"}]
    array = tmp_path / "chat.json"
    array.write_text(json.dumps(messages, indent=2), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    report = tmp_path / "r.json"
    assert invoke(str(array), "--unlimited", "-o", str(out), "--report", str(report)).exit_code == 0
    assert read_json_lines(out) == messages
    assert json.loads(report.read_text())["format"]["input"] == "openai"
    report_path = tmp_path / "r2.json"
    assert invoke(str(array), "--max-tokens", "200", "-o", str(out), "--report", str(report_path)).exit_code == 0
    assert read_json_lines(out) != messages and json.loads(report_path.read_text())["after"]["tokens"] < 200
    piped = invoke("-", "--unlimited", input=array.read_bytes())  # stdin too
    assert piped.exit_code == 0 and [json.loads(line) for line in piped.stdout.splitlines()] == messages


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[1, 2, 3]", "element 1 of this JSON array is a number"),
        ('[{"conversations": []}, "x"]', "element 2 of this JSON array is a string"),
        ("[]", "the JSON array is empty"),
        ('[\n  {"conversations": []},\n', "malformed JSON array"),
        ('[{"foo": 1}]', "element 1 of this JSON array is not a message in any format"),
    ],
)
def test_an_array_of_something_else_is_a_one_line_error(text: str, error: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text, encoding="utf-8")
    for forced in ((), ("--from", "sharegpt")):
        result = invoke(str(bad), *forced, "--max-tokens", "200")
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
        assert str(bad) in result.stderr and (error in result.stderr or forced), result.stderr


def test_conversion_to_openai_and_back(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    report = tmp_path / "r.json"
    assert invoke(str(TURNS), "--unlimited", "--to", "openai", "-o", str(chat), "--report", str(report)).exit_code == 0
    assert json.loads(report.read_text())["format"]["losses"] == [
        {"what": "ShareGPT turns of a speaker compact does not know (from)", "count": 1}]  # "critic"
    back = tmp_path / "back.jsonl"
    assert invoke(str(chat), "--unlimited", "--to", "sharegpt", "-o", str(back), "--report", str(report)).exit_code == 0
    losses = json.loads(report.read_text())["format"]["losses"]
    assert losses == [{"what": "tool call ids (ShareGPT pairs each observation with the call before it)", "count": 3}]
    [line] = read_json_lines(back)
    turns = [t for t in read_json_lines(TURNS) if t["from"] != "critic"]
    assert [(t["from"], json.loads(t["value"]) if t["from"] == "function_call" else t["value"])
            for t in line["conversations"]] == [(t["from"], json.loads(t["value"]) if t["from"] == "function_call"
                                                 else t["value"]) for t in turns]


def test_openai_to_sharegpt_and_back(realdata: Path, tmp_path: Path) -> None:
    source = realdata / "openai-chat" / "tau-bench-airline-task3.jsonl"
    out = tmp_path / "s.jsonl"
    assert invoke(str(source), "--unlimited", "--to", "sharegpt", "-o", str(out)).exit_code == 0
    back = formats.read(str(out))
    assert back.format == "sharegpt"
    original = read_json_lines(source)
    assert pairing(back.messages) == pairing([{**m, "content": m.get("content") or ""} if m["role"] != "assistant"
                                              else m for m in original])


def test_mixed_with_openai_chat_is_refused(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    lines = TURNS.read_text().splitlines()
    mixed.write_text("\n".join([*lines[:3], json.dumps({"role": "user", "content": "hi"}), *lines[3:]]) + "\n")
    result = invoke(str(mixed), "--max-tokens", "8000")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and f"{mixed}:4:" in result.stderr


def test_invalid_line(tmp_path: Path) -> None:
    lines = TURNS.read_text().splitlines()
    lines[6] = lines[6][:-2]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    check_bad_line(broken, 7, tmp_path, "--max-tokens", "8000")


def test_bad_function_call_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"from": "human", "value": "hi"}\n{"from": "function_call", "value": "get_weather(Lisbon)"}\n')
    result = invoke(str(bad), "--max-tokens", "8000")
    assert result.exit_code == 2
    assert f"{bad}:2: function_call value is not JSON" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("source", [TURNS, CONVERSATION], ids=["turns", "conversation"])
def test_orphan_observation_and_repair(source: Path, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    out = tmp_path / "out.jsonl"
    assert invoke(str(source), "--from", "sharegpt", "--unlimited", "-o", str(out), "--report", str(report)).exit_code == 0
    assert json.loads(report.read_text())["orphans"]["results"] == [12 if source == TURNS else 1]
    assert invoke(str(source), "--from", "sharegpt", "--unlimited", "--repair", "-o", str(out),
                  "--report", str(report)).exit_code == 0
    text = out.read_text()
    assert "an observation no call is waiting for" not in text
    assert "converted_amount" in text and "Porto" in text
    assert json.loads(report.read_text())["removed"][0]["reason"].startswith("orphan tool result")


@pytest.mark.parametrize("layout", ["conversation", "turns"])
def test_a_turn_with_an_unknown_speaker_is_counted_when_converting(layout: str, tmp_path: Path) -> None:
    # A speaker compact does not know ("robot") is kept in place when ShareGPT is written back; another
    # format has no place for it, and the report says it was left out rather than dropping it silently.
    turns = [{"from": "human", "value": "hi there"}, {"from": "robot", "value": "beep"}, {"from": "human", "value": "more"}]
    source = tmp_path / "speakers.jsonl"
    lines = [{"conversations": turns}] if layout == "conversation" else turns
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    same = invoke(str(source), "--unlimited")
    assert same.stdout == source.read_text()
    converted, report = invoke_with_report(str(source), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    assert "beep" not in converted.stdout
    assert report["format"]["losses"] == [{"what": "ShareGPT turns of a speaker compact does not know (from)", "count": 1}]


def test_a_clamped_call_counts_in_the_file_what_the_report_says(tmp_path: Path) -> None:
    """A function_call's arguments read as compact JSON, the layout a clamped call is written back in:
    read with spaces, the file held one token more than the report said."""
    source = tmp_path / "in.jsonl"
    turns = [{"from": "human", "value": "alpha"},
             {"from": "function_call", "value": json.dumps({"name": "read_file", "arguments": {"path": "x = 1 " * 50}})},
             {"from": "observation", "value": ""}]
    source.write_text(json.dumps({"conversations": turns}) + "\n", encoding="utf-8")
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    run = invoke(str(source), "--max-tokens", "150", "--no-cache", "-o", str(out), "--report", str(report))
    assert run.exit_code == 0, run.output
    after = json.loads(report.read_text())["after"]["tokens"]
    counted = invoke("count", str(out), "--from", "sharegpt", "--format", "json", "--no-cache")
    assert json.loads(counted.stdout)["before"]["tokens"] == after <= 150
