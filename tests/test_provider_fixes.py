"""Provider conversions and `compact validate`: one behaviour a user would notice per test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import invoke, invoke_with_report, msg, write_messages

FIXTURES = Path(__file__).parent / "fixtures" / "formats"


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def blocks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for r in rows if isinstance(r.get("content"), list) for b in r["content"]]


def losses(report: dict[str, Any]) -> dict[str, int]:
    return {loss["what"]: loss["count"] for loss in report["format"]["losses"]}


def test_codex_reasoning_does_not_become_an_anthropic_block(tmp_path: Path) -> None:
    out, report = invoke_with_report(str(FIXTURES / "codex_rollout.jsonl"), "--unlimited", "--to", "anthropic",
                                     tmp_path=tmp_path)
    assert not [b for b in blocks(lines(out.stdout)) if b.get("type") == "reasoning"]
    assert losses(report)["reasoning items (encrypted content included), left out"] == 6


def test_pi_thinking_without_a_signature_is_not_written_as_anthropic_thinking(tmp_path: Path) -> None:
    out, report = invoke_with_report(str(FIXTURES / "pi_session.jsonl"), "--unlimited", "--to", "anthropic",
                                     tmp_path=tmp_path)
    thinking = [b for b in blocks(lines(out.stdout)) if b.get("type") == "thinking"]
    assert thinking == []  # pi's thinkingSignature is not Anthropic's signature
    assert losses(report)["thinking blocks without an Anthropic signature, left out"] >= 1


def test_anthropic_output_merges_consecutive_turns_of_one_side(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "in.jsonl", [msg("user", "one"), msg("user", "two"), msg("assistant", "a"),
                                                   msg("assistant", "b"), msg("user", "three")])
    rows = lines(invoke(str(source), "--unlimited", "--to", "anthropic").stdout)
    assert [r["role"] for r in rows] == ["user", "assistant", "user"]
    assert [b["text"] for b in rows[0]["content"]] == ["one", "two"]


PI_SCREENSHOT = [
    {"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
    {"type": "message", "id": "e1", "parentId": None, "timestamp": "2025-01-01T00:00:01.000Z",
     "message": {"role": "user", "content": "Take a screenshot."}},
    {"type": "message", "id": "e2", "parentId": "e1", "timestamp": "2025-01-01T00:00:02.000Z",
     "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "t1", "name": "shot", "arguments": {}}]}},
    {"type": "message", "id": "e3", "parentId": "e2", "timestamp": "2025-01-01T00:00:03.000Z",
     "message": {"role": "toolResult", "toolCallId": "t1", "toolName": "shot", "isError": False,
                 "content": [{"type": "text", "text": "saved"}, {"type": "image", "data": "iVBORw0KGgo=",
                                                                   "mimeType": "image/png"}]}},
    {"type": "message", "id": "e4", "parentId": "e3", "timestamp": "2025-01-01T00:00:04.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}},
]


def test_openai_output_from_pi_has_no_image_in_a_tool_message(tmp_path: Path) -> None:
    session = tmp_path / "pi.jsonl"
    session.write_text("".join(json.dumps(r) + "\n" for r in PI_SCREENSHOT))
    out, report = invoke_with_report(str(session), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    [tool] = [r for r in lines(out.stdout) if r["role"] == "tool"]
    assert tool["content"] == [{"type": "text", "text": "saved"}]
    assert losses(report)["images in tool messages (chat takes text only there), left out"] == 1


def test_responses_output_writes_assistant_history_in_the_input_form(tmp_path: Path) -> None:
    out = invoke(str(Path(__file__).parent.parent / "sample_transcripts" / "agent_session.jsonl"),
                 "--unlimited", "--to", "responses")
    assistant = [r for r in lines(out.stdout) if r.get("role") == "assistant"]
    assert assistant and all(r == {"type": "message", "role": "assistant", "content": r["content"]}
                             and isinstance(r["content"], str) for r in assistant)


# -- compact validate --------------------------------------------------------------------------

def test_a_user_message_continuing_a_session_is_not_a_system_message(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"role": "user", "content": "This session is being continued from a previous conversation. Summary: ..."},
        {"role": "assistant", "content": [{"type": "text", "text": "Resuming."}]},
        {"role": "user", "content": "Go on."}]) + "\n")
    run = invoke("validate", str(path), "--for", "anthropic", "--from", "anthropic")
    assert run.exit_code == 0, run.stdout


def test_responses_outputs_may_come_after_the_next_message(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"type": "message", "role": "user", "content": "list it"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": "Running."},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}]) + "\n")
    assert invoke("validate", str(path), "--for", "responses").exit_code == 0


def test_validate_judges_each_conversation_of_a_dataset(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    good = {"messages": [msg("user", "hi"), msg("assistant", "hello")]}
    bad = {"messages": [msg("user", "hi"), {"role": "assistant", "content": None,
                                            "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "f", "arguments": "{}"}}]}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    run = invoke("validate", str(path), "--for", "openai")
    assert run.exit_code == 1
    assert run.stdout.startswith(f"{path}:2: tool call c1 (f) has no result")
    assert "2 conversations" in run.stderr and "1 of 2 conversations" in run.stderr


def test_validate_names_a_codex_reasoning_block_in_an_anthropic_file(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "reasoning", "summary": [], "encrypted_content": "x"},
                                          {"type": "text", "text": "done"}]}]) + "\n")
    run = invoke("validate", str(path), "--for", "anthropic", "--from", "anthropic")
    assert run.exit_code == 1
    assert run.stdout.startswith(f"{path}:2: this assistant message is not a valid Messages API message: content[0] is a "
                                 "reasoning item")
    assert "--repair" not in run.stdout + run.stderr


# -- known gaps: OpenAI's encrypted compaction item, a cleared screenshot -------------------------

def codex_line(payload: dict[str, Any], second: int) -> dict[str, Any]:
    return {"timestamp": f"2025-11-03T09:00:{second:02d}.000Z", "type": "response_item", "payload": payload}


def codex_with_compaction(tmp_path: Path) -> Path:
    """A rollout resumed after a remote compaction: Codex replays the encrypted compaction item first."""
    rows = [{"timestamp": "2025-11-03T09:00:00.000Z", "type": "session_meta",
             "payload": {"id": "s", "timestamp": "2025-11-03T09:00:00.000Z", "cwd": "/w", "originator": "codex_cli_rs",
                         "cli_version": "0.77.0", "instructions": None, "source": "cli"}},
            codex_line({"type": "compaction", "encrypted_content": "gAAAAA" + "x" * 400}, 1),
            codex_line({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]}, 2),
            codex_line({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Continuing."}]}, 3)]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_codex_encrypted_compaction_item_is_a_summary(tmp_path: Path) -> None:
    from core import formats
    from core.messages import is_summary

    path = codex_with_compaction(tmp_path)
    decoded = formats.read(str(path))
    assert [is_summary(m) for m in decoded.messages] == [True, False, False]
    assert invoke(str(path), "--unlimited").stdout == path.read_text()
    as_responses = lines(invoke(str(path), "--unlimited", "--to", "responses").stdout)
    assert as_responses[0] == {"type": "compaction", "encrypted_content": "gAAAAA" + "x" * 400}
    _, report = invoke_with_report(str(path), "--unlimited", "--to", "anthropic", tmp_path=tmp_path)
    assert losses(report)["OpenAI's encrypted compaction summaries (readable by OpenAI only), left out"] == 1


def test_a_cleared_computer_screenshot_stays_a_valid_computer_call_output(tmp_path: Path) -> None:
    shot = {"type": "computer_screenshot", "image_url": "data:image/png;base64," + "A" * 40000}
    rows = [{"type": "message", "role": "user", "content": "Open the settings."},
            {"type": "computer_call", "id": "cu_1", "call_id": "call_c1", "status": "completed",
             "action": {"type": "screenshot"}, "pending_safety_checks": []},
            {"type": "computer_call_output", "call_id": "call_c1", "output": shot},
            {"type": "message", "role": "user", "content": "Now close it."}]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    run = invoke(str(path), "-s", "clear_tool_results:keep_pairs=0", "--max-tokens", "50", "-o", str(out))
    assert run.exit_code == 0, run.stderr
    [cleared] = [r for r in lines(out.read_text()) if r.get("type") == "computer_call_output"]
    assert cleared["output"]["type"] == "computer_screenshot" and len(cleared["output"]["image_url"]) < 200
    assert invoke("validate", str(out), "--for", "responses").exit_code == 0


def pi_entry(entry_id: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2025-01-01T00:00:00.000Z",
            "message": message}


def test_a_pi_session_whose_last_entry_goes_still_resumes_on_its_branch(tmp_path: Path) -> None:
    """pi resumes at the file's last entry: when compaction removes it, the branch must stay the leaf."""
    rows = [{"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
            pi_entry("e1", None, {"role": "user", "content": "Fix the bug."}),
            pi_entry("e2", "e1", {"role": "assistant", "content": [{"type": "text", "text": "Which file?"}]}),
            pi_entry("e4", "e2", {"role": "user", "content": "app.py, and run the tests."}),
            pi_entry("e3", "e2", {"role": "user", "content": "An abandoned branch."}),
            pi_entry("e5", "e4", {"role": "assistant", "content": [  # cut off before its result came
                {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "pytest"}}]})]
    path = tmp_path / "pi.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    run = invoke(str(path), "--unlimited", "--repair", "-o", str(out))
    assert run.exit_code == 0, run.stderr
    from core import formats

    texts = [m.data.get("content") for m in formats.read(str(out)).messages]
    assert texts[-1] == "app.py, and run the tests."  # not the abandoned branch
    assert "An abandoned branch." in out.read_text()  # which stays in the file


