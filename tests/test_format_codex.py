"""Codex CLI rollouts (issue 5): response items compacted, other lines kept, event_msg copies removed with their text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from core.messages import SYSTEM_ROLES, is_summary
from tests.helpers import invoke

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
ROLLOUT = FIXTURES / "codex_rollout.jsonl"  # hand-made: parallel calls, reasoning, event copies, a compacted line
REAL = "codex-cli/simonw-codex-homelab-session-head.jsonl"
CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")
NOT_MESSAGES = ("session_meta", "turn_context")


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def items(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["payload"] for line in lines if line["type"] == "response_item"]


def calls(lines: list[dict[str, Any]]) -> list[str]:
    return [i["call_id"] for i in items(lines) if i["type"] in CALL_TYPES]


def outputs(lines: list[dict[str, Any]]) -> list[str]:
    return [i["call_id"] for i in items(lines) if i["type"].endswith("_call_output")]


def events(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line["payload"] for line in lines if line["type"] == "event_msg" and line["payload"]["type"] == kind]


def texts(lines: list[dict[str, Any]], role: str) -> set[str]:
    return {part["text"] for i in items(lines) if i["type"] == "message" and i["role"] == role for part in i["content"]}


def run(*args: str, tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    report = tmp_path / "report.json"
    result = invoke(*args, "--report", str(report))
    assert result.exit_code == 0, result.output
    return lines_of(result.stdout), json.loads(report.read_text())


def assert_loadable(out: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """Every call has its output and the reverse; the lines that are not messages are all still there."""
    assert sorted(calls(out)) == sorted(outputs(out))
    assert [line for line in out if line["type"] in NOT_MESSAGES] == [
        line for line in original if line["type"] in NOT_MESSAGES]
    # every token_count event is still there with its rate limits; its count, if gone, was of a changed history
    assert [e["rate_limits"] for e in events(out, "token_count")] == [e["rate_limits"] for e in events(original, "token_count")]
    assert all(e["info"] in (None, o["info"]) for e, o in zip(events(out, "token_count"), events(original, "token_count")))
    # every copy left in event_msg lines still has its message, with the same text
    assert {e["message"] for e in events(out, "user_message")} <= texts(out, "user")
    assert {e["message"] for e in events(out, "agent_message")} <= texts(out, "assistant")


@pytest.mark.parametrize("which", ["real", "fixture"])
def test_unlimited_round_trip_gives_every_line_back(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    path = request.getfixturevalue("realdata") / REAL if which == "real" else ROLLOUT
    report = tmp_path / "r.json"
    result = invoke(str(path), "--unlimited", "--report", str(report))
    assert result.exit_code == 0, result.output
    assert result.stdout.encode() == path.read_bytes()
    assert lines_of(result.stdout) == lines_of(path.read_text())
    assert json.loads(report.read_text())["format"]["input"] == "codex"


def test_real_rollout_compacts_within_its_invariants(realdata: Path, tmp_path: Path) -> None:
    path = realdata / REAL
    original = lines_of(path.read_text())
    out, report = run(str(path), "--max-tokens", "8000", tmp_path=tmp_path)
    assert_loadable(out, original)
    assert report["format"]["input"] == report["format"]["output"] == "codex"
    assert len(original) - len(out) == len([e for e in report["removed"] if e["action"] == "removed"])


def test_pseudo_user_messages_do_not_start_turns(realdata: Path) -> None:
    decoded = formats.read(str(realdata / REAL))
    assert [m.role for m in decoded.messages] == ["system", "system", "user"]  # AGENTS.md, environment, the prompt
    assert decoded.messages[2].extra["origin"] == (4, 5)  # the event_msg copy of the prompt belongs to it


def test_compaction_keeps_calls_with_outputs_and_drops_copies_of_cleared_outputs(tmp_path: Path) -> None:
    original = lines_of(ROLLOUT.read_text())
    out, report = run(str(ROLLOUT), "--max-tokens", "8000", tmp_path=tmp_path)
    assert report["after"]["tokens"] < 8000 < report["before"]["tokens"]
    assert_loadable(out, original)
    assert sorted(calls(out)) == sorted(calls(original))
    cleared = {i["call_id"] for i in items(out) if str(i.get("output", "")).startswith("[compact:")}
    assert cleared
    ended = {e["call_id"] for e in events(original, "exec_command_end")}
    assert {e["call_id"] for e in events(out, "exec_command_end")} == ended - cleared  # copies of cleared output gone
    assert ended & cleared  # (the fixture has such copies)
    kept_stamps = {line["timestamp"] for line in out}
    gone = [line for line in original if line["type"] != "event_msg" and line["timestamp"] not in kept_stamps]
    assert gone and all(line["payload"]["type"] == "reasoning" for line in gone)  # earlier turns' reasoning only
    kept_reasoning = {s["text"] for i in items(out) if i["type"] == "reasoning" for s in i["summary"]}
    assert {e["text"] for e in events(out, "agent_reasoning")} == kept_reasoning  # its event copies went with it


def test_removed_messages_take_their_event_copies_with_them(tmp_path: Path) -> None:
    original = lines_of(ROLLOUT.read_text())
    out, report = run(str(ROLLOUT), "--max-tokens", "3000", "--strategy", "drop_turns", tmp_path=tmp_path)
    assert_loadable(out, original)
    removed = [e for e in report["removed"] if e["action"] == "removed"]
    assert any(e["role"] == "user" for e in removed) and any(e["role"] == "assistant" for e in removed)
    gone_user = texts(original, "user") - texts(out, "user")
    gone_agent = texts(original, "assistant") - texts(out, "assistant")
    assert gone_user and gone_agent
    assert not gone_user & {e["message"] for e in events(out, "user_message")}
    assert not gone_agent & {e["message"] for e in events(out, "agent_message")}
    kept_reasoning = {s["text"] for i in items(out) if i["type"] == "reasoning" for s in i["summary"]}
    assert {e["text"] for e in events(out, "agent_reasoning")} == kept_reasoning
    assert events(out, "user_message")[-1]["message"].startswith("Great. Summarise")  # the current turn stays
    assert all(i in items(original) for i in items(out) if i["type"] == "reasoning")  # encrypted content intact


def test_sliding_window_keeps_the_typed_prompt_and_the_agents_instructions(tmp_path: Path) -> None:
    original = lines_of(ROLLOUT.read_text())
    out, _ = run(str(ROLLOUT), "--max-tokens", "2000", "--strategy", "sliding_window:keep_messages=4",
                 tmp_path=tmp_path)
    assert_loadable(out, original)
    user_texts = texts(out, "user")
    assert any(t.startswith("# AGENTS.md instructions") for t in user_texts)  # pinned: the first system message
    assert any(t.startswith("Great. Summarise") for t in user_texts)  # pinned: the last typed prompt


def test_compacted_line_is_a_summary_folded_into_the_new_one(tmp_path: Path) -> None:
    decoded = formats.read(str(ROLLOUT))
    summaries = [m for m in decoded.messages if is_summary(m)]
    assert len(summaries) == 1 and summaries[0].line == 25
    original = lines_of(ROLLOUT.read_text())
    out, _ = run(str(ROLLOUT), "--max-tokens", "3000", "--summarizer", "extractive",
                      "--strategy", "summarize:turns=2", tmp_path=tmp_path)
    assert_loadable(out, original)
    compacted = [line for line in out if line["type"] == "compacted"]
    assert len(compacted) == 1 and compacted[0]["payload"]["message"].startswith("CUCA summary:")
    assert not any(i.get("role") == "system" for i in items(out))  # folded, not added


def test_added_summary_is_a_response_item_with_its_neighbours_timestamp(tmp_path: Path) -> None:
    source = tmp_path / "rollout.jsonl"
    source.write_text("".join(line + "\n" for line in ROLLOUT.read_text().splitlines() if '"compacted"' not in line))
    original = lines_of(source.read_text())
    out, _ = run(str(source), "--max-tokens", "3000", "--summarizer", "extractive",
                 "--strategy", "summarize:turns=2", tmp_path=tmp_path)
    assert_loadable(out, original)
    at = next(n for n, line in enumerate(out) if line["type"] == "response_item" and line["payload"].get("role") == "developer")
    added = out[at]
    assert added["payload"]["type"] == "message"
    assert added["payload"]["content"][0]["text"].startswith("CUCA summary:")
    assert added["timestamp"] == out[at + 1]["timestamp"]
    again = tmp_path / "again.jsonl"
    again.write_text("".join(json.dumps(line) + "\n" for line in out))
    assert [is_summary(m) for m in formats.read(str(again)).messages].count(True) == 1


def test_token_counts_after_the_first_change_lose_their_count(tmp_path: Path) -> None:
    """Codex sizes a resumed history from the newest token_count and compacts it again when that is over its
    limit: a count of the history before compaction must not survive in the compacted rollout."""
    original = lines_of(ROLLOUT.read_text())
    out, _ = run(str(ROLLOUT), "--max-tokens", "8000", tmp_path=tmp_path)
    first_change = next(n for n, (a, b) in enumerate(zip(out, original)) if a != b)
    counts = [(n, line["payload"]["info"]) for n, line in enumerate(out)
              if line["type"] == "event_msg" and line["payload"]["type"] == "token_count"]
    assert counts and all(n > first_change and info is None for n, info in counts)
    # (with nothing changed, as in the --unlimited round trip, every count stays)


def test_messages_compact_writes_are_shaped_as_codex_resumes_them(tmp_path: Path) -> None:
    """Codex leaves a system message, and a message whose content is a bare string, out of the history it
    sends on resume: a summary is a developer message, an assistant's text a list of output_text parts."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": "a.txt and b.txt."}]))
    written, _ = run(str(chat), "--unlimited", "--to", "codex", tmp_path=tmp_path)
    assert [(i["role"], i["content"]) for i in items(written)] == [
        ("developer", [{"type": "input_text", "text": "You are terse."}]),
        ("user", [{"type": "input_text", "text": "List the files."}]),
        ("assistant", [{"type": "output_text", "text": "a.txt and b.txt."}])]


