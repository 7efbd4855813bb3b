"""pi coding-agent sessions (core/formats/pi.py): read along the current branch, written back as a tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core import formats
from core.api import compact_file
from core.config import MemoryConfig, StrategySpec
from core.messages import is_summary
from tests.helpers import invoke

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
SESSION = FIXTURES / "pi_session.jsonl"  # with a compaction entry
NO_COMPACTION = FIXTURES / "pi_no_compaction.jsonl"  # the same session before pi compacted it


def entries(path: Path | str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def compacted(path: Path, tmp_path: Path, *strategies: str, **settings: Any) -> tuple[Any, Path]:
    """Compact in-process; returns (the result, the file written)."""
    if strategies:
        settings["strategies"] = tuple(StrategySpec.parse(s) for s in strategies)
    config = MemoryConfig().with_overrides(**settings)
    result = compact_file(str(path), config, use_cache=False)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"".join(bytes(chunk) for chunk in result.chunks()))
    return result, out


def plain(data: dict[str, Any]) -> dict[str, Any]:
    """A tool result's content as text: pi keeps it as a list of text blocks, compact writes a string."""
    content = data.get("content")
    if data.get("role") == "tool" and isinstance(content, list) and all(p.get("type") == "text" for p in content):
        return {**data, "content": "\n\n".join(p["text"] for p in content)}
    return data


def check_tree(out: list[dict[str, Any]]) -> None:
    """Every link resolves and pi's conversation pairs every call with its result."""
    ids = {e["id"] for e in out if e.get("type") != "session"}
    assert len(ids) == len([e for e in out if e.get("type") != "session"]), "duplicate entry ids"
    for entry in out:
        for key in ("parentId", "targetId", "fromId", "firstKeptEntryId"):
            if entry.get(key) is not None:
                assert entry[key] in ids, f"{entry['id']}.{key} -> {entry[key]} is not in the file"


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    for source in (SESSION, NO_COMPACTION):
        out = tmp_path / "out.jsonl"
        result = invoke(str(source), "--unlimited", "-o", str(out), "--report", str(tmp_path / "r.json"))
        assert result.exit_code == 0, result.stderr
        assert out.read_bytes() == source.read_bytes()
        assert entries(out) == entries(source)
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["format"] == {"input": "pi", "output": "pi", "losses": []}


