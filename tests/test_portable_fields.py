"""Chat fields other formats have no place for: a refusal is what the assistant said, so it is
written as its text; a participant's name is left out and said so. Never dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import invoke

TARGETS = ["anthropic", "claude-code", "responses", "codex", "pi", "gemini-stream", "gemini-chat", "sharegpt"]
REFUSAL_LOSS = "refusals (written as assistant text: the format has no refusal field)"
NAME_LOSS = "participant names (the format has no field for them), left out"


def chat_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    lines = [{"role": "user", "content": "Write the exploit for me.", "name": "alice"},
             {"role": "assistant", "content": None, "refusal": "I can't help with writing exploits."},
             {"role": "user", "content": "Then explain the CVE."},
             {"role": "assistant", "content": "It is a buffer overflow in the parser.", "refusal": None}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("target", TARGETS)
def test_a_refusal_is_written_as_the_assistants_text_and_a_name_as_a_loss(target: str, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    outcome = invoke(str(chat_file(tmp_path)), "--unlimited", "--to", target, "-o", str(out), "--report", str(report))
    assert outcome.exit_code == 0, outcome.output
    assert "I can't help with writing exploits." in out.read_text()
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(REFUSAL_LOSS) == 1  # the null refusal is no loss
    assert losses.get(NAME_LOSS) == 1
    assert not any("(refusal)" in what or "(name)" in what or what == "user names" for what in losses)
    # What was written reads back, the refusal as an assistant message's text.
    again = invoke(str(out), "--unlimited", "--to", "openai")
    assert again.exit_code == 0, again.output
    replies = [json.loads(line) for line in again.stdout.splitlines() if '"assistant"' in line]
    assert any("I can't help with writing exploits." in json.dumps(r["content"]) for r in replies)


def test_openai_keeps_both_fields_as_they_are(tmp_path: Path) -> None:
    source = chat_file(tmp_path)
    out = invoke(str(source), "--unlimited", "--to", "openai")
    assert out.exit_code == 0
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        json.loads(line) for line in source.read_text().splitlines()]


@pytest.mark.parametrize("target", ["anthropic", "responses", "pi"])
def test_a_refusal_part_is_written_as_a_text_part(target: str, tmp_path: Path) -> None:
    source = tmp_path / "parts.jsonl"
    lines = [{"role": "user", "content": "Write the exploit for me."},
             {"role": "assistant", "content": [{"type": "refusal", "refusal": "No: that would harm people."}]},
             {"role": "user", "content": "Fine."}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, report = tmp_path / "out", tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report)).exit_code == 0
    assert "No: that would harm people." in out.read_text()
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses == {REFUSAL_LOSS: 1}


@pytest.mark.parametrize("target", TARGETS)
def test_other_chat_fields_are_counted_as_left_out_and_null_ones_are_not(target: str, tmp_path: Path) -> None:
    # SWE-agent writes its harness's view of each message beside the content.
    source = tmp_path / "swe.jsonl"
    lines = [{"role": "user", "content": "Fix the bug.", "agent": "main", "message_type": "observation"},
             {"role": "assistant", "content": "Looking.", "thought": "Looking.", "agent": "main", "audio": None}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, report = tmp_path / "out", tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report)).exit_code == 0
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    fields = {what: count for what, count in losses.items() if what.startswith("message fields")}
    assert sorted(fields.values()) == [1, 1] and all(what.endswith(("(agent, message_type)", "(agent, thought)"))
                                                     for what in fields), losses


def test_validate_and_check_for_judge_what_to_writes(tmp_path: Path) -> None:
    # A chat opening with a refusal becomes an Anthropic request opening with the assistant (the refusal
    # kept as its text), so --to anthropic puts its user note first: the check and validate must judge
    # the request --to writes, not the one it wrote before the refusal was kept (then refused).
    source = tmp_path / "refusal_first.jsonl"
    lines = [{"role": "system", "content": "s"}, {"role": "assistant", "content": None, "refusal": "I will not."},
             {"role": "user", "content": "why?"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    checked = invoke(str(source), "--unlimited", "--check-for", "anthropic")
    written = invoke(str(source), "--unlimited", "--to", "anthropic", "--check-for", "anthropic")
    validated = invoke("validate", str(source), "--for", "anthropic")
    assert checked.exit_code == written.exit_code == validated.exit_code == 0
    out = [json.loads(line) for line in written.stdout.splitlines()]
    assert [line.get("role") for line in out] == [None, "user", "assistant", "user"]
    assert out[1]["content"].startswith("CUCA note:") and "I will not." in json.dumps(out[2])


def test_empty_fields_are_no_loss(tmp_path: Path) -> None:
    # What the OpenAI API returns on every message: "annotations": [], "refusal": null; and "name": null.
    source = tmp_path / "api.jsonl"
    lines = [{"role": "user", "content": "hi", "name": None},
             {"role": "assistant", "content": "hello", "refusal": None, "annotations": [], "audio": None},
             {"role": "user", "content": "bye"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", "anthropic", "-o", str(tmp_path / "o"),
                  "--report", str(report)).exit_code == 0
    assert json.loads(report.read_text())["format"]["losses"] == []


EMPTY_LOSS = "messages with nothing to send (no text, parts or calls), left out"


@pytest.mark.parametrize(("target", "left_out"), [("anthropic", 2), ("claude-code", 2), ("responses", 1),
                                                  ("codex", 1), ("gemini-stream", 1)])
def test_an_empty_message_a_target_cannot_send_is_counted_as_left_out(target: str, left_out: int,
                                                                      tmp_path: Path) -> None:
    # An empty user message and a reply of null content: the API targets cannot send them (the
    # Responses family sends the empty user text), and the report says what went.
    source = tmp_path / "empties.jsonl"
    lines = [{"role": "system", "content": "sys"}, {"role": "user", "content": ""},
             {"role": "assistant", "content": None}, {"role": "user", "content": "hi"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, report = tmp_path / "out", tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report)).exit_code == 0
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(EMPTY_LOSS) == left_out
    # A message with something in it is never counted so: only the empty reply is left.
    lines[1]["content"] = "go on"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report)).exit_code == 0
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(EMPTY_LOSS) == 1
