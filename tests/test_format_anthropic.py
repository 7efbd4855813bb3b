"""Anthropic Messages (issue 5): read as canonical messages, compacted, written back as Anthropic lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from core.messages import is_summary
from tests.helpers import check_bad_line, invoke, invoke_with_report, read_messages

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
BLOCKS = FIXTURES / "anthropic_all_blocks.jsonl"  # every block kind, unknown fields and block types included
SYSTEM_FIRST = FIXTURES / "anthropic_system_message.jsonl"  # the system prompt as a first role=system message
ORPHANS = FIXTURES / "anthropic_orphans.jsonl"  # a result without its call, a call without its result
CLAUDE_CODE = "claude-code/cctrace-phase0-investigation.jsonl"


def blocks(line: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = line.get("content")
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def pairs(out: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    uses = {b["id"] for line in out for b in blocks(line, "tool_use")}
    results = {b["tool_use_id"] for line in out for b in blocks(line, "tool_result")}
    return uses, results


@pytest.mark.parametrize("path", [BLOCKS, SYSTEM_FIRST, ORPHANS], ids=lambda p: p.name)
def test_unlimited_round_trip_gives_every_line_back(path: Path, tmp_path: Path) -> None:
    result, report = invoke_with_report(str(path), "--unlimited", tmp_path=tmp_path)
    assert result.stdout.encode() == path.read_bytes()
    assert report["format"] == {"input": "anthropic", "output": "anthropic", "losses": []}


def test_blocks_become_canonical_messages() -> None:
    decoded = formats.read(str(BLOCKS))
    assert decoded.format == "anthropic"
    roles = [m.role for m in decoded.messages]
    # the line holding two results and text: two tool messages, then the user's text
    assert roles == ["system", "user", "user", "assistant", "tool", "tool", "user", "assistant", "tool", "assistant", "user"]
    source = read_messages(BLOCKS.read_text())
    reply = decoded.messages[3].data
    thinking, _text, unknown = reply["content"]
    assert thinking == source[3]["content"][0]  # verbatim, signature included
    assert unknown == {"type": "future_block", "payload": {"x": 1}}
    assert [c["id"] for c in reply["tool_calls"]] == ["toolu_01A", "toolu_01B"]
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == {"file_path": "app.py"}
    error_result = decoded.messages[5].data
    assert error_result["tool_call_id"] == "toolu_01B"
    assert error_result["content"][1]["type"] == "image"
    assert decoded.messages[6].data == {"role": "user", "content": [{"type": "text", "text": "The test log is above."}]}
    assert decoded.messages[7].data["content"][0]["type"] == "redacted_thinking"


def test_a_system_line_and_a_first_system_message_are_the_pinned_system_prompt(tmp_path: Path) -> None:
    for path in (BLOCKS, SYSTEM_FIRST):
        result, _ = invoke_with_report(str(path), "--strategy", "sliding_window:keep_messages=2", "--max-messages", "2",
                        tmp_path=tmp_path)
        out = read_messages(result.stdout)
        assert out[0] == read_messages(path.read_text())[0]


def test_a_cleared_result_is_written_in_place_with_its_id_and_flags(tmp_path: Path) -> None:
    result, report = invoke_with_report(str(BLOCKS), "--strategy", "clear_tool_results:keep_pairs=1", "--max-tokens", "10",
                                        "--preset", "seed", tmp_path=tmp_path)
    source = BLOCKS.read_text().splitlines()
    out = result.stdout.splitlines()
    assert len(out) == len(source)
    changed = [i for i, (a, b) in enumerate(zip(source, out)) if a != b]
    assert changed == [4]  # only the line with the two old results; every other line byte for byte
    rebuilt = json.loads(out[4])
    first, second = blocks(rebuilt, "tool_result")
    assert first["tool_use_id"] == "toolu_01A" and first["content"].startswith("[compact:")
    assert second == {**json.loads(source[4])["content"][1], "content": second["content"]}  # is_error, x_unknown kept
    assert second["content"].startswith("[compact:")
    assert rebuilt["content"][2] == {"type": "text", "text": "The test log is above."}
    assert {e["line"] for e in report["removed"]} == {5}


def test_orphans_are_reported_with_the_native_ids_and_repaired(tmp_path: Path) -> None:
    usage = json.loads(invoke("count", str(ORPHANS), "--format", "json").stdout)
    assert usage["orphans"] == {"results": [4], "calls": [{"line": 2, "id": "toolu_01LOST"}]}
    result, report = invoke_with_report(str(ORPHANS), "--unlimited", "--repair", tmp_path=tmp_path)
    source = read_messages(ORPHANS.read_text())
    out = read_messages(result.stdout)
    reply = out[1]
    assert reply["content"] == [b for b in source[1]["content"] if b.get("id") != "toolu_01LOST"]  # signature kept
    assert out[3]["content"] == [source[3]["content"][0], source[3]["content"][2]]  # the stray result went, not the rest
    uses, results = pairs(out)
    assert uses == results == {"toolu_01OK"}
    assert {e["reason"] for e in report["removed"]} >= {"orphan tool result: its call is missing"}


def test_invalid_line_is_an_error_naming_it_or_left_out(tmp_path: Path) -> None:
    source = BLOCKS.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*source[:3], '{"role": "user", "content": [oops', *source[3:]]) + "\n")
    _, kept, _ = check_bad_line(broken, 4, tmp_path, "--unlimited")
    assert kept == BLOCKS.read_bytes()


def test_a_line_in_no_anthropic_shape_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(BLOCKS.read_text() + '{"hello": "world"}\n')
    result = invoke(str(path), "--unlimited")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"compact: error: {path}:10: this line is not an Anthropic message")


def test_detected_without_from_and_a_mixed_file_is_an_error(tmp_path: Path) -> None:
    assert formats.read(str(BLOCKS)).format == "anthropic"
    mixed = tmp_path / "mixed.jsonl"
    chat = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    mixed.write_text("\n".join(BLOCKS.read_text().splitlines()[:4] + [json.dumps(chat)]) + "\n")
    result = invoke(str(mixed), "--unlimited")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert f"{mixed}:5: this line is OpenAI chat but the lines before it are Anthropic Messages" in result.stderr


def test_converted_to_openai_and_back_gives_the_same_messages(tmp_path: Path) -> None:
    chat, report = invoke_with_report(str(BLOCKS), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    assert {loss["what"] for loss in report["format"]["losses"]} == {
        "thinking blocks (with their signatures)", "redacted thinking blocks", "document blocks",
        "images in tool messages (chat takes text only there), left out",
        "future_block content parts OpenAI chat does not take in assistant messages, left out",
        "tool results marked as failed (the format has no field for it; the error text is kept)"}
    chat_path = tmp_path / "chat.jsonl"
    chat_path.write_text(chat.stdout)
    back, report = invoke_with_report(str(chat_path), "--unlimited", "--to", "anthropic", tmp_path=tmp_path)
    assert report["format"]["losses"] == []
    again = tmp_path / "again.jsonl"
    again.write_text(back.stdout)
    twice = read_messages(invoke(str(again), "--unlimited", "--to", "openai").stdout)
    # The same texts, calls and results in the same order; two user messages in a row came back as one
    # (Anthropic takes one turn per side, and the API merges them so too).
    assert _texts(twice) == _texts(read_messages(chat.stdout))
    assert len(twice) == len(read_messages(chat.stdout)) - 1


def _texts(messages: list[dict]) -> list[Any]:
    out: list[Any] = []
    for m in messages:
        content = m.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        out += [p.get("text") or p.get("image_url", {}).get("url") for p in parts]
        out += [c["id"] for c in m.get("tool_calls", [])] + [m.get("tool_call_id")]
    return [x for x in out if x]


@pytest.mark.parametrize("name", ["openai-chat/swe-agent-marshmallow-1867.jsonl", "openai-chat/tau-bench-airline-task3.jsonl"])
def test_openai_to_anthropic_and_back_keeps_the_messages(name: str, realdata: Path, tmp_path: Path) -> None:
    converted, report = invoke_with_report(str(realdata / name), "--unlimited", "--to", "anthropic", tmp_path=tmp_path)
    losses = {loss["what"] for loss in report["format"]["losses"]}
    renamed = "tool call ids renamed (reused, or with characters Anthropic refuses)"  # both reuse call ids
    assert all(what.startswith("message fields Anthropic Messages has no place for") or what == renamed
               for what in losses)
    path = tmp_path / "anthropic.jsonl"
    path.write_text(converted.stdout)
    assert formats.read(str(path)).format == "anthropic"
    back = read_messages(invoke(str(path), "--unlimited", "--to", "openai").stdout)
    original = read_messages((realdata / name).read_text())
    assert len(back) == len(original)
    for before, after in zip(original, back):
        assert after["role"] == before["role"]
        assert after.get("content") == before.get("content")
        assert [json.loads(c["function"]["arguments"]) for c in after.get("tool_calls", [])] == [
            json.loads(c["function"]["arguments"]) for c in before.get("tool_calls", [])]
        before_id = before.get("tool_call_id", (before.get("tool_call_ids") or [None])[0])
        after_id = after.get("tool_call_id")
        assert after_id == before_id or str(after_id).startswith(f"{before_id}_")  # a reused id is renamed


def test_a_real_session_compacts_with_calls_and_results_paired(realdata: Path, tmp_path: Path) -> None:
    converted = invoke(str(realdata / CLAUDE_CODE), "--unlimited", "--to", "anthropic")
    path = tmp_path / "session.jsonl"
    path.write_text(converted.stdout)
    original = read_messages(converted.stdout)
    result, report = invoke_with_report(str(path), "--max-tokens", "8000", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    assert report["format"]["input"] == "anthropic"
    assert report["after"]["tokens"] <= 8000
    uses, results = pairs(out)
    assert uses - results == {"toolu_01LYedDqGBy8HJv92hmfSZz1"}  # the input's own unanswered call (session cut off)
    assert results <= uses
    signatures = {b["signature"] for line in original for b in blocks(line, "thinking")}
    kept = [b["signature"] for line in out for b in blocks(line, "thinking")]
    assert kept and set(kept) <= signatures
    assert report["removed"]


def test_what_compact_adds_is_user_text_read_back_as_compacts_own(tmp_path: Path) -> None:
    result, _ = invoke_with_report(str(BLOCKS), "--max-tokens", "60", "--summarizer", "extractive",
                         "--strategy", "summarize:turns=2", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    added = [line for line in out if isinstance(line.get("content"), str) and line["content"].startswith("CUCA summary:")]
    assert len(added) == 1 and added[0]["role"] == "user"
    path = tmp_path / "once.jsonl"
    path.write_text(result.stdout)
    summaries = [m for m in formats.read(str(path)).messages if is_summary(m)]
    assert len(summaries) == 1 and summaries[0].role == "system"
    assert invoke(str(path), "--unlimited").stdout == result.stdout


def test_a_continuation_summary_in_user_text_is_a_summary(tmp_path: Path) -> None:
    path = tmp_path / "continued.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": "This session is being continued from a previous conversation. Summary: ..."})
        + "\n" + json.dumps({"role": "assistant", "content": [{"type": "text", "text": "Carrying on."}]})
        + "\n" + json.dumps({"role": "user", "content": "Go."}) + "\n")
    first = formats.read(str(path), source_format="anthropic").messages[0]  # plain text: --from says which
    assert first.role == "system" and is_summary(first)


def test_a_conversation_opening_with_the_assistant_gets_a_user_turn_first(tmp_path: Path) -> None:
    # The Messages API refuses a first message that is not the user's ("first message must use the
    # "user" role"); a chat greeting that opens with the assistant is common. compact --to anthropic
    # writes a short user turn of its own before it, says so in the report, and reads it back as its own.
    from tests import sdk_oracle

    source = tmp_path / "greeting.jsonl"
    source.write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi."}]))
    result, report = invoke_with_report(str(source), "--unlimited", "--to", "anthropic", tmp_path=tmp_path)
    out = read_messages(result.stdout)
    assert [line.get("role") for line in out] == [None, "user", "assistant", "user", "assistant"]
    assert out[1]["content"].startswith("CUCA note:") and out[2]["content"] == "Hello! How can I help?"
    assert {"what": "a user turn added before the opening assistant message (Anthropic wants a user message first)",
            "count": 1} in report["format"]["losses"]
    raw = result.stdout.encode()
    assert [v.rule for r in sdk_oracle.requests(raw, "anthropic", "anthropic") for v in sdk_oracle.judge(r, "anthropic")] == []
    assert invoke(str(source), "--unlimited", "--to", "anthropic", "--check-for", "anthropic").exit_code == 0

    converted = tmp_path / "converted.jsonl"
    converted.write_text(result.stdout)
    again = invoke(str(converted), "--unlimited", "--to", "anthropic")
    assert again.stdout == result.stdout  # read back as compact's own, not as the user's task
    assert formats.read(str(converted)).messages[1].role == "system"


def test_a_clamped_assistant_text_is_written_once(tmp_path: Path) -> None:
    """A rewritten text block replaces the old one in place; it is not written a second time in front."""
    long = " ".join(f"word{i}" for i in range(400))
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "user", "content": "tell me"},
        {"role": "assistant", "content": [{"type": "text", "text": long}]},
        {"role": "user", "content": "thanks"},
    ]))
    result, report = invoke_with_report(str(path), "--from", "anthropic", "--full", "--no-cache",
                                        "-s", "clamp_oversized_messages:max_part_tokens=50", tmp_path=tmp_path)
    reply = read_messages(result.stdout)[1]["content"]
    assert len(reply) == 1 and "compact:" in reply[0]["text"] and reply[0]["text"].startswith("word0 ")
    written = tmp_path / "written.jsonl"
    written.write_text(result.stdout)
    counted = invoke("count", str(written), "--from", "anthropic", "--format", "json", "--no-cache")
    assert json.loads(counted.stdout)["before"]["tokens"] == report["after"]["tokens"]


def test_a_call_with_empty_arguments_becomes_an_empty_input(tmp_path: Path) -> None:
    # Some OpenAI-compatible servers send "arguments": "" for a call that takes none: that is {} to
    # Anthropic, not an invented {"arguments": ""} argument the tool never had.
    source = tmp_path / "empty_args.jsonl"
    source.write_text("".join(json.dumps(m) + "\n" for m in [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "now", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "assistant", "content": "Noon."}]))
    result, report = invoke_with_report(str(source), "--unlimited", "--to", "anthropic", tmp_path=tmp_path)
    use = blocks(read_messages(result.stdout)[1], "tool_use")
    assert [b["input"] for b in use] == [{}]
    assert report["format"]["losses"] == []
    # pi and Gemini store arguments as an object too.
    pi, pi_report = invoke_with_report(str(source), "--unlimited", "--to", "pi", tmp_path=tmp_path)
    assert '"arguments":{}' in pi.stdout.replace(" ", "") and pi_report["format"]["losses"] == []
    gemini, _ = invoke_with_report(str(source), "--unlimited", "--to", "gemini-chat", tmp_path=tmp_path)
    assert '"args":{}' in gemini.stdout.replace(" ", "")


def test_a_compaction_block_reads_as_a_pinned_summary_and_its_reply_as_the_rest() -> None:
    from core.messages import is_provider_record

    decoded = formats.read(str(Path(__file__).parent / "fixtures/provider_compaction/anthropic_compaction.jsonl"))
    first, reply = decoded.messages[:2]
    assert first.line == reply.line == 6  # the lines before it the API does not read are not messages
    assert is_summary(first) and is_provider_record(first) and first.data["content"][0]["type"] == "compaction"
    assert reply.data["content"] == [{"text": "Now the credit-note path.", "type": "text"}]
    assert [c["id"] for c in reply.data["tool_calls"]] == ["toolu_03"]

