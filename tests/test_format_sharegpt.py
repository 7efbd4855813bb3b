"""ShareGPT (core/formats/sharegpt.py): one turn per line, or one conversation on one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from tests.helpers import invoke

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
TURNS = FIXTURES / "sharegpt_turns.jsonl"
CONVERSATION = FIXTURES / "sharegpt_conversation.jsonl"
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


def test_several_conversations_are_refused(glaive: dict[str, Path]) -> None:
    result = invoke(str(glaive["several"]), "--max-tokens", "8000")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{glaive['several']}:2: this file holds 3 ShareGPT conversations" in result.stderr


def test_conversion_to_openai_and_back(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    report = tmp_path / "r.json"
    assert invoke(str(TURNS), "--unlimited", "--to", "openai", "-o", str(chat), "--report", str(report)).exit_code == 0
    assert json.loads(report.read_text())["format"]["losses"] == [
        {"what": "ShareGPT lines that are not messages", "count": 1}]  # the unknown speaker
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
    result = invoke(str(broken), "--max-tokens", "8000")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and f"{broken}:7:" in result.stderr
    out = tmp_path / "out.jsonl"
    report = tmp_path / "r.json"
    result = invoke(str(broken), "--unlimited", "--skip-invalid", "-o", str(out), "--report", str(report))
    assert result.exit_code == 0, result.stderr
    assert out.read_text() == broken.read_text()
    assert [s["line"] for s in json.loads(report.read_text())["skipped_lines"]] == [7]


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
