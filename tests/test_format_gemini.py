"""Gemini CLI logs (issue 13): stream-json and the saved chat, read, compacted and written back in their own format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import formats
from core.messages import is_summary
from tests.helpers import check_bad_line, invoke, invoke_with_report
from tests.test_properties import transcripts

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
STREAM = FIXTURES / "gemini_stream.jsonl"  # hand-made headless run: parallel calls, an error result, chunks, an error event
CHAT = FIXTURES / "gemini_chat.json"  # hand-made saved chat: two turns, parts content, an info record, an error result
REAL_CHAT = "gemini-cli/gemini-cli-chat-session-pomodoro-timer.json"
REAL_STREAM = "gemini-cli/gemini-cli-0.11.0-stream-json-edit-3-tool-calls.jsonl"


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def assert_stream_paired(out: list[dict[str, Any]]) -> None:
    """Every tool_use has its tool_result after it, and no result is without its call."""
    used: set[str] = set()
    answered: list[str] = []
    for event in out:
        if event["type"] == "tool_use":
            used.add(event["tool_id"])
        elif event["type"] == "tool_result":
            assert event["tool_id"] in used, event
            answered.append(event["tool_id"])
    assert sorted(used) == sorted(answered)


def assert_chat_loadable(document: dict[str, Any], original: dict[str, Any]) -> None:
    """What Gemini CLI needs to resume: the session fields as they were, every call with its result, records intact."""
    assert {k: v for k, v in document.items() if k != "messages"} == {k: v for k, v in original.items() if k != "messages"}
    for record in document["messages"]:
        assert {"id", "timestamp", "type", "content"} <= set(record)
        for call in record.get("toolCalls", []):
            assert call["result"][0]["functionResponse"]["id"] == call["id"]
    kept_ids = {r["id"] for r in document["messages"]}
    # records compact did not write are the original ones, in the original order, with their own fields
    originals = {r["id"]: r for r in original["messages"]}
    assert [i for i in (r["id"] for r in document["messages"]) if i in originals] == [
        r["id"] for r in original["messages"] if r["id"] in kept_ids]
    for record in document["messages"]:
        if record["id"] in originals:
            before = originals[record["id"]]
            assert {k: v for k, v in record.items() if k not in ("content", "toolCalls")} == {
                k: v for k, v in before.items() if k not in ("content", "toolCalls")}


# --- stream-json --------------------------------------------------------------------------------

def test_stream_events_become_the_conversation_the_model_had() -> None:
    decoded = formats.read(str(STREAM))
    assert decoded.format == "gemini-stream"
    data = [m.data for m in decoded.messages]
    assert [d["role"] for d in data] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "tool",
                                         "assistant", "tool", "assistant", "tool", "assistant"]
    assert data[1]["content"] == "I'll start by reading the timer module and the tests."  # chunks joined
    assert [c["id"] for c in data[1]["tool_calls"]] == ["read_file-1761734225259-ef6c719c767c",
                                                        "read_file-1761734225260-1a2b3c4d5e6f"]
    assert json.loads(data[1]["tool_calls"][0]["function"]["arguments"]) == {"absolute_path": "/work/pomodoro/timer.py"}
    assert data[4]["content"] is None and data[4]["tool_calls"][0]["function"]["name"] == "run_shell_command"
    assert data[7]["content"] == ""  # replace reports no output
    assert data[9]["content"].startswith("Command exited with code 1")  # a failed tool: its error message
    assert data[12] == {"role": "assistant", "content": "Added `pause()`; one pause test still fails, see above."}
    assert decoded.messages[1].extra["origin"] == (3, 4, 5, 6)


def test_stream_compacts_with_every_call_answered_and_other_events_in_place(tmp_path: Path) -> None:
    original = events(STREAM.read_text())
    for budget in ("3000", "500"):
        out, report = invoke_with_report(str(STREAM), "--max-tokens", budget, tmp_path=tmp_path)
        written = events(out.stdout)
        assert report["format"] == {"input": "gemini-stream", "output": "gemini-stream", "losses": []}
        assert report["after"]["tokens"] < int(budget) < report["before"]["tokens"]
        assert_stream_paired(written)
        others = ("init", "error", "result")
        assert [e for e in written if e["type"] in others] == [e for e in original if e["type"] in others]
        assert written[1] == original[1]  # the prompt is pinned
        assert written[-3:] == original[-3:]  # the final answer and the result
        rerun = tmp_path / "again.jsonl"
        rerun.write_text(out.stdout)
        assert formats.sniff(str(rerun))[2].name == "gemini-stream"


def test_a_cleared_stream_result_keeps_its_event_and_gets_the_placeholder(tmp_path: Path) -> None:
    out, _ = invoke_with_report(str(STREAM), "--full", "-s", "clear_tool_results:keep_pairs=1",
                                tmp_path=tmp_path)
    written = {e.get("tool_id"): e for e in events(out.stdout) if e["type"] == "tool_result"}
    original = {e.get("tool_id"): e for e in events(STREAM.read_text()) if e["type"] == "tool_result"}
    cleared = written["read_file-1761734225259-ef6c719c767c"]
    assert cleared["output"].startswith("[compact: tool result")
    assert list(cleared) == list(original["read_file-1761734225259-ef6c719c767c"])  # same keys, same order
    failed = written["run_shell_command-1761734240002-0a9b8c7d6e5f"]
    assert "output" not in failed and failed["error"]["type"] == "execution_failed"
    assert failed["error"]["message"].startswith("[compact: tool result")


def test_a_rewritten_reply_puts_its_text_on_its_first_chunk(tmp_path: Path) -> None:
    lines = events(STREAM.read_text())
    lines[2]["content"] = "I'll start by reading the timer module " + "and the tests " * 900
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps(e) + "\n" for e in lines))
    out, _report = invoke_with_report(str(long), "--full", "-s", "clamp_oversized_messages:max_part_tokens=200",
                                     tmp_path=tmp_path)
    written = events(out.stdout)
    chunks = [e for e in written if e["type"] == "message" and e["role"] == "assistant"]
    assert "compact:" in chunks[0]["content"] and chunks[0]["delta"] is True
    assert chunks[0]["timestamp"] == lines[2]["timestamp"]
    assert lines[3] not in written  # the reply's second chunk is inside the clamped text now
    assert len(written) == len(lines) - 1


def test_a_warning_added_to_a_stream_is_a_user_message_read_back_as_compacts_own(tmp_path: Path) -> None:
    out, _ = invoke_with_report(str(STREAM), "--unlimited", "--warn-fraction", "0.01", tmp_path=tmp_path)
    written = events(out.stdout)
    added = written[-1]
    assert added["type"] == "message" and added["role"] == "user"
    assert added["content"].startswith("CUCA context warning:")
    assert added["timestamp"] == events(STREAM.read_text())[-1]["timestamp"]
    again = tmp_path / "again.jsonl"
    again.write_text(out.stdout)
    assert formats.read(str(again)).messages[-1].data["role"] == "system"
    twice, _ = invoke_with_report(str(again), "--unlimited", "--warn-fraction", "0.01", tmp_path=tmp_path)
    assert twice.stdout == out.stdout  # once: a transcript that has the warning gets no second


def test_a_bad_stream_line_is_named_or_kept(tmp_path: Path) -> None:
    lines = STREAM.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:5], '{"type":"tool_result","timestamp":"x","status":"success"}', *lines[5:]]) + "\n")
    failed, _, _ = check_bad_line(broken, 6, tmp_path, "--max-tokens", "3000")
    assert "tool_result event needs a tool_id" in failed.stderr


# --- the saved chat -----------------------------------------------------------------------------

def test_chat_records_become_the_history_gemini_cli_resumes_with() -> None:
    decoded = formats.read(str(CHAT))
    assert decoded.format == "gemini-chat"
    data = [m.data for m in decoded.messages]
    assert [d["role"] for d in data] == ["user", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant",
                                         "user", "assistant"]
    assert data[1]["tool_calls"][1]["id"] == "run_shell_command-1761734230001-9f8e7d6c5b4a"
    assert data[3]["content"].startswith("Command: python -m pytest -q\nStdout:")  # what the model saw, not the display
    assert data[6]["content"].startswith("Command exited with code 1")  # an error response
    assert data[4]["content"] is None  # a reply of calls only
    assert data[8]["content"] == "Fix the failing pause test too. Keep the diff small."  # parts joined
    # each message is counted at the line of the file where its record starts
    text = CHAT.read_text().splitlines()
    for message in decoded.messages:
        assert text[message.line - 1] == "    {"
    assert len({m.line for m in decoded.messages}) == 6  # one per user/gemini record; results at their record


def test_chat_round_trips_byte_for_byte_and_compacts_to_a_resumable_session(tmp_path: Path) -> None:
    same, _ = invoke_with_report(str(CHAT), "--unlimited", tmp_path=tmp_path)
    assert same.stdout_bytes == CHAT.read_bytes()
    original = json.loads(CHAT.read_text())
    out, report = invoke_with_report(str(CHAT), "--max-tokens", "2500", tmp_path=tmp_path)
    assert report["after"]["tokens"] < 2500 < report["before"]["tokens"]
    document = json.loads(out.stdout)
    assert out.stdout == json.dumps(document, indent=2, ensure_ascii=False)  # as gemini-cli writes it
    assert_chat_loadable(document, original)
    cleared = [c for r in document["messages"] for c in r.get("toolCalls", [])
               if c["result"][0]["functionResponse"]["response"].get("output", "").startswith("[compact:")]
    assert cleared, "some results were cleared"
    for call in cleared:  # the display copy goes with the output (a diff object holding the whole file included)
        assert call["resultDisplay"] == call["result"][0]["functionResponse"]["response"]["output"]
    info = [r for r in document["messages"] if r["type"] == "info"]
    assert info == [r for r in original["messages"] if r["type"] == "info"]


def test_a_compacted_chat_saved_with_a_bom_and_crlf_is_written_as_gemini_cli_writes_it(tmp_path: Path) -> None:
    # Gemini CLI parses the file with JSON.parse, which refuses a leading BOM: like every other
    # format, a changed chat is written without one, with LF line ends.
    edited = tmp_path / "chat.json"
    edited.write_bytes(b"\xef\xbb\xbf" + CHAT.read_bytes().replace(b"\n", b"\r\n"))
    out, _ = invoke_with_report(str(edited), "--max-tokens", "2500", tmp_path=tmp_path)
    assert not out.stdout_bytes.startswith(b"\xef\xbb\xbf") and b"\r" not in out.stdout_bytes
    assert out.stdout == json.dumps(json.loads(out.stdout), indent=2, ensure_ascii=False)


def test_a_lone_surrogate_is_written_to_a_chat_as_json_stringify_escapes_it(tmp_path: Path) -> None:
    # Half an emoji (a lone surrogate) in a message was written as raw bytes that are not UTF-8:
    # compact itself refused its own output, and Node would read U+FFFD. JSON.stringify writes \ud83d.
    source = tmp_path / "t.jsonl"
    source.write_text('{"role": "user", "content": "half \\ud83d an emoji, \\u00e9 whole"}\n'
                      '{"role": "assistant", "content": "ok \\udc00"}\n', encoding="utf-8")
    chat = tmp_path / "chat.json"
    invoke_with_report(str(source), "--unlimited", "--to", "gemini-chat", "-o", str(chat), tmp_path=tmp_path)
    written = chat.read_bytes().decode("utf-8")  # (raised UnicodeDecodeError)
    assert '"half \\ud83d an emoji, \u00e9 whole"' in written and '"ok \\udc00"' in written
    again, _ = invoke_with_report(str(chat), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    assert [json.loads(line)["content"] for line in again.stdout.splitlines()] == ["half \ud83d an emoji, \u00e9 whole",
                                                                                 "ok \udc00"]


def test_chat_summary_is_a_user_record_and_removed_records_take_their_thoughts(tmp_path: Path) -> None:
    args = ("--max-tokens", "1500", "--summarizer", "extractive", "-s", "summarize:turns=1", "--preset", "seed")
    out, _ = invoke_with_report(str(CHAT), *args, tmp_path=tmp_path)
    document = json.loads(out.stdout)
    summaries = [r for r in document["messages"] if str(r["content"]).startswith("CUCA summary:")]
    assert len(summaries) == 1 and summaries[0]["type"] == "user"
    assert "thoughts" not in summaries[0]
    assert [r["type"] for r in document["messages"]] == ["info", "user", "user", "gemini"]
    again = tmp_path / "again.json"
    again.write_text(out.stdout)
    decoded = formats.read(str(again))
    assert [is_summary(m) for m in decoded.messages].count(True) == 1
    rerun, _ = invoke_with_report(str(again), *args, tmp_path=tmp_path)
    assert rerun.stdout == out.stdout  # nothing left to summarize: a second run changes nothing


def test_keep_line_pins_the_record_at_that_line(tmp_path: Path) -> None:
    decoded = formats.read(str(CHAT))
    reply = decoded.messages[1]  # the first reply, whose results are the largest
    out, _ = invoke_with_report(str(CHAT), "--max-tokens", "2500", "--keep", f"line:{reply.line}", tmp_path=tmp_path)
    document = json.loads(out.stdout)
    first = next(r for r in document["messages"] if r["id"] == "80aec7c7-87cd-4812-ae58-bf135c0422b5")
    assert first == json.loads(CHAT.read_text())["messages"][1]


def test_the_real_saved_chat_compacts_with_every_call_keeping_its_result(realdata: Path, tmp_path: Path) -> None:
    path = realdata / REAL_CHAT
    original = json.loads(path.read_text())
    for budget in ("2000", "4000"):
        out, report = invoke_with_report(str(path), "--max-tokens", budget, tmp_path=tmp_path)
        assert report["orphans"] == {"results": [], "calls": []}
        assert report["after"]["tokens"] < int(budget)
        document = json.loads(out.stdout)
        assert_chat_loadable(document, original)
        assert out.stdout.endswith("}\n")  # this file ended with a newline: so does its rewrite


def test_a_call_without_result_is_an_orphan_and_repair_drops_it(tmp_path: Path) -> None:
    document = json.loads(CHAT.read_text())
    del document["messages"][3]["toolCalls"][1]["result"]  # a call cut off before it ran
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(document, indent=2))
    _, report = invoke_with_report(str(cut), "--unlimited", tmp_path=tmp_path)
    assert [c["id"] for c in report["orphans"]["calls"]] == ["run_shell_command-1761734240002-0a9b8c7d6e5f"]
    repaired, _ = invoke_with_report(str(cut), "--unlimited", "--repair", tmp_path=tmp_path)
    calls = [c["id"] for r in json.loads(repaired.stdout)["messages"] for c in r.get("toolCalls", [])]
    assert "run_shell_command-1761734240002-0a9b8c7d6e5f" not in calls and len(calls) == 3


def test_a_truncated_saved_chat_is_one_line_error(tmp_path: Path) -> None:
    cut = tmp_path / "session-cut.json"
    cut.write_bytes(CHAT.read_bytes()[:5000])
    result = invoke(str(cut), "--unlimited")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"compact: error: {cut}:") and "malformed JSON document" in result.stderr


def test_a_pretty_printed_object_of_another_format_is_refused_in_one_line(tmp_path: Path) -> None:
    conversation = tmp_path / "conversation.json"
    conversation.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}, indent=2))
    trajectory = tmp_path / "run.traj"
    trajectory.write_text(json.dumps({"environment": "swe", "trajectory": [], "history": []}, indent=2))
    for path, what in ((conversation, "this file is one pretty-printed JSON object (a conversation-per-line dataset)"),
                       (trajectory, "this JSON document is not a transcript in any format compact reads")):
        result = invoke("count", str(path))
        assert result.exit_code == 2
        assert result.stderr == result.stderr.splitlines()[0] + "\n"
        assert result.stderr.startswith(f"compact: error: {path}:1: {what}")


# --- conversions --------------------------------------------------------------------------------

@pytest.mark.parametrize("source", [STREAM, CHAT], ids=lambda p: p.name)
def test_conversion_to_openai_and_back_keeps_the_conversation(source: Path, tmp_path: Path) -> None:
    as_chat, _ = invoke_with_report(str(source), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    chat = tmp_path / "chat.jsonl"
    chat.write_text(as_chat.stdout)
    target = formats.read(str(source)).format
    back, _ = invoke_with_report(str(chat), "--unlimited", "--to", target, tmp_path=tmp_path)
    again = tmp_path / ("again.json" if target == "gemini-chat" else "again.jsonl")
    again.write_text(back.stdout)
    assert formats.sniff(str(again))[2].name == target
    # The same conversation, apart from the ids over the 40 characters chat takes (Gemini CLI names a call
    # "<tool>-<ms>-<hex>", 44 characters for run_shell_command): shortened, each result's with its call's.
    before, after = ([m.data for m in formats.read(str(path)).messages] for path in (source, again))
    renamed: dict[str, str] = {}
    for old, new in zip(before, after, strict=True):
        for old_call, new_call in zip(old.get("tool_calls") or [], new.get("tool_calls") or [], strict=True):
            renamed[old_call["id"]] = new_call["id"]
    assert {k: v for k, v in renamed.items() if k != v} == {
        k: v for k, v in renamed.items() if len(k) > 40} and all(len(v) <= 40 for v in renamed.values())

    def with_ids_renamed(data: dict[str, Any]) -> dict[str, Any]:
        calls = [{**c, "id": renamed[c["id"]]} for c in data.get("tool_calls") or []]
        answered = {"tool_call_id": renamed[data["tool_call_id"]]} if "tool_call_id" in data else {}
        return {**data, **({"tool_calls": calls} if calls else {}), **answered}

    assert after == [with_ids_renamed(data) for data in before]


def test_conversion_between_the_two_gemini_formats_and_what_it_cannot_carry(tmp_path: Path) -> None:
    out, report = invoke_with_report(str(CHAT), "--unlimited", "--to", "gemini-stream", tmp_path=tmp_path)
    written = events(out.stdout)
    assert written[0]["type"] == "init"
    assert_stream_paired(written)
    assert report["format"]["losses"] == [
        {"what": "Gemini CLI saved chat records that are not messages (info, error, warning)", "count": 1},
        {"what": "Gemini thought summaries", "count": 2}]
    anthropic = FIXTURES / "anthropic_all_blocks.jsonl"
    _, report = invoke_with_report(str(anthropic), "--unlimited", "--to", "gemini-chat", tmp_path=tmp_path)
    losses = {loss["what"] for loss in report["format"]["losses"]}
    assert any("Gemini CLI logs keep text only" in what for what in losses)


def test_a_file_most_of_whose_lines_no_format_defines_is_refused(tmp_path: Path) -> None:
    # Gemini stream-json before this codec, or any other agent's event log: unknown `type`d events around one
    # Responses-shaped message used to be read as Responses items, and all but that line passed through uncounted.
    log = tmp_path / "agent-events.jsonl"
    log.write_text(
        '{"type":"step_start","id":"s1"}\n{"type":"message","role":"user","content":"fix the bug"}\n'
        '{"type":"text","text":"Looking at the code now."}\n{"type":"tool","tool":"bash","state":{"output":"ok"}}\n'
        '{"type":"step_finish","id":"s1"}\n')
    result = invoke("count", str(log))
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"compact: error: {log}: this file is in no format compact reads: only 1 of")
    for name in formats.names():
        assert f"({name})" in result.stderr
    assert "--from FORMAT" in result.stderr
    forced = invoke("count", str(log), "--from", "responses", "--format", "json")
    assert forced.exit_code == 0, forced.output  # --from still reads it, as asked


# --- properties ---------------------------------------------------------------------------------

def _comparable(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The conversation as the Gemini logs carry it: results of parallel calls in the order of the calls."""
    out: list[tuple[Any, ...]] = []
    order: dict[str, int] = {}
    for data in messages:
        calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in data.get("tool_calls", [])]
        order.update((call[0], i) for i, call in enumerate(calls))
        out.append((data["role"], data.get("content"), calls, data.get("tool_call_id")))
    runs: list[list[tuple[Any, ...]]] = []
    for item in out:
        if runs and item[0] == "tool" and runs[-1][0][0] == "tool":
            runs[-1].append(item)
        else:
            runs.append([item])
    return [item for run in runs for item in sorted(run, key=lambda i: order.get(i[3], 0) if i[0] == "tool" else 0)]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=transcripts(), budget=st.integers(200, 6000), target=st.sampled_from(["gemini-stream", "gemini-chat"]))
