"""Claude Code session logs (issue 5): read as canonical messages, compacted, written back as a loadable session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from core.messages import is_summary
from tests.helpers import check_bad_line, invoke, invoke_with_report, read_messages

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
SESSION = FIXTURES / "claude_code_session.jsonl"  # every line kind, a multi-line reply, harness text, a summary
SIDECHAIN = FIXTURES / "claude_code_sidechain.jsonl"  # a subagent file; its first result answers a parent call
RESUMED = FIXTURES / "claude_code_resumed.jsonl"  # hangs from a parent session line not in the file
ORPHANS = FIXTURES / "claude_code_orphans.jsonl"  # a result without a call, a call without a result
REAL = ["claude-code/cctrace-phase0-investigation.jsonl", "claude-code/claude-reliability-python-to-rust-port.jsonl",
        "claude-code/claude-reliability-coverage-test-fix.jsonl",
        "claude-code/claude-reliability-stop-hook-reflection-first-stop.jsonl"]
MESSAGE_TYPES = ("user", "assistant")


def blocks(line: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = (line.get("message") or {}).get("content")
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def without_usage(line: dict[str, Any]) -> dict[str, Any]:
    message = line.get("message")
    if line.get("type") != "assistant" or not isinstance(message, dict):
        return line
    return {**line, "message": {k: v for k, v in message.items() if k != "usage"}}


def check_session(original: list[dict[str, Any]], out: list[dict[str, Any]]) -> None:
    """The output loads as a session: links resolve, calls and results pair, the other lines are all there."""
    before = {line["uuid"] for line in original if "uuid" in line}
    dangling = {line["parentUuid"] for line in original if line.get("parentUuid") and line["parentUuid"] not in before}
    uuids = [line["uuid"] for line in out if "uuid" in line]
    assert len(uuids) == len(set(uuids))
    for line in out:
        parent = line.get("parentUuid")
        assert parent is None or parent in uuids or parent in dangling, line
    uses = {b["id"] for line in out for b in blocks(line, "tool_use")}
    results = {b["tool_use_id"] for line in out for b in blocks(line, "tool_result")}
    unanswered = {b["id"] for line in original for b in blocks(line, "tool_use")} - {
        b["tool_use_id"] for line in original for b in blocks(line, "tool_result")}
    assert uses - results <= unanswered
    assert results <= uses | {b["tool_use_id"] for line in original if line.get("isSidechain") or
                              line.get("parentUuid") in dangling for b in blocks(line, "tool_result")}

    def other(line: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in line.items() if k not in ("parentUuid", "leafUuid")}, sort_keys=True)

    kept_others = [other(line) for line in out if line.get("type") not in MESSAGE_TYPES]
    assert kept_others == [other(line) for line in original if line.get("type") not in MESSAGE_TYPES]
    assert all(line["leafUuid"] in uuids for line in out if "leafUuid" in line)
    signatures = {b["thinking"]: b["signature"] for line in original for b in blocks(line, "thinking")}
    for line in out:
        for block in blocks(line, "thinking"):
            assert block["signature"] == signatures[block["thinking"]]


@pytest.mark.parametrize("name", REAL)
def test_real_sessions_round_trip_byte_for_byte(name: str, realdata: Path, tmp_path: Path) -> None:
    path = realdata / name
    result, report = invoke_with_report(str(path), "--unlimited", tmp_path=tmp_path)
    assert result.stdout.encode() == path.read_bytes()
    assert report["format"] == {"input": "claude-code", "output": "claude-code", "losses": []}


@pytest.mark.parametrize("path", [SESSION, SIDECHAIN, RESUMED, ORPHANS], ids=lambda p: p.name)
def test_fixtures_round_trip_byte_for_byte(path: Path, tmp_path: Path) -> None:
    result, _ = invoke_with_report(str(path), "--unlimited", tmp_path=tmp_path)
    assert result.stdout.encode() == path.read_bytes()
    assert read_messages(result.stdout) == read_messages(path.read_text())


@pytest.mark.parametrize("name", REAL)
def test_real_sessions_compact_to_a_loadable_session(name: str, realdata: Path, tmp_path: Path) -> None:
    path = realdata / name
    original = read_messages(path.read_text())
    result, report = invoke_with_report(str(path), "--max-tokens", "8000", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    check_session(original, out)
    if report["before"]["tokens"] > 8000:
        assert report["after"]["tokens"] <= 8000
        assert len(out) < len(original) and report["removed"]
        assert len(result.stdout) < len(path.read_text())
    gone = {e["line"] for e in report["removed"] if e["action"] == "removed"}
    assert all(original[line - 1]["type"] in MESSAGE_TYPES for line in gone)


def test_a_multi_line_reply_is_one_message_and_harness_text_is_user_text() -> None:
    decoded = formats.read(str(SESSION))
    assert decoded.format == "claude-code"
    roles = [m.role for m in decoded.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant",
                     "user", "user", "user", "assistant", "tool", "assistant", "user"]
    reply = decoded.messages[2]
    assert reply.extra["origin"] == (5, 6, 7, 8)  # thinking, text, two tool_use lines sharing message.id
    assert [c["id"] for c in reply.data["tool_calls"]] == ["toolu_01READ", "toolu_01GREP"]
    assert reply.data["content"][0]["signature"] == "EpYCCkYIBxgCKkBsig+/opaque==BYTES"
    assert is_summary(decoded.messages[0])  # "This session is being continued ..." with isCompactSummary
    # /cost command text, its output, isMeta hook feedback and a <system-reminder> all start turns
    assert [m.line for m in decoded.messages if m.role == "user"] == [3, 16, 17, 18, 24]


def test_a_cleared_result_clears_its_duplicate_too(tmp_path: Path) -> None:
    result, report = invoke_with_report(str(SESSION), "--strategy", "clear_tool_results:keep_pairs=0", "--max-tokens", "10",
                         tmp_path=tmp_path)
    source = SESSION.read_text().splitlines()
    out = result.stdout.splitlines()
    assert len(out) == len(source)
    rewritten = {e["line"] for e in report["removed"] if e["action"] == "rewritten"}
    assert rewritten == {9}  # the long Read result (the others are shorter than a placeholder)
    for number, (before, after) in enumerate(zip(source, out), start=1):
        if number not in rewritten:
            # Untouched; a reply after the first change loses its stale usage (Claude Code sizes its context by it).
            assert after == before or number > min(rewritten) and json.loads(after) == without_usage(json.loads(before))
            continue
        line = json.loads(after)
        placeholder = blocks(line, "tool_result")[0]["content"]
        assert placeholder.startswith("[compact:")
        assert line["toolUseResult"] == placeholder  # the duplicate copy of the output goes too
        assert "originalFile" not in after
        old = json.loads(before)
        assert {k: v for k, v in line.items() if k not in ("message", "toolUseResult")} == {
            k: v for k, v in old.items() if k not in ("message", "toolUseResult")}


def test_removed_messages_are_linked_around(tmp_path: Path) -> None:
    original = read_messages(SESSION.read_text())
    result, report = invoke_with_report(str(SESSION), "--strategy", "drop_turns", "--max-tokens", "120", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    assert report["removed"]
    check_session(original, out)
    by_uuid = {line["uuid"]: line for line in out if "uuid" in line}
    leaf = [line for line in out if line["type"] in MESSAGE_TYPES][-1]
    assert leaf == original[-1]  # the current turn stays, and its chain reaches the root
    chain = [leaf]
    while chain[-1]["parentUuid"] is not None:
        chain.append(by_uuid[chain[-1]["parentUuid"]])
    assert chain[-1]["parentUuid"] is None


def test_an_earlier_summary_takes_the_new_summary_in_place(tmp_path: Path) -> None:
    original = read_messages(SESSION.read_text())
    result, _ = invoke_with_report(str(SESSION), "--max-tokens", "300", "--summarizer", "extractive",
                         "--strategy", "summarize:turns=3", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    check_session(original, out)
    summaries = [line for line in out if line.get("isCompactSummary")]
    assert len(summaries) == 1
    assert summaries[0]["uuid"] == original[1]["uuid"]  # the earlier summary's line, rewritten
    assert summaries[0]["message"]["content"].startswith("CUCA summary:")
    path = tmp_path / "once.jsonl"
    path.write_text(result.stdout)
    first = formats.read(str(path)).messages[0]
    assert first.role == "system" and is_summary(first)
    assert invoke(str(path), "--unlimited").stdout == result.stdout  # a second read changes nothing


def test_an_added_summary_is_a_compact_summary_line_linked_into_the_chain(realdata: Path, tmp_path: Path) -> None:
    path = realdata / REAL[0]
    original = read_messages(path.read_text())
    result, _ = invoke_with_report(str(path), "--max-tokens", "8000", "--summarizer", "extractive",
                    "--store", str(tmp_path / "store.db"), tmp_path=tmp_path)
    out = read_messages(result.stdout)
    check_session(original, out)
    added = [line for line in out if line.get("isCompactSummary")]
    assert len(added) == 1
    summary = added[0]
    assert summary["message"]["content"].startswith("CUCA summary:")
    assert summary["sessionId"] == original[1]["sessionId"] and summary["cwd"] == original[1]["cwd"]
    assert summary["uuid"] not in {line.get("uuid") for line in original}
    after = out[out.index(summary) + 1:]
    assert next(line for line in after if "uuid" in line)["parentUuid"] == summary["uuid"]
    once = tmp_path / "once.jsonl"
    once.write_text(result.stdout)
    reread = [m for m in formats.read(str(once)).messages if m.line == out.index(summary) + 1]
    assert len(reread) == 1 and is_summary(reread[0])


def test_a_warning_is_an_is_meta_line_at_the_end_of_the_chain(tmp_path: Path) -> None:
    result, report = invoke_with_report(str(SESSION), "--unlimited", "--warn-fraction", "0.001", tmp_path=tmp_path)
    assert report["warning_appended"]
    out = read_messages(result.stdout)
    assert out[:-1] == read_messages(SESSION.read_text())
    warning = out[-1]
    assert warning["isMeta"] is True and warning["type"] == "user"
    assert warning["message"]["content"].startswith("CUCA context warning:")
    assert warning["parentUuid"] == out[-2]["uuid"]


@pytest.mark.parametrize("path", [SIDECHAIN, RESUMED], ids=lambda p: p.name)
def test_results_whose_call_is_in_the_parent_session_are_no_orphans(path: Path, tmp_path: Path) -> None:
    usage = json.loads(invoke("count", str(path), "--format", "json").stdout)
    assert usage["orphans"] == {"results": [], "calls": []}
    result, _ = invoke_with_report(str(path), "--unlimited", "--repair", tmp_path=tmp_path)
    assert result.stdout == path.read_text()  # nothing dropped; the dangling parentUuid stays as it was
    first = formats.read(str(path)).messages[0]
    assert first.role == "tool" and "tool_call_id" not in first.data and first.extra["native_id"].startswith("toolu_01")


def test_true_orphans_are_reported_with_native_ids_and_repaired(tmp_path: Path) -> None:
    usage = json.loads(invoke("count", str(ORPHANS), "--format", "json").stdout)
    assert usage["orphans"] == {"results": [4], "calls": [{"line": 2, "id": "toolu_01NEVERANSWERED"}]}
    original = read_messages(ORPHANS.read_text())
    result, _ = invoke_with_report(str(ORPHANS), "--unlimited", "--repair", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    assert [line["uuid"] for line in out] == [original[i]["uuid"] for i in (0, 1, 4, 5)]
    assert out[1] == without_usage(original[1])  # the thinking line stays, signature and all (a stale usage goes)
    assert out[2]["parentUuid"] == original[1]["uuid"]  # re-linked past the two removed lines
    check_session(original, out)


def test_invalid_line_is_an_error_naming_it_or_kept_verbatim(tmp_path: Path) -> None:
    source = ORPHANS.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*source[:2], '{"parentUuid": broken', *source[2:]]) + "\n")
    check_bad_line(broken, 3, tmp_path, "--unlimited")


def test_a_message_line_without_content_is_an_error_naming_it(tmp_path: Path) -> None:
    source = ORPHANS.read_text().splitlines()
    odd = json.loads(source[4])
    odd["message"] = {"role": "assistant"}
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join([*source[:4], json.dumps(odd), *source[5:]]) + "\n")
    result = invoke(str(path), "--unlimited")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"compact: error: {path}:5: this assistant line has no message content")


def test_a_file_mixing_formats_is_an_error_naming_the_line(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    anthropic = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}
    mixed.write_text("\n".join(SESSION.read_text().splitlines()[:3] + [json.dumps(anthropic)]) + "\n")
    result = invoke(str(mixed), "--unlimited")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert f"{mixed}:4: this line is Anthropic Messages but the lines before it are Claude Code session log" in result.stderr


def test_converted_to_openai_and_back_gives_the_same_messages(tmp_path: Path) -> None:
    chat, report = invoke_with_report(str(SESSION), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    assert {loss["what"] for loss in report["format"]["losses"]} == {
        "Claude Code session log lines that are not messages", "thinking blocks (with their signatures)",
        "server_future_block content parts OpenAI chat does not take in assistant messages, left out",
        "tool results marked as failed (the format has no field for it; the error text is kept)"}
    chat_path = tmp_path / "chat.jsonl"
    chat_path.write_text(chat.stdout)
    back, report = invoke_with_report(str(chat_path), "--unlimited", "--to", "claude-code", tmp_path=tmp_path)
    assert report["format"]["losses"] == []
    session = tmp_path / "session.jsonl"
    session.write_text(back.stdout)
    check_session(read_messages(back.stdout), read_messages(back.stdout))
    assert formats.read(str(session)).format == "claude-code"
    assert invoke(str(session), "--unlimited", "--to", "openai").stdout == chat.stdout


def test_openai_to_claude_code_lists_the_system_prompt_as_a_loss(realdata: Path, tmp_path: Path) -> None:
    name = realdata / "openai-chat/tau-bench-airline-task3.jsonl"
    converted, report = invoke_with_report(str(name), "--unlimited", "--to", "claude-code", tmp_path=tmp_path)
    assert {"what": "system messages (written as isMeta user text)", "count": 1} in report["format"]["losses"]
    out = read_messages(converted.stdout)
    assert out[0]["isMeta"] is True and out[0]["message"]["content"].startswith("# Airline Agent Policy")
    calls = {b["id"] for line in out for b in blocks(line, "tool_use")}
    assert calls and calls == {b["tool_use_id"] for line in out for b in blocks(line, "tool_result")}


def test_a_conversation_opening_with_the_assistant_becomes_a_session_the_api_takes(realdata: Path, tmp_path: Path) -> None:
    # This Gemini CLI run lost its user line (the author cut it): it opens with the assistant's tool call.
    # --to anthropic writes a user note of compact's own first; --to claude-code must too, or the session
    # is one the Messages API refuses ("first message must use the user role") and --check-for rejects.
    source = realdata / "gemini-cli/gemini-cli-0.11.0-stream-json-edit-3-tool-calls.jsonl"
    converted, report = invoke_with_report(str(source), "--unlimited", "--to", "claude-code", tmp_path=tmp_path)
    assert converted.exit_code == 0, converted.output
    out = read_messages(converted.stdout)
    assert out[0]["type"] == "user" and out[0]["isMeta"] is True and out[0]["parentUuid"] is None
    assert out[0]["message"]["content"].startswith("CUCA note:")
    assert out[1]["type"] == "assistant" and out[1]["parentUuid"] == out[0]["uuid"]
    assert {"what": "a user turn added before the opening assistant message (Anthropic wants a user message first)",
            "count": 1} in report["format"]["losses"]
    session = tmp_path / "session.jsonl"
    session.write_text(converted.stdout)
    checked = invoke("validate", str(session), "--for", "anthropic")
    assert checked.exit_code == 0, checked.output
    assert invoke(str(source), "--unlimited", "--to", "claude-code", "--check-for", "anthropic").exit_code == 0
    again = invoke(str(session), "--unlimited", "--to", "claude-code")
    assert read_messages(again.stdout)[0]["message"]["content"] == out[0]["message"]["content"]  # no second note
    assert formats.read(str(session)).messages[0].role == "system"  # compact's own, not the user's task


def test_a_clamped_reply_is_written_once_and_counts_as_reported(realdata: Path, tmp_path: Path) -> None:
    """At 300 tokens the session's last reply is clamped: its one text block stays one block, so the
    written session is the size the report says (it was 375 tokens against 299 reported)."""
    path = realdata / "claude-code/claude-reliability-stop-hook-reflection-first-stop.jsonl"
    result, report = invoke_with_report(str(path), "--max-tokens", "300", "--no-cache", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    original = read_messages(path.read_text())
    for line in out:
        if line.get("type") == "assistant":
            texts = blocks(line, "text")
            before = next(o for o in original if o.get("uuid") == line["uuid"])
            assert len(texts) == len(blocks(before, "text")), line["message"]["content"]
    written = tmp_path / "written.jsonl"
    written.write_text(result.stdout)
    counted = invoke("count", str(written), "--format", "json", "--no-cache")
    assert json.loads(counted.stdout)["before"]["tokens"] == report["after"]["tokens"] < 300
