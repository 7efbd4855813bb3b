"""Gemini CLI's JSONL session recording (``chats/session-*.jsonl``): read as Gemini CLI resumes it, compacted,
and written back so that it resumes to exactly the compacted history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core import formats
from tests.helpers import check_bad_line, invoke, invoke_with_report

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
# Hand-made after gemini-cli 016443b5 (see fixtures/formats/README.md): a read whose record is written again
# with its call (an upsert), parallel calls, an info record, $set lines, a /rewind ($rewindTo) of a turn.
SESSION = FIXTURES / "gemini_session.jsonl"
REWOUND = {"7d8e9f0a-1b2c-4d3e-8f4a-5b6c7d8e9f0a", "4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8"}  # u2 and its reply


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def conversation(path: Path, *extra: str) -> list[dict[str, Any]]:
    """What the file holds as canonical messages: read, then written as OpenAI chat (what a model gets)."""
    out = invoke(str(path), "--to", "openai", *(extra or ("--unlimited",)))
    assert out.exit_code == 0, out.output
    return [json.loads(line) for line in out.stdout.splitlines()]


def write_session(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


HEADER = {"sessionId": "s-1", "projectHash": "ab" * 32, "startTime": "2026-03-14T09:00:00.000Z",
          "lastUpdated": "2026-03-14T09:00:00.000Z"}


def record(id_: str, kind: str, text: str) -> dict[str, Any]:
    return {"id": id_, "timestamp": "2026-03-14T09:00:01.000Z", "type": kind, "content": text}


# --- detection and reading ---------------------------------------------------------------------------

def test_a_session_recording_is_detected_and_the_older_gemini_formats_still_are() -> None:
    assert formats.read(str(SESSION)).format == "gemini-session"
    assert formats.read(str(FIXTURES / "gemini_chat.json")).format == "gemini-chat"
    assert formats.read(str(FIXTURES / "gemini_stream.jsonl")).format == "gemini-stream"
    counted = invoke("count", str(SESSION), "--format", "json")
    assert counted.exit_code == 0 and json.loads(counted.stdout)["format"] == "gemini-session"


def test_the_history_is_what_gemini_cli_resumes_upserts_applied_and_the_rewound_turn_gone() -> None:
    decoded = formats.read(str(SESSION))
    data = [m.data for m in decoded.messages]
    assert [d["role"] for d in data] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant",
                                         "user", "assistant", "tool", "assistant"]
    # each message at the line that gave its record's current version: the read's second writing (6), not 4
    assert [m.line for m in decoded.messages] == [2, 6, 6, 7, 7, 7, 9, 15, 17, 17, 18]
    assert data[1]["content"] == "I'll read the timer module first."
    calls = [c for d in data for c in d.get("tool_calls") or ()]
    answered = [d["tool_call_id"] for d in data if d["role"] == "tool"]
    assert [c["id"] for c in calls] == answered  # every call answered, in order
    assert json.loads(calls[0]["function"]["arguments"]) == {"absolute_path": "/work/pomodoro/timer.py"}
    assert data[2]["content"].startswith("import time\n\n\nclass Timer:")
    assert "27 passed" in data[5]["content"]
    texts = " ".join(str(d.get("content")) for d in data)
    assert "resume() as well" not in texts and "Writing resume()" not in texts  # $rewindTo removed them
    assert "Model switched" not in texts  # an info record is shown, never sent to the model


def test_a_messages_checkpoint_replaces_the_history_and_later_records_add_to_it(tmp_path: Path) -> None:
    path = write_session(tmp_path / "session-checkpoint.jsonl", [
        HEADER, record("a", "user", "first question"), record("b", "gemini", "first answer"),
        {"$set": {"messages": [record("a", "user", "first question, masked")], "lastUpdated": "2026-03-14T09:01:00.000Z"}},
        record("c", "gemini", "a later answer"),
        {"$patch": {"updates": [{"id": "c", "content": "a later answer, patched"}]}},
    ])
    decoded = formats.read(str(path))
    assert [(m.line, m.data["content"]) for m in decoded.messages] == [
        (4, "first question, masked"), (6, "a later answer, patched")]


def test_a_rewind_to_an_unknown_id_empties_the_history_as_gemini_cli_does(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", [HEADER, record("a", "user", "gone"), {"$rewindTo": "nope"},
                                                record("b", "user", "kept")])
    assert [m.data["content"] for m in formats.read(str(path)).messages] == ["kept"]


# --- writing back ------------------------------------------------------------------------------------

def test_an_untouched_session_comes_back_byte_for_byte(tmp_path: Path) -> None:
    _, report = invoke_with_report(str(SESSION), "--unlimited", "-o", str(tmp_path / "out.jsonl"), tmp_path=tmp_path)
    assert (tmp_path / "out.jsonl").read_bytes() == SESSION.read_bytes()
    assert report["format"] == {"input": "gemini-session", "output": "gemini-session", "losses": []}


def test_a_compacted_session_resumes_to_exactly_the_compacted_history(tmp_path: Path) -> None:
    written = tmp_path / "session-compacted.jsonl"
    _, report = invoke_with_report(str(SESSION), "--max-tokens", "400", "-o", str(written), tmp_path=tmp_path)
    assert report["after"]["tokens"] < 400 and any(r["action"] == "removed" for r in report["removed"])
    # read back as Gemini CLI would replay it, it is the conversation compaction produced
    assert conversation(written) == conversation(SESSION, "--max-tokens", "400")
    out = lines_of(written)
    original = lines_of(SESSION)
    assert out[0] == {**original[0], "lastUpdated": original[-1]["$set"]["lastUpdated"],
                      "summary": "Add pause() and reset() to the pomodoro Timer"}  # every $set folded in
    records = out[1:]
    assert all("$set" not in r and "$rewindTo" not in r and "$patch" not in r for r in records)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids))  # one line per record: no earlier version left to replay
    removed = {r["id"] for r in original[1:] if "id" in r} - set(ids)
    assert REWOUND <= removed and len(removed) > len(REWOUND)  # compaction removed records too
    assert not any(gone in written.read_text() for gone in removed)  # nothing could bring them back
    # records compaction did not touch are their last line, byte for byte; the info record stays in place
    kept = {json.loads(line)["id"]: line for line in SESSION.read_text().splitlines() if '"id"' in line[:6]}
    assert "f1e2d3c4-b5a6-4798-8a9b-0c1d2e3f4a5b" in ids
    assert written.read_text().splitlines()[-1] == kept["0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e"]
    summary = next(r for r in records if r["id"] not in kept)
    assert summary["type"] == "user" and summary["content"].startswith("CUCA summary")
    invoke_with_report(str(written), "--max-tokens", "400", "-o", str(tmp_path / "twice.jsonl"),
                       tmp_path=tmp_path)
    assert (tmp_path / "twice.jsonl").read_bytes() == written.read_bytes()  # a second run changes nothing


def test_a_compacted_checkpointed_session_drops_the_checkpoint_so_no_record_comes_back(tmp_path: Path) -> None:
    long = "detail " * 400
    masked = [record("a", "user", "the task"), record("b", "gemini", "old answer " + long)]
    path = write_session(tmp_path / "s.jsonl", [
        HEADER, record("a", "user", "the task"), record("b", "gemini", "unmasked answer " + long), {"$set": {"messages": masked}},
        record("c", "user", "new question"), record("d", "gemini", "new answer " + long), record("e", "user", "last request"),
        {"$set": {"memoryScratchpad": "notes"}},
    ])
    out = tmp_path / "out.jsonl"
    _, report = invoke_with_report(str(path), "--max-tokens", "300", "-o", str(out), tmp_path=tmp_path)
    assert report["removed"]
    written = lines_of(out)
    assert all("messages" not in r.get("$set", {}) for r in written) and "unmasked" not in out.read_text()
    assert written[-1] == {"$set": {"memoryScratchpad": "notes"}}  # still after the records: still fresh
    ids = [r["id"] for r in written[1:-1]]
    assert len(ids) == len(set(ids)) and [i for i in ids if i in "ace"] == ["a", "c", "e"]
    assert conversation(out) == conversation(path, "--max-tokens", "300")


# --- conversion --------------------------------------------------------------------------------------

def test_a_session_converts_to_openai_and_back(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in conversation(SESSION)))
    back = tmp_path / "session-new.jsonl"
    _, report = invoke_with_report(str(chat), "--unlimited", "--to", "gemini-session", "-o", str(back), tmp_path=tmp_path)
    assert report["format"]["output"] == "gemini-session"
    first = lines_of(back)[0]
    assert set(first) >= {"sessionId", "projectHash", "startTime", "lastUpdated"} and len(first["projectHash"]) == 64
    assert formats.read(str(back)).format == "gemini-session"
    assert conversation(back) == conversation(SESSION)
    _, from_session = invoke_with_report(str(SESSION), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    assert {"what": "Gemini CLI session recording records that are not messages (info, error, warning)",
            "count": 1} in from_session["format"]["losses"]


def test_from_gemini_session_reads_the_file_as_asked_and_refuses_another_format(tmp_path: Path) -> None:
    assert conversation(SESSION, "--from", "gemini-session") == conversation(SESSION)
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "content": "hi"}\n')
    refused = invoke(str(chat), "--from", "gemini-session", "--unlimited")
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert f"{chat}:1:" in refused.stderr and "metadata line" in refused.stderr


# --- bad lines ---------------------------------------------------------------------------------------

def test_a_broken_line_is_named_or_kept(tmp_path: Path) -> None:
    lines = SESSION.read_text().splitlines(keepends=True)
    broken = tmp_path / "session-broken.jsonl"
    broken.write_text("".join(lines[:6]) + '{"id": "x", "type": "gemini", "content": \n' + "".join(lines[6:]))
    check_bad_line(broken, 7, tmp_path, "--max-tokens", "400")


def test_a_record_with_a_bad_tool_call_list_names_its_line(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", [HEADER, record("a", "user", "hi"),
                                                {**record("b", "gemini", ""), "toolCalls": {"id": "not a list"}}])
    failed = invoke(str(path), "--unlimited")
    assert failed.exit_code == 2 and failed.stderr.count("\n") == 1
    assert f"{path}:3:" in failed.stderr and "toolCalls of the record b" in failed.stderr


# --- Gemini CLI's own context --------------------------------------------------------------------------

# The first lines of a session as current Gemini CLI writes it (verbatim shape): the metadata, then a
# $set checkpoint holding the <session_context> record it puts before every conversation (the date, the
# OS, the workspace tree), then the person's records.
SESSION_CONTEXT = {"$set": {"messages": [{
    "id": "d04923d38bb0f6017037e74183378ef4", "timestamp": "2026-07-31T12:50:23.324Z", "type": "user",
    "content": [{"text": "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
                         "Today's date is Friday, July 31, 2026 (formatted according to the user's locale).\n"
                         "My operating system is: linux\n- **Workspace Directories:**\n  - /work/proj\n"
                         "- **Directory Structure:**\n\nShowing up to 200 items (files + folders).\n\n/work/proj/\n"
                         "</session_context>"}]}], "lastUpdated": "2026-07-31T12:50:23.324Z"}}


def test_the_session_context_gemini_cli_writes_first_is_not_taken_for_the_task(tmp_path: Path) -> None:
    # The task statement (the first request a person typed) is pinned; Gemini CLI's own context record is
    # not a request, so it is not what is pinned (nor what the note of removed turns calls the request).
    task = "Task: rename the Timer class to Clock everywhere in /work/proj and keep the tests green."
    records: list[dict[str, Any]] = [HEADER, SESSION_CONTEXT, record("u0", "user", task)]
    for n in range(1, 7):
        records += [record(f"g{n}", "gemini", f"step {n} " + "detail " * 120),
                    record(f"u{n}", "user", f"continue with part {n} " + "please " * 20)]
    path = write_session(tmp_path / "session-context.jsonl", [*records, record("gz", "gemini", "done")])
    assert conversation(path)[0]["content"].startswith("<session_context>")  # read, and sent, as Gemini CLI does
    out = tmp_path / "out.jsonl"
    for summarizer in ("none", "extractive"):
        run = invoke(str(path), "--max-tokens", "600", "--summarizer", summarizer, "-o", str(out))
        assert run.exit_code == 0, run.output
        kept = conversation(out)
        assert task in [m["content"] for m in kept], (summarizer, kept)
        assert not any('request: "<session_context>' in str(m["content"]) for m in kept)
        assert any(str(m["content"]).startswith(("[compact:", "CUCA summary")) for m in kept)  # something went
