"""Custom (free-form) tool calls in OpenAI chat: `{"type": "custom", "custom": {"name", "input"}}`.

GPT-5's freeform tools (Codex's `apply_patch`) take raw text, not JSON arguments. A chat transcript
holding such a call is read, compacted and written back as a custom call; a Codex rollout's
`custom_tool_call` items become chat custom calls with `--to openai`; a format with no free-form
calls gets an ordinary call with the text as its one argument, and the report says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import sdk_oracle
from tests.helpers import invoke, read_messages, write_messages

PATCH = "*** Begin Patch\n*** Update File: app/config.py\n@@\n-RETRIES = 3\n+RETRIES = 5\n*** End Patch\n"
LOSS = "custom (free-form) tool calls, written as ordinary calls with the text as their one argument, input"


def strings(value: object) -> list[str]:
    """Every string in a JSON value, and in the JSON a string holds (ShareGPT writes calls as JSON text)."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if not isinstance(value, str):
        return []
    try:
        inner = json.loads(value)
    except ValueError:
        return [value]
    return [value, *strings(inner)] if isinstance(inner, (dict, list)) else [value]


def custom_call(call_id: str, text: str) -> dict[str, object]:
    return {"id": call_id, "type": "custom", "custom": {"name": "apply_patch", "input": text}}


