"""Compacted Gemini CLI sessions resumed by the real Gemini CLI, against a fake Gemini API on 127.0.0.1.

The CLI (npm ``@google/gemini-cli``, pinned below; it needs Node 20+) is
installed once into a cache folder with ``npm``; the test is skipped when
Node or npm is missing or the package cannot be installed (no registry).
``gemini -m MODEL --resume latest -p "PROMPT"`` runs with ``HOME`` in a
temporary folder, the session under ``~/.gemini/tmp/<project>/chats/`` (the
project's short name registered in ``~/.gemini/projects.json``), an API key
chosen in ``settings.json`` and ``GOOGLE_GEMINI_BASE_URL`` pointing at
tests/fake_gemini_api.py, which records what the CLI sends. Naming the model
keeps Gemini CLI from asking a classifier model which one to use first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_gemini_api import fake_gemini_api
from tests.npm_clients import installed

GEMINI_CLI = "0.61.0"
MODEL = "gemini-2.5-flash"  # a context of 1,048,576 tokens
PROMPT = "What is left to do?"
POMODORO = "gemini-cli-chat-session-pomodoro-timer.json"
# Gemini CLI compresses the history once its estimate passes this share of the model's context (about
# 5,200 tokens): the pomodoro chat as it was is over it, compacted to 3,000 tokens it is under.
COMPRESSION_THRESHOLD = 0.005


@pytest.fixture(scope="module")
def gemini_cli() -> Path:
    if shutil.which("node") is not None:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=60).stdout
        if int(node.lstrip("v").split(".")[0] or 0) < 20:
            pytest.skip(f"the Gemini CLI {GEMINI_CLI} needs Node.js 20 or newer, not {node.strip()}")
    return installed("@google/gemini-cli", GEMINI_CLI, "gemini-cli", "bundle/gemini.js")


def _settings() -> str:
    return json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}},
                       "model": {"compressionThreshold": COMPRESSION_THRESHOLD},
                       "privacy": {"usageStatisticsEnabled": False}})


def resume(cli: Path, session: bytes, name: str, tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The (path, body) of every request Gemini CLI sends when it resumes ``session`` (saved as
    ``chats/name``) with PROMPT."""
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    gemini = home / ".gemini"
    chats = gemini / "tmp" / "project" / "chats"
    chats.mkdir(parents=True)
    (gemini / "settings.json").write_text(_settings())
    (gemini / "projects.json").write_text(json.dumps({"projects": {str(project): "project"}}))
    (gemini / "tmp" / "project" / ".project_root").write_text(str(project))
    (chats / name).write_bytes(session)
    with fake_gemini_api() as (url, api):
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "GEMINI_API_KEY": "test-key",
               "GOOGLE_GEMINI_BASE_URL": url, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
        run = subprocess.run(["node", str(cli), "-m", MODEL, "--resume", "latest", "-p", PROMPT], cwd=project,
                             env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-2000:]
        return list(api.requests)