def test_any_conversation_written_as_a_gemini_log_reads_back_and_compacts_paired(
        messages: list[dict[str, Any]], budget: int, target: str, tmp_path: Path) -> None:
    messages = [m for m in messages if m["role"] != "system"]  # Gemini logs have no system prompt
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(m) + "\n" for m in messages))
    converted = tmp_path / ("session.json" if target == "gemini-chat" else "run.jsonl")
    _out, report = invoke_with_report(str(source), "--unlimited", "--to", target, "-o", str(converted), tmp_path=tmp_path)
    back = [m.data for m in formats.read(str(converted)).messages]
    joined = {"what": "assistant messages in a row (a stream reads them back as one reply)", "count": 1}
    if not any(loss["what"] == joined["what"] for loss in report["format"]["losses"]):
        assert _comparable(back) == _comparable(messages)
    compacted = tmp_path / ("compacted.json" if target == "gemini-chat" else "compacted.jsonl")
    invoke_with_report(str(converted), "--max-tokens", str(budget), "-o", str(compacted), tmp_path=tmp_path)
    again = formats.read(str(compacted))
    assert again.format == target
    calls = {c["id"] for m in again.messages for c in m.data.get("tool_calls", [])}
    results = {m.data["tool_call_id"] for m in again.messages if m.data["role"] == "tool"}
    assert calls == results
    last_user = [m["content"] for m in messages if m["role"] == "user"][-1]
    assert last_user in [m.data.get("content") for m in again.messages]