def chat_session(tmp_path: Path, patch: str = PATCH) -> Path:
    return write_messages(tmp_path / "chat.jsonl", [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Raise the retry count in app/config.py to 5."},
        {"role": "assistant", "content": None, "tool_calls": [custom_call("call_1", patch)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Success. Updated app/config.py"},
        {"role": "assistant", "content": "Done: RETRIES is 5 now."},
        {"role": "user", "content": "Now run the tests."},
    ])


def test_a_chat_custom_call_is_read_and_written_back_as_it_was(tmp_path: Path) -> None:
    source = chat_session(tmp_path)
    out = invoke(str(source), "--unlimited")
    assert out.exit_code == 0, out.output
    assert out.stdout == source.read_text()
    checked = invoke("validate", str(source), "--for", "openai")
    assert checked.exit_code == 0, checked.output


def test_a_rewritten_custom_call_stays_custom_and_the_provider_takes_it(tmp_path: Path) -> None:
    # A patch far over the budget: its input is clamped, both ends kept, and it stays a custom call.
    patch = PATCH.replace("@@\n", "@@\n" + "".join(f"-old_line_{i} = {i}\n+new_line_{i} = {i}\n" for i in range(600)))
    source = chat_session(tmp_path, patch)
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    run = invoke(str(source), "--max-tokens", "1500", "-s", "clamp_oversized_messages", "-o", str(out),
                 "--report", str(report))
    assert run.exit_code == 0, run.output
    written = read_messages(out.read_text())
    call = written[2]["tool_calls"][0]
    assert call["type"] == "custom" and "function" not in call
    assert call["custom"]["name"] == "apply_patch"
    assert call["custom"]["input"].startswith("*** Begin Patch") and call["custom"]["input"].endswith("*** End Patch\n")
    assert len(call["custom"]["input"]) < len(patch)
    assert sdk_oracle.judge(sdk_oracle.Request("", written), sdk_oracle.OPENAI) == []


def test_codex_custom_calls_become_chat_custom_calls(realdata: Path, tmp_path: Path) -> None:
    source = realdata / "codex-cli/codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl"
    out = tmp_path / "out.jsonl"
    assert invoke(str(source), "--unlimited", "--to", "openai", "-o", str(out)).exit_code == 0
    written = read_messages(out.read_text())
    calls = [c for m in written for c in m.get("tool_calls") or []]
    custom = [c for c in calls if c["type"] == "custom"]
    assert len(custom) == 11 and all("function" not in c for c in custom)
    assert custom[0]["custom"]["name"] == "apply_patch" and custom[0]["custom"]["input"].startswith("*** Begin Patch")
    assert sdk_oracle.judge(sdk_oracle.Request("", written), sdk_oracle.OPENAI) == []
    # Read back, they are the same calls.
    again = invoke(str(out), "--unlimited")
    assert again.exit_code == 0 and again.stdout == out.read_text()


@pytest.mark.parametrize("target", ["anthropic", "claude-code", "pi", "gemini-chat", "gemini-stream", "sharegpt"])
def test_formats_without_free_form_calls_get_the_text_as_an_argument_and_say_so(target: str, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    run = invoke(str(chat_session(tmp_path)), "--unlimited", "--to", target, "-o", str(out), "--report", str(report))
    assert run.exit_code == 0, run.output
    text = out.read_text()
    written = json.loads(text) if target == "gemini-chat" else read_messages(text)  # one JSON document
    assert PATCH in strings(written)  # the patch text, whole
    # Text that looks like JSON is still text: its one argument, never parsed into an object.
    looks = '{"path": "a.py",  "x": 1}'
    assert invoke(str(chat_session(tmp_path, looks)), "--unlimited", "--to", target, "-o", str(out)).exit_code == 0
    text = out.read_text()
    assert looks in strings(json.loads(text) if target == "gemini-chat" else read_messages(text))
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(LOSS) == 1


@pytest.mark.parametrize("target", ["responses", "codex"])
def test_chat_custom_calls_become_custom_tool_call_items(target: str, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    run = invoke(str(chat_session(tmp_path)), "--unlimited", "--to", target, "-o", str(out), "--report", str(report))
    assert run.exit_code == 0, run.output
    items = [item.get("payload", item) for item in read_messages(out.read_text())]
    call = next(item for item in items if item.get("type") == "custom_tool_call")
    assert call["input"] == PATCH and call["name"] == "apply_patch"
    assert any(item.get("type") == "custom_tool_call_output" for item in items)
    assert LOSS not in {loss["what"] for loss in json.loads(report.read_text())["format"]["losses"]}


def test_a_custom_call_without_a_name_is_one_clear_error(tmp_path: Path) -> None:
    source = write_messages(tmp_path / "bad.jsonl", [
        {"role": "user", "content": "Patch it."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "custom", "custom": {"input": PATCH}}]},
    ])
    out = invoke(str(source), "--unlimited")
    assert out.exit_code == 2
    assert out.stderr.startswith(f"compact: error: {source}:2: invalid message:") and "name" in out.stderr
    assert len(out.stderr.splitlines()) == 1


def test_a_dataset_conversation_keeps_its_custom_call_when_compacted(tmp_path: Path) -> None:
    messages = [json.loads(line) for line in chat_session(tmp_path).read_text().splitlines()]
    filler = [{"role": "user", "content": f"Note {i}: " + "the build log says nothing new. " * 40} for i in range(6)]
    source = tmp_path / "dataset.jsonl"
    source.write_text(json.dumps({"id": 7, "messages": [*messages[:2], *filler, *messages[2:]]}) + "\n")
    out = invoke(str(source), "--max-tokens", "600")
    assert out.exit_code == 0, out.output
    [conversation] = read_messages(out.stdout)
    calls = [c for m in conversation["messages"] for c in m.get("tool_calls") or []]
    assert calls == [custom_call("call_1", PATCH)]
    assert len(conversation["messages"]) < 2 + len(filler) + 4


def test_an_offloaded_custom_call_is_recalled_as_the_transcript_held_it(tmp_path: Path) -> None:
    messages = read_messages(chat_session(tmp_path).read_text())
    filler = [m for i in range(6) for m in ({"role": "user", "content": f"Step {i}: check the logs. " + "Quiet. " * 30},
                                            {"role": "assistant", "content": f"Step {i} checked. " + "Quiet. " * 30})]
    source = write_messages(tmp_path / "long.jsonl", [*messages[:5], *filler, messages[5]])
    store = tmp_path / "store.db"
    run = invoke(str(source), "--max-tokens", "600", "--store", str(store), "-s", "offload", "-o", str(tmp_path / "o"))
    assert run.exit_code == 0, run.output
    assert "apply_patch" not in (tmp_path / "o").read_text()
    found = invoke("recall", "apply_patch", "--store", str(store), "--format", "json")
    assert found.exit_code == 0, found.output
    [hit] = json.loads(found.stdout)
    assert hit["message"] == messages[2]


def test_a_memoised_run_and_the_library_check_see_custom_calls_as_a_fresh_run_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from core.analysis.provider_check import check_transcript
    from core.api import compact_file
    from core.config import MemoryConfig

    monkeypatch.setenv("COMPACT_CACHE_DIR", str(tmp_path / "cache"))
    source = chat_session(tmp_path)
    config = MemoryConfig().with_overrides(max_tokens=4000)
    fresh, memoised = (compact_file(str(source), config) for _ in range(2))
    assert fresh.workspace is not None and memoised.workspace is None  # the second answered by the run memo
    assert [m.data for m in memoised.messages] == [m.data for m in fresh.messages]
    assert fresh.messages[2].data["tool_calls"][0]["function"]["arguments"] == PATCH
    assert check_transcript([m.data for m in fresh.messages], "openai") == []


def test_every_ledger_handle_of_a_codex_session_with_custom_calls_is_recallable(realdata: Path, tmp_path: Path) -> None:
    # The report's `handle` is what a user passes to `compact recall --id`; for a message holding a
    # custom call (Codex's apply_patch) it must name the row the store wrote, not a hash of another shape.
    source = realdata / "codex-cli/codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl"
    store, report_path = tmp_path / "store.db", tmp_path / "r.json"
    run = invoke(str(source), "--max-tokens", "2000", "--store", str(store), "--report", str(report_path),
                 "-o", str(tmp_path / "o.jsonl"))
    assert run.exit_code == 0, run.output
    ledger = json.loads(report_path.read_text())["removed"]
    custom = [e for e in ledger if e["line"] == 30]  # reasoning + the first apply_patch custom call
    assert custom and all(e["handle"] for e in custom)
    missing = []
    for entry in ledger:
        found = invoke("recall", "--id", entry["handle"], "--store", str(store), "--format", "json")
        if found.exit_code != 0:
            missing.append((entry["line"], entry["action"], found.output.strip()))
    assert missing == []