def test_orphans_are_reported_and_repaired_by_call_id(tmp_path: Path) -> None:
    lines = ROLLOUT.read_text().splitlines()
    first_output = next(n for n, line in enumerate(lines) if '"function_call_output"' in line)
    missing = json.loads(lines[first_output])["payload"]["call_id"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(line + "\n" for n, line in enumerate(lines) if n != first_output))
    counted = json.loads(invoke("count", str(broken), "--format", "json").stdout)
    assert [c["id"] for c in counted["orphans"]["calls"]] == [missing]
    out, _ = run(str(broken), "--unlimited", "--repair", tmp_path=tmp_path)
    assert missing not in calls(out)
    assert_loadable(out, lines_of(broken.read_text()))
    assert len(out) == len(lines) - 2


def test_conversion_to_openai_and_back_keeps_the_messages(tmp_path: Path) -> None:
    chat_lines, report = run(str(ROLLOUT), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    losses = {loss["what"]: loss["count"] for loss in report["format"]["losses"]}
    reasoning = [i for i in items(lines_of(ROLLOUT.read_text())) if i["type"] == "reasoning"]
    assert losses["reasoning items (encrypted content included)"] == len(reasoning) > 0
    assert losses["Codex CLI rollout lines that are not messages"] > 0
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in chat_lines))
    back, _ = run(str(chat), "--unlimited", "--to", "codex", tmp_path=tmp_path)
    assert back[0]["type"] == "session_meta"
    rollout = tmp_path / "back.jsonl"
    rollout.write_text("".join(json.dumps(line) + "\n" for line in back))
    before = [_essentials(m.data) for m in formats.read(str(ROLLOUT)).messages]
    after = [_essentials(m.data) for m in formats.read(str(rollout)).messages]
    assert after == before