@pytest.mark.parametrize("target", ["gemini-stream", "gemini-chat"])
def test_thinking_written_to_gemini_is_left_out_not_shown_as_the_reply(target: str, tmp_path: Path) -> None:
    # A Gemini log keeps only the text the model showed: thinking would become the visible reply.
    source = tmp_path / "thinking.jsonl"
    lines = [{"role": "user", "content": "What is 2+2?"},
             {"role": "assistant", "content": [{"type": "thinking", "thinking": "SECRET-CHAIN", "signature": "sig"},
                                               {"type": "text", "text": "First paragraph."},
                                               {"type": "text", "text": "Second paragraph."}]},
             {"role": "user", "content": "thanks"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, report = tmp_path / "out", tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report)).exit_code == 0
    assert "SECRET-CHAIN" not in out.read_text()
    replies = [m for m in formats.read(str(out)).messages if m.role == "assistant"]
    assert [m.data["content"] for m in replies] == ["First paragraph.\n\nSecond paragraph."]
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses == {"thinking parts (Gemini CLI logs keep text only)": 1}


@pytest.mark.parametrize("fixture", ["gemini_chat.json", "gemini_session.jsonl"])
def test_compacting_a_gemini_file_twice_writes_the_same_bytes(fixture: str, tmp_path: Path) -> None:
    """The records compact adds (its summary, a trace) get ids made from where they go and what they
    say, as Claude Code lines do: a fresh uuid4 each run made two runs on one input differ."""
    outputs = []
    for run in (1, 2):
        out = tmp_path / f"out{run}{Path(fixture).suffix}"
        done = invoke(str(FIXTURES / fixture), "--max-tokens", "150", "--no-cache", "-o", str(out))
        assert done.exit_code == 0, done.output
        outputs.append(out.read_bytes())
    assert b"CUCA summary" in outputs[0]
    assert outputs[0] == outputs[1]