def turns(requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The bodies of the requests for a turn of the conversation (not Gemini CLI's compression)."""
    return [body for path, body in requests if path.endswith(f"/models/{MODEL}:streamGenerateContent")]


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    return list(content or [])


def history(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The contents Gemini CLI rebuilds from a session's records: a user record's text; a gemini record's
    text and calls, then a user turn of their results; consecutive turns of one role are one content."""
    contents: list[dict[str, Any]] = []

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"] += parts
        elif parts:
            contents.append({"role": role, "parts": parts})

    for record in records:
        if record["type"] == "user":
            add("user", _text_parts(record["content"]))
        elif record["type"] == "gemini":
            calls = record.get("toolCalls") or []
            add("model", _text_parts(record["content"]) + [
                {"functionCall": {"id": c["id"], "name": c["name"], "args": c["args"]}} for c in calls])
            add("user", [part for c in calls for part in c.get("result") or []])
    return contents


def records_of(session: bytes) -> list[dict[str, Any]]:
    """A saved chat's messages, or a session recording's record lines (compact writes no $set, $rewindTo)."""
    if session.lstrip().startswith(b"{") and b"\n{" not in session.strip():
        return list(json.loads(session)["messages"])
    lines = [json.loads(line) for line in session.splitlines() if line.strip()]
    assert not [line for line in lines if "$rewindTo" in line or "$set" in line]
    return [line for line in lines if "type" in line and "id" in line]


def assert_sent_as_written(request: dict[str, Any], session: bytes) -> None:
    """Gemini CLI sends its session context, then the session's history exactly, then the prompt."""
    sent = json.loads(json.dumps(request["contents"]))
    assert sent[0]["role"] == "user" and sent[0]["parts"][0]["text"].startswith("<session_context>")
    assert sent[-1]["role"] == "user" and sent[-1]["parts"][-1] == {"text": PROMPT}
    sent[0]["parts"].pop(0)
    sent[-1]["parts"].pop()
    for part in (p for c in sent for p in c["parts"]):
        # Gemini CLI's own stand-in for the signature a call of a saved chat does not have
        if part.get("thoughtSignature") == "skip_thought_signature_validator":
            del part["thoughtSignature"]
    assert [c for c in sent if c["parts"]] == history(records_of(session))


def compacted(path: Path, *args: str) -> bytes:
    from tests.helpers import invoke

    run = invoke(str(path), *args)
    assert run.exit_code == 0, run.stderr
    return run.stdout.encode()


def test_gemini_resumes_a_compacted_saved_chat_with_exactly_its_history(
    gemini_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    session = compacted(realdata / "gemini-cli" / POMODORO, "--max-tokens", "3000")
    requests = resume(gemini_cli, session, "session-2025-10-21T20-04-0b23371a.json", tmp_path)
    [request] = turns(requests)
    assert len(requests) == 1  # not compressed again
    assert_sent_as_written(request, session)
    assert any(p.get("text", "").startswith("CUCA summary:") for c in request["contents"] for p in c["parts"])


def test_an_uncompacted_chat_over_the_threshold_makes_gemini_compress_it(
    gemini_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    """The control: the chat as it was is over Gemini CLI's threshold, and it asks for a summary first."""
    session = (realdata / "gemini-cli" / POMODORO).read_bytes()
    requests = resume(gemini_cli, session, "session-2025-10-21T20-04-0b23371a.json", tmp_path)
    assert len(turns(requests)) == 1 and len(requests) > 1
    assert all(path.endswith(":generateContent") for path, _ in requests[:-1])


def test_gemini_resumes_a_compacted_session_recording_with_exactly_its_history(
    gemini_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    """The current format (a JSONL recording): made with --to gemini-session, then compacted as such."""
    recording = tmp_path / "session.jsonl"
    recording.write_bytes(compacted(realdata / "gemini-cli" / POMODORO, "--unlimited", "--to", "gemini-session"))
    session = compacted(recording, "--max-tokens", "3000")
    [request] = turns(resume(gemini_cli, session, "session-2026-01-01T00-00-abcdef12.jsonl", tmp_path))
    assert_sent_as_written(request, session)
    assert any(p.get("text", "").startswith("CUCA summary:") for c in request["contents"] for p in c["parts"])


@pytest.mark.parametrize(("target", "suffix"), [("gemini-session", "jsonl"), ("gemini-chat", "json")])
def test_gemini_resumes_what_compact_wrote_from_a_claude_code_session(
    target: str, suffix: str, gemini_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    session = compacted(realdata / "claude-code" / "claude-reliability-python-to-rust-port.jsonl",
                        "--max-tokens", "3000", "--to", target)
    requests = resume(gemini_cli, session, f"session-2026-01-01T00-00-abcdef12.{suffix}", tmp_path)
    [request] = turns(requests)
    assert len(requests) == 1
    assert_sent_as_written(request, session)
    calls = [p["functionCall"]["id"] for c in request["contents"] for p in c["parts"] if "functionCall" in p]
    assert len(calls) >= 5  # the session's calls went with it