def _essentials(data: dict[str, Any]) -> tuple[Any, ...]:
    content = data.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    text = [p["text"] for p in parts if p.get("type") == "text"]
    calls_ = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in data.get("tool_calls", [])]
    role = "system" if data["role"] in SYSTEM_ROLES else data["role"]  # (Codex's developer messages are system ones)
    return role, text, calls_, data.get("tool_call_id")


def test_detected_without_from_and_invalid_lines(tmp_path: Path) -> None:
    assert formats.sniff(str(ROLLOUT))[2].name == "codex"
    lines = ROLLOUT.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:6], '{"timestamp": "2025-11-03T09:00:09.000Z", "type": "event_msg", "payload": {', *lines[6:]]) + "\n")
    result = invoke(str(bad), "--unlimited")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"compact: error: {bad}:7:") and len(result.stderr.splitlines()) == 1
    report = tmp_path / "r.json"
    kept = invoke(str(bad), "--unlimited", "--skip-invalid", "--report", str(report))
    assert kept.exit_code == 0 and kept.stdout == ROLLOUT.read_text()
    assert [s["line"] for s in json.loads(report.read_text())["skipped_lines"]] == [7]


@pytest.mark.parametrize("target", ["responses", "codex"])
def test_a_custom_tool_call_stays_custom_when_written_as_responses_items(target: str, realdata: Path,
                                                                        tmp_path: Path) -> None:
    # Codex's apply_patch is a freeform tool: its calls and outputs are custom_tool_call items, and a
    # function_call holding a raw patch as "arguments" would not replay against that tool.
    out = tmp_path / "out.jsonl"
    source = realdata / "codex-cli/codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out)).exit_code == 0
    items = [json.loads(line) for line in out.read_text().splitlines()]
    items = [item.get("payload", item) if target == "codex" else item for item in items]
    kinds = [item.get("type") for item in items]
    assert kinds.count("custom_tool_call") == 11 and kinds.count("custom_tool_call_output") == 11
    call = next(item for item in items if item.get("type") == "custom_tool_call")
    assert call["name"] == "apply_patch" and call["input"].startswith("*** Begin Patch")
    assert "arguments" not in call
