"""Codex ``codex exec --json`` event streams: read as the run they record, compacted, written back as a stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core import formats
from core.engine.file_calls import classify
from core.messages import FAILED, call_arguments, is_summary, tool_calls
from tests.helpers import call, check_bad_line, invoke_with_report

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
# Recorded: a reviewer run by the litehive orchestrator, shipped in the heru 2.1.1 sdist (MIT; see README there).
HERU = FIXTURES / "codex_exec_heru_reviewer.jsonl"
NOT_ITEMS = ("thread.started", "turn.started", "turn.completed", "turn.failed", "error")


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def item(kind: str, item_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "item": {"id": item_id, **fields}}


def command(item_id: str, text: str, output: str, exit_code: int = 0) -> list[dict[str, Any]]:
    """A command_execution as codex exec prints it: started (no output yet), then completed."""
    started = item("item.started", item_id, type="command_execution", command=text, aggregated_output="",
                   exit_code=None, status="in_progress")
    done = item("item.completed", item_id, type="command_execution", command=text, aggregated_output=output,
                exit_code=exit_code, status="completed" if exit_code == 0 else "failed")
    return [started, done]


def says(item_id: str, text: str, kind: str = "agent_message") -> dict[str, Any]:
    return item("item.completed", item_id, type=kind, text=text)


def assert_stream(out: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """What a reader of the stream needs: the lines that are not items in place, every item line a known
    event with an id, no item completed twice, and every item the input completed still completed."""
    assert [e for e in out if e["type"] in NOT_ITEMS] == [e for e in original if e["type"] in NOT_ITEMS]
    completed = [e["item"]["id"] for e in out if e["type"] == "item.completed"]
    assert len(completed) == len(set(completed))
    started = {e["item"]["id"] for e in out if e["type"] == "item.started"}
    was_completed = {e["item"]["id"] for e in original if e["type"] == "item.completed"}
    assert started & was_completed <= set(completed), "an item's start kept without its completion"
    for event in out:
        assert event["type"] in (*NOT_ITEMS, "item.started", "item.updated", "item.completed"), event
    # each item's events are in the order codex exec printed them: started, updated..., completed
    for item_id in completed:
        kinds = [e["type"] for e in out if e.get("item", {}).get("id") == item_id]
        assert kinds[-1] == "item.completed" and kinds.count("item.completed") == 1


# --- reading ------------------------------------------------------------------------------------

def test_a_heru_stream_is_detected_and_read_as_the_run_it_was() -> None:
    assert formats.sniff(str(HERU))[2].name == "codex-exec"
    decoded = formats.read(str(HERU))
    data = [m.data for m in decoded.messages]
    # the model's first response: its message, then two commands started together; then their two results
    assert data[0]["content"].startswith("I’m validating the implemented scope")
    assert [c["id"] for c in data[0]["tool_calls"]] == ["item_1", "item_2"]
    assert {c["function"]["name"] for c in data[0]["tool_calls"]} == {"shell"}
    assert call_arguments(data[0]["tool_calls"][0]) == {"command": "/bin/bash -lc 'git status --short'"}
    assert [d.get("tool_call_id") for d in data[1:3]] == ["item_1", "item_2"]
    assert data[1]["content"].startswith(" M heru/adapters/_copilot_impl.py")  # exit code 0: the output alone
    failed = decoded.messages[2]
    assert failed.extra.get(FAILED) and failed.data["content"] == (
        "Exit code: 2\nrg: unrecognized flag --continue|continuation|resume_session_id|latest\n")
    # a reply is counted at its first item's line, a result at the line where its item completed
    assert [m.line for m in decoded.messages[:3]] == [3, 6, 7]
    assert {m.data["role"] for m in decoded.messages} == {"assistant", "tool"}  # codex exec prints no prompt
    calls = [c for d in data for c in tool_calls(d)]
    answered = [d["tool_call_id"] for d in data if d["role"] == "tool"]
    assert len(calls) == 25 and sorted(c["id"] for c in calls) == sorted(answered)


def test_every_item_type_reads_as_what_the_model_did(tmp_path: Path) -> None:
    lines = [
        {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"}, {"type": "turn.started"},
        says("item_0", "**Planning the fix**", kind="reasoning"),
        says("item_1", "I'll look up the API and patch the parser."),
        item("item.started", "item_2", type="web_search", query="orjson OPT_APPEND_NEWLINE"),
        item("item.completed", "item_2", type="web_search", query="orjson OPT_APPEND_NEWLINE"),
        item("item.started", "item_3", type="mcp_tool_call", server="docs", tool="lookup", arguments={"q": "dumps"},
             result=None, error=None, status="in_progress"),
        item("item.completed", "item_3", type="mcp_tool_call", server="docs", tool="lookup", arguments={"q": "dumps"},
             result={"content": [{"type": "text", "text": "dumps(obj, option=...)"}], "structured_content": None},
             error=None, status="completed"),
        item("item.completed", "item_4", type="mcp_tool_call", server="docs", tool="lookup", arguments={"q": "x"},
             result=None, error={"message": "server gone"}, status="failed"),
        item("item.started", "item_5", type="file_change", changes=[{"path": "src/parse.py", "kind": "update"},
                                                                   {"path": "src/new.py", "kind": "add"}],
             status="in_progress"),
        item("item.completed", "item_5", type="file_change", changes=[{"path": "src/parse.py", "kind": "update"},
                                                                     {"path": "src/new.py", "kind": "add"}],
             status="completed"),
        item("item.started", "item_6", type="todo_list", items=[{"text": "patch", "completed": False}]),
        item("item.completed", "item_7", type="error", message="model stream interrupted, retrying"),
        says("item_8", "Done."),
        item("item.completed", "item_6", type="todo_list", items=[{"text": "patch", "completed": True}]),
        {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5}},
    ]
    decoded = formats.read(str(write(tmp_path / "all.jsonl", lines)))
    assert decoded.format == "codex-exec"
    data = [m.data for m in decoded.messages]
    reply = data[0]
    assert reply["content"] == [{"type": "thinking", "thinking": "**Planning the fix**"},
                                {"type": "text", "text": "I'll look up the API and patch the parser."}]
    assert [c["function"]["name"] for c in reply["tool_calls"]] == ["web_search"]
    assert call_arguments(reply["tool_calls"][0]) == {"query": "orjson OPT_APPEND_NEWLINE"}
    by_call = {d["tool_call_id"]: d for d in data if d["role"] == "tool"}
    named = {c["id"]: c for d in data for c in tool_calls(d)}
    assert named["item_3"]["function"]["name"] == "mcp__docs__lookup" and call_arguments(named["item_3"]) == {"q": "dumps"}
    assert by_call["item_3"]["content"] == "dumps(obj, option=...)"
    assert by_call["item_4"]["content"] == "server gone"
    assert classify(named["item_5"]) is None  # two files: the summary's Files changed list reads them
    assert call_arguments(named["item_5"])["changes"][1] == {"path": "src/new.py", "kind": "add"}
    assert by_call["item_5"]["content"] == "completed"
    # the to-do list: the list it ended with, answered where it was issued (Codex's update_plan answers at once)
    assert named["item_6"]["function"]["name"] == "update_plan"
    assert call_arguments(named["item_6"]) == {"items": [{"text": "patch", "completed": True}]}
    assert by_call["item_6"]["content"] == "Plan updated"
    # an error item is the harness's, not the model's: it stays in place, unread, as the error events do
    assert not [d for d in data if d["role"] == "system"]
    assert 13 not in {n for m in decoded.messages for n in m.extra["origin"]}
    assert data[-1] == {"role": "assistant", "content": "Done."}
    failed = [m for m in decoded.messages if m.extra.get(FAILED)]
    assert [m.data["tool_call_id"] for m in failed] == ["item_4"]


# --- writing back -------------------------------------------------------------------------------

def test_an_untouched_stream_comes_back_byte_for_byte(tmp_path: Path) -> None:
    same, report = invoke_with_report(str(HERU), "--unlimited", tmp_path=tmp_path)
    assert same.stdout_bytes == HERU.read_bytes()
    assert report["format"] == {"input": "codex-exec", "output": "codex-exec", "losses": []}
    assert report["orphans"] == {"results": [], "calls": []}


def test_a_compacted_stream_stays_a_stream_with_its_summary(tmp_path: Path) -> None:
    original = events(HERU.read_text(encoding="utf-8"))
    out, report = invoke_with_report(str(HERU), "--max-tokens", "3000", tmp_path=tmp_path)
    assert report["before"]["tokens"] > 3000 > report["after"]["tokens"]
    assert report["format"]["output"] == "codex-exec" and report["orphans"] == {"results": [], "calls": []}
    written = events(out.stdout)
    assert_stream(written, original)
    raw = set(HERU.read_bytes().splitlines())
    new = [e for line, e in zip(out.stdout_bytes.splitlines(), written, strict=True) if line not in raw]
    summaries = [e for e in new if e["item"].get("text", "").startswith("CUCA summary:")]
    assert len(summaries) == 1
    summary = summaries[0]
    assert summary["type"] == "item.completed" and summary["item"]["type"] == "agent_message"
    assert summary["item"]["id"] not in {e["item"]["id"] for e in original if "item" in e}
    assert written[-2] == original[-2]  # the final answer is kept as it was
    again = tmp_path / "again.jsonl"
    again.write_bytes(out.stdout_bytes)
    decoded = formats.read(str(again))
    assert decoded.format == "codex-exec"
    assert [is_summary(m) for m in decoded.messages].count(True) == 1


def test_a_cleared_result_rewrites_its_completed_line_only(tmp_path: Path) -> None:
    out, _ = invoke_with_report(str(HERU), "--full", "-s", "clear_tool_results:keep_pairs=1", tmp_path=tmp_path)
    original = HERU.read_bytes().splitlines()
    written = out.stdout_bytes.splitlines()
    assert len(written) == len(original)
    for before, after in zip(original, written, strict=True):
        old, new = json.loads(before), json.loads(after)
        if before == after:
            continue
        # only a command's completion changes, and only its output
        assert old["type"] == "item.completed" and old["item"]["type"] == "command_execution"
        assert list(new["item"]) == list(old["item"])
        assert {k: v for k, v in new["item"].items() if k != "aggregated_output"} == {
            k: v for k, v in old["item"].items() if k != "aggregated_output"}
        assert new["item"]["aggregated_output"].startswith("[compact: tool result")
    assert sum(a != b for a, b in zip(original, written, strict=True)) == 24


def test_a_clamped_output_and_reply_rewrite_their_items(tmp_path: Path) -> None:
    lines = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
             says("item_0", "Running the suite. " + "Looking closely at every failure. " * 400),
             *command("item_1", "/bin/bash -lc 'pytest -q'", "F" * 10 + "\nE assert 1 == 2\n" * 600, exit_code=1),
             says("item_2", "One test fails."),
             {"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}}]
    path = write(tmp_path / "long.jsonl", lines)
    out, _ = invoke_with_report(str(path), "--full", "-s", "clamp_oversized_messages:max_part_tokens=200",
                                tmp_path=tmp_path)
    written = events(out.stdout)
    assert_stream(written, lines)
    assert len(written) == len(lines)
    reply, started, done = written[2]["item"], written[3], written[4]["item"]
    assert "compact:" in reply["text"] and reply["text"].startswith("Running the suite.")
    assert started == lines[3]  # nothing of the call changed
    assert "compact:" in done["aggregated_output"] and not done["aggregated_output"].startswith("Exit code")
    assert (done["exit_code"], done["status"]) == (1, "failed")
    assert written[5] == lines[5]


def test_dropped_thinking_takes_its_reasoning_line(tmp_path: Path) -> None:
    lines = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
             says("item_0", "**Reading the parser**", kind="reasoning"),
             says("item_1", "Reading it."),
             *command("item_2", "/bin/bash -lc 'cat src/parse.py'", "def parse(): ...\n"),
             says("item_3", "**Checking the tests**", kind="reasoning"),
             says("item_4", "The parser looks fine.")]
    path = write(tmp_path / "thinking.jsonl", lines)
    decoded = formats.read(str(path))
    reply = decoded.messages[0]
    assert reply.data["content"][0] == {"type": "thinking", "thinking": "**Reading the parser**"}
    # what drop_old_thinking leaves of a reply: its other parts (core.strategies.drop_old_thinking.shed)
    kept = [p for p in reply.data["content"] if p["type"] != "thinking"]
    result = [reply.rewritten({**reply.data, "content": kept}), *decoded.messages[1:]]
    written = list(formats.get("codex-exec").serialise(formats.get("codex-exec").encode(decoded, result)))
    assert b"".join(written) == b"".join(line.encode() + b"\n" for line in path.read_text().splitlines()
                                          if "Reading the parser" not in line)


def test_a_summary_names_the_files_a_file_change_changed(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"}]
    for n in range(6):
        lines += command(f"item_{3 * n}", f"/bin/bash -lc 'cat src/m{n}.py'", f"print({n})\n" * 300)
        lines += [item("item.completed", f"item_{3 * n + 1}", type="file_change",
                       changes=[{"path": f"src/m{n}.py", "kind": "update"}], status="completed"),
                  says(f"item_{3 * n + 2}", f"Patched m{n}.")]
    lines.append({"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}})
    path = write(tmp_path / "edits.jsonl", lines)
    out, _ = invoke_with_report(str(path), "--max-tokens", "1500", "-s", "summarize", tmp_path=tmp_path)
    written = events(out.stdout)
    assert_stream(written, lines)
    texts = [e["item"].get("text", "") for e in written if "item" in e]
    (summary,) = [t for t in texts if t.startswith("CUCA summary:")]
    assert "Files changed:" in summary and "src/m0.py" in summary


def test_older_plans_point_at_the_newest(tmp_path: Path) -> None:
    plan = [{"text": f"step {n}: " + "refactor the quota model carefully " * 20, "completed": False} for n in range(4)]
    lines: list[dict[str, Any]] = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"}]
    for n in range(3):
        done = [{**step, "completed": i < n} for i, step in enumerate(plan)]
        lines += [item("item.started", f"item_{2 * n}", type="todo_list", items=done),
                  item("item.completed", f"item_{2 * n}", type="todo_list", items=done),
                  says(f"item_{2 * n + 1}", f"Step {n} done.")]
    path = write(tmp_path / "plans.jsonl", lines)
    out, _ = invoke_with_report(str(path), "--full", "-s", "supersede_plans", tmp_path=tmp_path)
    written = events(out.stdout)
    assert_stream(written, lines)
    assert written[-3:] == lines[-3:]  # the newest plan stays
    for older in (written[2], written[3], written[5], written[6]):
        (step,) = older["item"]["items"]
        assert step["text"].startswith("[compact:") and "superseded" in step["text"]


def test_a_warning_added_to_a_stream_reads_back_as_compacts_own(tmp_path: Path) -> None:
    out, _ = invoke_with_report(str(HERU), "--unlimited", "--warn-fraction", "0.01", tmp_path=tmp_path)
    written = events(out.stdout)
    added = written[-1]
    assert added["type"] == "item.completed" and added["item"]["type"] == "agent_message"
    assert added["item"]["text"].startswith("CUCA context warning:")
    assert out.stdout_bytes.startswith(HERU.read_bytes())  # added after the last line, the rest as it was
    again = tmp_path / "again.jsonl"
    again.write_bytes(out.stdout_bytes)
    assert formats.read(str(again)).messages[-1].data["role"] == "system"
    twice, _ = invoke_with_report(str(again), "--unlimited", "--warn-fraction", "0.01", tmp_path=tmp_path)
    assert twice.stdout_bytes == out.stdout_bytes


# --- a run cut off ------------------------------------------------------------------------------

def test_a_truncated_stream_reads_with_its_open_call_an_orphan(tmp_path: Path) -> None:
    original = HERU.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    # killed while item_32 ran: its completion, the final answer and turn.completed never came
    assert b'"item.started","item":{"id":"item_32"' in original[-4]
    cut.write_bytes(b"".join(original[:-3]))
    same, report = invoke_with_report(str(cut), "--unlimited", tmp_path=tmp_path)
    assert same.stdout_bytes == cut.read_bytes()
    assert [c["id"] for c in report["orphans"]["calls"]] == ["item_32"]
    small, report = invoke_with_report(str(cut), "--max-tokens", "5000", tmp_path=tmp_path)
    assert report["after"]["tokens"] < 5000
    written = events(small.stdout)
    assert_stream(written, events(cut.read_text(encoding="utf-8")))
    assert written[-1] == json.loads(original[-4])  # the run's last state: the command it was running


def test_a_bad_item_line_is_named_or_kept(tmp_path: Path) -> None:
    lines = HERU.read_text(encoding="utf-8").splitlines()
    broken = tmp_path / "broken.jsonl"
    bad = '{"type":"item.completed","item":{"type":"agent_message","text":"no id"}}'
    broken.write_text("\n".join([*lines[:5], bad, *lines[5:]]) + "\n", encoding="utf-8")
    failed, _, _ = check_bad_line(broken, 6, tmp_path, "--max-tokens", "3000")
    assert "item needs an id" in failed.stderr


# --- conversion ---------------------------------------------------------------------------------

def test_to_openai_writes_chat_with_every_call_answered(tmp_path: Path) -> None:
    out, report = invoke_with_report(str(HERU), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    messages = events(out.stdout)
    assert {m["role"] for m in messages} == {"assistant", "tool"}
    waiting: list[str] = []
    for message in messages:  # chat needs each call's results right after it
        if message["role"] == "tool":
            assert message["tool_call_id"] == waiting.pop(0)
        else:
            assert not waiting
            waiting = [c["id"] for c in message.get("tool_calls", [])]
    assert not waiting
    assert {"what": "Codex exec event stream lines that are not messages", "count": 3} in report["format"]["losses"]
    back = tmp_path / "chat.jsonl"
    back.write_bytes(out.stdout_bytes)
    assert formats.read(str(back)).format == "openai"


def test_to_codex_exec_writes_a_stream_that_reads_back(tmp_path: Path) -> None:
    chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "List the files."},
            {"role": "assistant", "content": "Listing.", "tool_calls": [call("c1", "shell", command="ls")]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n"},
            {"role": "assistant", "content": "Two files."}]
    path = write(tmp_path / "chat.jsonl", chat)
    out, report = invoke_with_report(str(path), "--unlimited", "--to", "codex-exec", tmp_path=tmp_path)
    written = events(out.stdout)
    assert written[0]["type"] == "thread.started" and written[1] == {"type": "turn.started"}
    assert {"what": "user and system messages (a codex exec stream prints none)", "count": 2} in report["format"]["losses"]
    again = tmp_path / "stream.jsonl"
    again.write_bytes(out.stdout_bytes)
    decoded = formats.read(str(again))
    assert decoded.format == "codex-exec"
    assert [m.data for m in decoded.messages] == [
        {"role": "assistant", "content": "Listing.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command":"ls"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py\n"},
        {"role": "assistant", "content": "Two files."}]