# Gemini CLI names a call "<tool>-<ms>-<hex>": 44 characters for run_shell_command. pi keeps an OpenAI
# Responses call as "<call_id>|<item id>" (about 80). Chat Completions refuses a tool call id over 40
# characters ("string too long. Expected a string with maximum length 40"), Responses a call_id over 64.
LONG_IDS = {"openai": 40, "responses": 64, "codex": 64}


def test_tool_call_ids_are_shortened_to_what_the_target_api_takes(tmp_path: Path) -> None:
    gemini = "run_shell_command-1761734230001-9f8e7d6c5b4a"
    pi_like = "call_Qx7vR2mN8pL4kJ6hG3fD1sA9|fc_68b1f2e3d4c5b6a7980912345678abcdef0123456789abcd"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "user", "content": [{"type": "text", "text": "run both"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": gemini, "name": "run_shell_command", "input": {"command": "ls"}},
            {"type": "tool_use", "id": pi_like, "name": "bash", "input": {"command": "pwd"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": gemini, "content": "a.txt"},
                                     {"type": "tool_result", "tool_use_id": pi_like, "content": "/w"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]))
    for target, limit in LONG_IDS.items():
        out, report = invoke_with_report(str(source), "--from", "anthropic", "--unlimited", "--to", target,
                                         tmp_path=tmp_path)
        rows = [r.get("payload", r) for r in lines(out.stdout)]
        calls = [c["id"] for r in rows for c in r.get("tool_calls") or []] + \
                [r["call_id"] for r in rows if r.get("type") == "function_call"]
        answers = [r["tool_call_id"] for r in rows if r.get("role") == "tool"] + \
                  [r["call_id"] for r in rows if r.get("type") == "function_call_output"]
        assert len(calls) == 2 and all(len(i) <= limit for i in calls), (target, calls)
        assert answers == calls and len(set(calls)) == 2  # each result still answers its own call
        assert calls[0].startswith("run_shell_command-17617")  # still readable
        assert any("shortened" in what for what in losses(report)), report["format"]
        written = tmp_path / f"{target}.jsonl"
        written.write_text(out.stdout)
        provider = "openai" if target == "openai" else "responses"
        checked = invoke("validate", str(written), "--for", provider, "--from", target)
        assert checked.exit_code == 0, checked.output


def test_validate_names_a_tool_call_id_too_long_for_the_api(tmp_path: Path) -> None:
    long_id = "call_" + "x" * 40
    source = write_messages(tmp_path / "in.jsonl", [
        msg("user", "hi"),
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": long_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": long_id, "content": "ok"},
    ])
    checked = invoke("validate", str(source), "--for", "openai")
    assert checked.exit_code == 1
    assert f"{source}:2:" in checked.stdout and "45 characters" in checked.stdout and "40" in checked.stdout
    assert invoke("validate", str(source), "--for", "responses").exit_code == 0  # 45 is within 64
