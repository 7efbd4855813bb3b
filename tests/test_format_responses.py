"""OpenAI Responses items (issue 5): read, compacted and written back as Responses items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from core.messages import is_summary
from tests.helpers import invoke

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
ITEMS = FIXTURES / "responses_items.jsonl"  # every item kind, unknown fields and types included
SESSION = FIXTURES / "responses_session.jsonl"  # a long agent session (the Codex fixture's items)

CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")


def items_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def call_ids_of(items: list[dict[str, Any]]) -> list[str]:
    return [i["call_id"] for i in items if i.get("type") in CALL_TYPES]


def output_ids_of(items: list[dict[str, Any]]) -> list[str]:
    return [i.get("call_id", i.get("id")) for i in items if str(i.get("type", "")).endswith("_call_output")]


def run(*args: str, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    report = tmp_path / "report.json"
    result = invoke(*args, "--report", str(report))
    assert result.exit_code == 0, result.output
    return result, json.loads(report.read_text())


@pytest.mark.parametrize("path", [ITEMS, SESSION], ids=lambda p: p.name)
def test_unlimited_round_trip_gives_every_line_back(path: Path, tmp_path: Path) -> None:
    result, report = run(str(path), "--unlimited", tmp_path=tmp_path)
    assert result.stdout.encode() == path.read_bytes()
    assert items_of(result.stdout) == items_of(path.read_text())
    assert report["format"] == {"input": "responses", "output": "responses", "losses": []}


def test_items_become_canonical_messages() -> None:
    decoded = formats.read(str(ITEMS))
    assert decoded.format == "responses"
    roles = [m.role for m in decoded.messages]
    assert roles == ["developer", "user", "assistant", "tool", "tool", "assistant", "user",
                     "assistant", "tool", "tool", "assistant", "system", "user"]
    first_reply = decoded.messages[2]
    assert first_reply.extra["origin"] == (3, 4, 5, 6, 7)  # reasoning, web search, message, two parallel calls
    reasoning, search, text = first_reply.data["content"]
    source = items_of(ITEMS.read_text())
    assert reasoning == source[2]  # verbatim: encrypted content and unknown fields included
    assert search == source[3]
    assert text == {"type": "text", "text": source[4]["content"][0]["text"]}
    assert [c["id"] for c in first_reply.data["tool_calls"]] == ["call_paris_A1b2C3", "call_berlin_D4e5F6"]
    tools = [m.data for m in decoded.messages if m.role == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["call_paris_A1b2C3", "call_berlin_D4e5F6",
                                                  "call_patch_G7h8", "call_shell_J9k0"]
    patch_call = decoded.messages[7].data["tool_calls"][0]["function"]
    assert patch_call == {"name": "apply_patch", "arguments": source[13]["input"]}
    owned = {n for m in decoded.messages for n in m.extra["origin"]}
    assert {8, 18} - owned == {8, 18}  # item_reference and the unknown type belong to no message


def test_compaction_keeps_every_call_with_its_output(tmp_path: Path) -> None:
    original = items_of(SESSION.read_text())
    result, report = run(str(SESSION), "--max-tokens", "8000", tmp_path=tmp_path)
    out = items_of(result.stdout)
    assert report["after"]["tokens"] < 8000 < report["before"]["tokens"]
    assert sorted(call_ids_of(out)) == sorted(output_ids_of(out)) == sorted(call_ids_of(original))
    cleared = [i for i in out if str(i.get("output", "")).startswith("[compact: tool result")]
    clamped = [i for i in out if "tokens cut …]" in str(i.get("output", ""))]
    # The sed read of reserve.py is stale: the raw apply_patch after it changed that file.
    stale = [i for i in out if str(i.get("output", "")).startswith("[compact: stale shell of src/inventory/reserve.py")]
    rewritten = {e["line"] for e in report["removed"] if e["action"] == "rewritten" and e["role"] == "tool"}
    assert cleared and stale and len(cleared) + len(clamped) + len(stale) == len(rewritten)
    assert all(isinstance(i["output"], str) for i in cleared)  # still the native shape: an output string


def test_dropped_turns_take_their_calls_outputs_and_reasoning(tmp_path: Path) -> None:
    original = items_of(SESSION.read_text())
    result, report = run(str(SESSION), "--max-tokens", "3000", "--strategy", "drop_turns", tmp_path=tmp_path)
    out = items_of(result.stdout)
    assert sorted(call_ids_of(out)) == sorted(output_ids_of(out))
    assert len(call_ids_of(out)) < len(call_ids_of(original))
    assert out[-1] == original[-1]  # the current turn stays
    removed_lines = {e["line"] for e in report["removed"] if e["action"] == "removed"}
    assert removed_lines and all(original[n - 1] not in out for n in removed_lines)
    kept_reasoning = [i for i in out if i["type"] == "reasoning"]
    assert all(i in original for i in kept_reasoning)  # encrypted content untouched


def test_rewritten_assistant_keeps_its_reasoning_and_fields() -> None:
    decoded = formats.read(str(ITEMS))
    result = list(decoded.messages)
    reply = result[2]
    content = [dict(p) for p in reply.data["content"]]
    content[2]["text"] = "shortened"
    data = {**reply.data, "content": content, "tool_calls": reply.data["tool_calls"][:1]}
    result[2] = reply.rewritten(data)
    result.pop(4)  # the Berlin output goes with its call
    out = items_of(b"".join(formats.write(decoded, result)).decode())
    source = items_of(ITEMS.read_text())
    assert out[2:4] == source[2:4]  # reasoning and web search as they were
    assert out[4] == {**source[4], "content": [{**source[4]["content"][0], "text": "shortened"}]}
    assert out[5] == source[5] and source[6] not in out and source[9] not in out
    assert len(out) == len(source) - 2


def test_orphans_are_reported_and_repaired_by_call_id(tmp_path: Path) -> None:
    lines = ITEMS.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    stray = json.dumps({"type": "function_call_output", "call_id": "call_gone_Z9", "output": "late"})
    broken.write_text("\n".join([*lines[:9], stray, *lines[10:]]) + "\n")  # the Berlin output replaced
    counted = json.loads(invoke("count", str(broken), "--format", "json").stdout)
    assert counted["orphans"] == {"results": [10], "calls": [{"line": 3, "id": "call_berlin_D4e5F6"}]}
    result, _ = run(str(broken), "--unlimited", "--repair", tmp_path=tmp_path)
    out = items_of(result.stdout)
    assert "call_berlin_D4e5F6" not in call_ids_of(out) and "call_gone_Z9" not in output_ids_of(out)
    assert sorted(call_ids_of(out)) == sorted(output_ids_of(out))
    assert len(out) == len(lines) - 2


def test_summary_is_a_system_message_item_recognised_on_a_rerun(tmp_path: Path) -> None:
    args = ("--max-tokens", "3000", "--summarizer", "extractive", "--strategy", "summarize:turns=4")
    result, _ = run(str(SESSION), *args, tmp_path=tmp_path)
    out = items_of(result.stdout)
    summaries = [i for i in out if i.get("role") == "system"]
    assert len(summaries) == 1
    assert summaries[0]["type"] == "message"
    assert summaries[0]["content"][0]["type"] == "input_text"
    assert summaries[0]["content"][0]["text"].startswith("CUCA summary:")
    assert sorted(call_ids_of(out)) == sorted(output_ids_of(out))
    again = tmp_path / "again.jsonl"
    again.write_text(result.stdout)
    decoded = formats.read(str(again))
    assert [is_summary(m) for m in decoded.messages].count(True) == 1


def test_conversion_to_openai_and_back_keeps_the_messages(tmp_path: Path) -> None:
    as_chat, report = run(str(ITEMS), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    assert {"what": "reasoning items (encrypted content included)", "count": 2} in report["format"]["losses"]
    chat = tmp_path / "chat.jsonl"
    chat.write_text(as_chat.stdout)
    back, _ = run(str(chat), "--unlimited", "--to", "responses", tmp_path=tmp_path)
    again = tmp_path / "again.jsonl"
    again.write_text(back.stdout)
    before = [_essentials(m.data) for m in formats.read(str(ITEMS)).messages]
    after = [_essentials(m.data) for m in formats.read(str(again)).messages]
    assert after == before


def _essentials(data: dict[str, Any]) -> tuple[Any, ...]:
    content = data.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    kept = [p for p in parts if p.get("type") not in ("reasoning", "web_search_call")]  # what chat cannot carry
    if data["role"] == "assistant" and kept:  # assistant history is written as one text (a refusal's too)
        kept = [{"type": "text", "text": "\n\n".join(p.get("text") or p.get("refusal") for p in kept)}]
    calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in data.get("tool_calls", [])]
    return data["role"], kept, calls, data.get("tool_call_id")


def test_detected_without_from_and_mixed_files_are_refused(tmp_path: Path) -> None:
    assert formats.sniff(str(ITEMS))[2].name == "responses"
    chat_only = tmp_path / "chat.jsonl"
    chat_only.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    assert formats.sniff(str(chat_only))[2].name == "openai"  # short-form lines alone are plain chat
    mixed = tmp_path / "mixed.jsonl"
    codex_line = {"timestamp": "2025-11-03T09:00:00.000Z", "type": "response_item",
                  "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
    mixed.write_text(ITEMS.read_text() + json.dumps(codex_line) + "\n")
    result = invoke(str(mixed), "--unlimited")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert f"{mixed}:22:" in result.stderr and "Codex CLI rollout" in result.stderr


def test_an_invalid_line_stops_the_run_or_is_left_out(tmp_path: Path) -> None:
    lines = ITEMS.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:4], '{"type": "message", "role": "assistant", "content": [', *lines[4:]]) + "\n")
    result = invoke(str(bad), "--unlimited")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"compact: error: {bad}:5:") and len(result.stderr.splitlines()) == 1
    kept, report = run(str(bad), "--unlimited", "--skip-invalid", tmp_path=tmp_path)
    assert kept.stdout == ITEMS.read_text()
    assert [s["line"] for s in report["skipped_lines"]] == [5]


def test_an_output_without_call_id_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(ITEMS.read_text() + '{"type": "function_call_output", "output": "lost"}\n')
    result = invoke(str(bad), "--unlimited")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"compact: error: {bad}:22: a function_call_output item needs the call_id")
    kept, report = run(str(bad), "--unlimited", "--skip-invalid", tmp_path=tmp_path)
    assert kept.stdout == ITEMS.read_text()
    assert [s["line"] for s in report["skipped_lines"]] == [22]


def test_reading_starts_at_the_newest_compaction_item() -> None:
    from core.messages import is_provider_record

    decoded = formats.read(str(Path(__file__).parent / "fixtures/provider_compaction/responses_compaction.jsonl"))
    assert decoded.messages[0].line == 7 and is_provider_record(decoded.messages[0])
    assert [m.role for m in decoded.messages] == ["system", "user", "assistant", "tool", "assistant"]