def test_reads_what_pi_sends() -> None:
    decoded = formats.read(str(SESSION))
    messages = [m.data for m in decoded.messages]
    # The latest compaction's summary comes first, then what it kept (from firstKeptEntryId), then the rest.
    assert is_summary(decoded.messages[0]) and messages[0]["content"].startswith("## Goal")
    assert messages[1]["role"] == "user" and messages[1]["content"][1]["type"] == "image_url"
    assert messages[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    text = json.dumps(messages)
    assert "Reading src/billing/invoice.py" not in text  # hidden by the compaction
    assert "hunter2" not in text  # a `!!` command pi does not send
    assert "max_attempts = 30" not in text  # the abandoned branch
    lint = next(m for m in messages if "ruff: 3 warnings" in json.dumps(m))
    assert lint["role"] == "user"  # a custom_message is sent as user text
    assistant = next(m for m in messages if m.get("tool_calls"))
    assert assistant["content"][0]["type"] == "thinking"  # kept as the block it is
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"])["path"] == "src/billing"
    results = [m for m in messages if m["role"] == "tool"]
    assert {r["tool_call_id"] for r in results} == {c["id"] for m in messages for c in m.get("tool_calls", [])}


def test_reads_the_whole_branch_without_a_compaction() -> None:
    messages = [m.data for m in formats.read(str(NO_COMPACTION)).messages]
    text = json.dumps(messages)
    assert "Reading src/billing/invoice.py" in text and "Ran `git status --short`" in text
    summary = next(m for m in messages if "raising max_attempts" in json.dumps(m).lower())
    assert summary["role"] == "user"  # a branch summary is sent as user text
    assert "max_attempts = 30" not in text


@pytest.mark.parametrize("source", [SESSION, NO_COMPACTION], ids=["compaction", "no-compaction"])
def test_max_tokens_compaction_keeps_the_tree(source: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    out = tmp_path / "out.jsonl"
    result = invoke(str(source), "--max-tokens", "8000", "-o", str(out), "--report", str(report_path))
    assert result.exit_code == 0, result.stderr
    report = json.loads(report_path.read_text())
    assert report["before"]["tokens"] > 8000 >= report["after"]["tokens"]
    assert report["removed"]
    written = entries(out)
    check_tree(written)
    before = entries(source)
    # Lines that are not messages pi sends are all still there, unchanged apart from their links.
    kept_types = {"session", "model_change", "thinking_level_change", "custom", "label", "session_info", "pin_marker"}
    assert [e for e in written if e["type"] in kept_types] == [e for e in before if e["type"] in kept_types]
    assert any("max_attempts = 30" in json.dumps(e) for e in written)  # the abandoned branch stays
    back = formats.read(str(out))
    assert not formats.read(str(out)).skipped_lines
    calls = {c["id"] for m in back.messages for c in m.data.get("tool_calls", [])}
    answered = {m.data["tool_call_id"] for m in back.messages if m.role == "tool"}
    assert calls == answered
    rewritten = {r["line"] for r in report["removed"] if r["action"] == "rewritten"}
    thinking_only = {r["line"] for r in report["removed"] if r["strategy"] == "drop_old_thinking"}
    for number in rewritten:
        if number in thinking_only:  # an earlier turn's thinking, which no model reads: the report is its trace
            assert not any(b.get("type") == "thinking" for b in written[number - 1]["message"]["content"])
            continue
        assert "compact:" in json.dumps(written[number - 1])  # a placeholder, or a cut marked in the text
        assert "details" not in written[number - 1]["message"]  # the tool's copy of the output goes too


STRATEGIES = [
    (("summarize:turns=2",), {"summarizer": "extractive"}),
    (("drop_turns",), {}),
    (("sliding_window:keep_messages=6",), {}),
    (("clear_tool_results",), {}),
]


@pytest.mark.parametrize("source", [SESSION, NO_COMPACTION], ids=["compaction", "no-compaction"])
@pytest.mark.parametrize(("strategies", "settings"), STRATEGIES, ids=[s[0][0] for s in STRATEGIES])
def test_pi_sends_what_compact_kept(source: Path, strategies: tuple[str, ...], settings: dict[str, Any],
                                    tmp_path: Path) -> None:
    result, out = compacted(source, tmp_path, *strategies, max_tokens=3000, **settings)
    written = entries(out)
    check_tree(written)
    assert sum(e["type"] == "compaction" for e in written) == sum(e["type"] == "compaction" for e in entries(source))
    back = [plain(m.data) for m in formats.read(str(out)).messages]
    expected = [plain(m.data) for m in result.messages]
    if source == SESSION and not any(is_summary(m) for m in result.messages):
        # A compaction also hides what it summarized, so it stays even when its summary went.
        assert back[0] == {"role": "system", "content": "[compact: summary removed]"}
        back = back[1:]
    assert back == expected


def test_added_messages_are_linked_into_the_branch(tmp_path: Path) -> None:
    _, out = compacted(NO_COMPACTION, tmp_path, "summarize:turns=2", max_tokens=3000, summarizer="extractive",
                       preset="seed")
    written = entries(out)
    added = [e for e in written if e["type"] == "custom_message" and e["customType"] == "compact"]
    assert len(added) == 1 and added[0]["content"].startswith("CUCA summary:")
    child = next(e for e in written if e.get("parentId") == added[0]["id"])
    assert child["type"] == "message"  # the summary sits on the path, before the turn it precedes
    # Children of removed entries hang from the nearest surviving ancestor.
    abandoned = next(e for e in written if "max_attempts = 30" in json.dumps(e) and e["message"]["role"] == "assistant")
    assert abandoned["parentId"] in {e["id"] for e in written}
    again = compact_file(str(out), MemoryConfig().with_overrides(max_tokens=3000), use_cache=False)
    assert is_summary(next(m for m in again.messages if "CUCA summary" in json.dumps(m.data)))


def test_summary_folds_into_the_compaction_entry(tmp_path: Path) -> None:
    _, out = compacted(SESSION, tmp_path, "summarize:turns=1", max_tokens=3000, summarizer="extractive",
                       preset="seed")
    written = entries(out)
    compaction = next(e for e in written if e["type"] == "compaction")
    assert compaction["summary"].startswith("CUCA summary:")
    ids = [e.get("id") for e in written]
    assert ids.index(compaction["firstKeptEntryId"]) <= ids.index(compaction["id"])


def test_conversion_to_openai_and_back(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    report = tmp_path / "r.json"
    assert invoke(str(NO_COMPACTION), "--unlimited", "--to", "openai", "-o", str(chat), "--report", str(report)).exit_code == 0
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    thinking = sum(1 for m in formats.read(str(NO_COMPACTION)).messages for p in m.data.get("content") or []
                   if isinstance(p, dict) and p.get("type") == "thinking")
    assert thinking and losses["thinking blocks (with their signatures)"] == thinking
    back = tmp_path / "back.jsonl"
    assert invoke(str(chat), "--unlimited", "--to", "pi", "-o", str(back)).exit_code == 0
    check_tree(entries(back))
    original = formats.read(str(NO_COMPACTION)).messages
    again = formats.read(str(back)).messages

    def comparable(data: dict[str, Any]) -> dict[str, Any]:  # what chat carries: no thinking, text joined
        data = plain(data)
        content = data.get("content")
        if isinstance(content, list):
            kept = [p for p in content if p.get("type") not in ("thinking", "citation")]  # citation: not a chat part
            if all(p.get("type") == "text" for p in kept):
                content = "\n\n".join(p["text"] for p in kept) if kept else (None if data.get("tool_calls") else "")
            else:
                content = [{"type": p["type"], **({"text": p["text"]} if "text" in p else {"image_url": p.get("image_url")})} for p in kept]
        return {**data, "content": content}

    assert [comparable(m.data) for m in again] == [comparable(m.data) for m in original]


def test_openai_to_pi_and_back(realdata: Path, tmp_path: Path) -> None:
    source = realdata / "openai-chat" / "swe-agent-marshmallow-1867.jsonl"
    session = tmp_path / "s.jsonl"
    report = tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", "pi", "-o", str(session), "--report", str(report)).exit_code == 0
    written = entries(session)
    assert written[0]["type"] == "session" and written[0]["version"] == 3
    check_tree(written)
    assert any(b.get("type") == "toolCall" and isinstance(b["arguments"], dict)
               for e in written if e["type"] == "message" for b in e["message"]["content"] if isinstance(b, dict))
    losses = [loss["what"] for loss in json.loads(report.read_text())["format"]["losses"]]
    assert any("system messages" in what for what in losses)
    back = tmp_path / "back.jsonl"
    assert invoke(str(session), "--unlimited", "--to", "openai", "-o", str(back)).exit_code == 0
    keys = ("role", "content", "tool_calls", "tool_call_id")
    start = [plain({k: m[k] for k in keys if k in m}) for m in map(json.loads, source.read_text().splitlines())]
    end = [plain({k: m[k] for k in keys if k in m}) for m in map(json.loads, back.read_text().splitlines())]
    assert [m["role"] for m in end] == [m["role"] for m in start]
    assert [m.get("content") for m in end] == [m.get("content") for m in start]
    def calls(message: dict[str, Any]) -> list[tuple[str, str, Any]]:  # pi keeps arguments as objects
        return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in message.get("tool_calls") or []]

    assert [calls(m) for m in end] == [calls(m) for m in start]


def test_detected_without_from(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    result = invoke(str(SESSION), "--unlimited", "-o", str(tmp_path / "o.jsonl"), "--report", str(report))
    assert result.exit_code == 0
    assert json.loads(report.read_text())["format"]["input"] == "pi"


def test_a_file_mixing_pi_and_claude_code_is_refused(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines()
    claude = json.dumps({"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
                         "message": {"role": "user", "content": "hi"}})
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([*lines[:5], claude, *lines[5:]]) + "\n")
    result = invoke(str(mixed), "--max-tokens", "8000")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and f"{mixed}:6:" in result.stderr


def test_invalid_line_is_an_error_or_left_out_with_the_next_entry_linked_past_it(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines()
    lines[40] = lines[40][:-5]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    failed = invoke(str(broken), "--max-tokens", "8000")
    assert failed.exit_code == 2 and f"{broken}:41:" in failed.stderr and "--skip-invalid" in failed.stderr
    kept = invoke(str(broken), "--unlimited", "--skip-invalid")
    assert kept.exit_code == 0, kept.output
    before = [json.loads(line) for line in lines[:40] + lines[41:]]
    after = [json.loads(line) for line in kept.stdout.splitlines()]
    assert after[40] == {**before[40], "parentId": before[39]["id"]}  # its parent was the line left out
    assert after[:40] + after[41:] == before[:40] + before[41:]


def test_orphans_and_repair_use_pi_ids(tmp_path: Path) -> None:
    written = entries(SESSION)
    result_entry = next(e for e in reversed(written) if e["type"] == "message" and e["message"]["role"] == "toolResult"
                        and e["message"]["toolName"] == "bash")
    call_id = result_entry["message"]["toolCallId"]
    children = [e for e in written if e.get("parentId") == result_entry["id"]]
    for child in children:
        child["parentId"] = result_entry["parentId"]
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in written if e is not result_entry))
    report = tmp_path / "r.json"
    out = tmp_path / "out.jsonl"
    assert invoke(str(cut), "--unlimited", "-o", str(out), "--report", str(report)).exit_code == 0
    assert [c["id"] for c in json.loads(report.read_text())["orphans"]["calls"]] == [call_id]
    assert invoke(str(cut), "--unlimited", "--repair", "-o", str(out), "--report", str(report)).exit_code == 0
    repaired = entries(out)
    check_tree(repaired)
    blocks = [b for e in repaired if e["type"] == "message" for b in e["message"].get("content", []) if isinstance(b, dict)]
    assert call_id not in {b.get("id") for b in blocks if b.get("type") == "toolCall"}
    assert any(b.get("type") == "toolCall" and b["name"] == "edit" for b in blocks)  # its sibling call stays


@pytest.mark.parametrize("fixture", ["claude_code_sidechain.jsonl", "claude_code_resumed.jsonl"])
def test_a_parent_sessions_result_is_left_out_of_a_pi_session_as_a_loss(fixture: str, tmp_path: Path) -> None:
    # pi names the call a result answers; a result answered in the parent session has no call here
    # to name: left out and reported, as every API target does, not written with toolCallId null.
    session, report = tmp_path / "s.jsonl", tmp_path / "r.json"
    assert invoke(str(FIXTURES / fixture), "--unlimited", "--to", "pi", "-o", str(session),
                  "--report", str(report)).exit_code == 0
    written = entries(session)
    check_tree(written)
    results = [e["message"] for e in written if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert all(isinstance(r["toolCallId"], str) for r in results)
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get("tool results whose call is not in the transcript (a parent session's), left out") == 1
    assert invoke(str(session), "--unlimited", "-o", str(tmp_path / "again.jsonl")).exit_code == 0
