"""Compacted Claude Code sessions resumed by the real Claude Code CLI, against a fake Messages API on 127.0.0.1.

The CLI (npm ``@anthropic-ai/claude-code``, pinned below: the last release
that ships ``cli.js`` for Node 18+) is installed once into a cache folder
with ``npm``; the test is skipped when Node or npm is missing or the package
cannot be installed (no registry). ``claude -p --resume SESSION "PROMPT"`` runs
with ``HOME`` in a temporary folder, the session under
``~/.claude/projects/<cwd>/``, and ``ANTHROPIC_BASE_URL`` pointing at
tests/fake_messages_api.py, which records what the CLI sends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_messages_api import fake_messages_api
from tests.npm_clients import installed

CLAUDE_CODE = "2.1.14"
PROMPT = "What is left to do?"


@pytest.fixture(scope="module")
def claude_cli() -> Path:
    return installed("@anthropic-ai/claude-code", CLAUDE_CODE, "claude-code", "cli.js", timeout=300)


def resume(cli: Path, session: bytes, tmp_path: Path) -> list[dict[str, Any]]:
    """The /v1/messages requests Claude Code sends when it resumes ``session`` with PROMPT."""
    rows = [json.loads(line) for line in session.splitlines() if line.strip()]
    session_id = next(r["sessionId"] for r in rows if "sessionId" in r)
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    folder = home / ".claude" / "projects" / re.sub(r"[^a-zA-Z0-9]", "-", str(project))  # Claude Code's naming
    folder.mkdir(parents=True)
    (folder / f"{session_id}.jsonl").write_bytes(session)
    with fake_messages_api() as (url, api):
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": url,
               "ANTHROPIC_API_KEY": "sk-ant-test-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
               "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}  # Claude Code compacts past half its 200k window
        run = subprocess.run(["node", str(cli), "-p", "--resume", session_id, PROMPT], cwd=project, env=env,
                             capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-2000:]
        return [body for path, body in api.requests if path.endswith("/v1/messages")]


def compacted(realdata: Path, name: str, *args: str) -> bytes:
    from tests.helpers import invoke

    run = invoke(str(realdata / "claude-code" / name), *args)
    assert run.exit_code == 0, run.stderr
    return run.stdout.encode()


def tool_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {b["id"] for m in messages if isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"}


def last_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else content[-1].get("text", "")


SESSIONS = ["cctrace-phase0-investigation.jsonl", "claude-reliability-python-to-rust-port.jsonl"]


def answered(session: bytes) -> set[str]:
    """The tool_use ids of a session file that have their tool_result."""
    rows = [json.loads(line) for line in session.splitlines() if line.strip()]
    results = {b.get("tool_use_id") for r in rows if r.get("type") == "user"
               for b in (r["message"]["content"] if isinstance(r["message"]["content"], list) else [])
               if isinstance(b, dict) and b.get("type") == "tool_result"}
    return tool_ids([r["message"] for r in rows if r.get("type") == "assistant"]) & results


@pytest.mark.parametrize("name", SESSIONS)
def test_claude_code_resumes_a_compacted_session_with_one_request(
    name: str, claude_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    original = (realdata / "claude-code" / name).read_bytes()
    sent_before = tool_ids(resume(claude_cli, original, tmp_path / "before")[0]["messages"])
    session = compacted(realdata, name, "--max-tokens", "8000")
    [request] = resume(claude_cli, session, tmp_path / "after")  # one request: not compacted again
    messages = request["messages"]
    assert last_text(messages[-1]) == PROMPT  # the newest request is there, last
    # The compacted history is what was sent: every call Claude Code sends from the original session
    # (it leaves out a parallel branch off its chain, and an unanswered last call) that compact kept.
    assert tool_ids(messages) == answered(session) & sent_before


def test_an_uncompacted_large_session_makes_claude_code_compact_it(
    claude_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    """The control: the same session as it was is over Claude Code's threshold, and it summarises it first."""
    requests = resume(claude_cli, (realdata / "claude-code" / SESSIONS[0]).read_bytes(), tmp_path)
    assert len(requests) == 2
    assert "summary" in last_text(requests[0]["messages"][-1]).lower()


@pytest.mark.parametrize("name", SESSIONS)
def test_the_request_claude_code_sends_starts_with_a_user_message(
    name: str, claude_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    [request] = resume(claude_cli, compacted(realdata, name, "--max-tokens", "8000"), tmp_path)
    assert request["messages"][0]["role"] == "user"


def test_claude_code_sends_the_older_todo_lists_as_pointers_to_the_newest(
    claude_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    """supersede_plans leaves older TodoWrite calls with a pointer string where the list was: Claude
    Code resumes the session and sends them so, with the newest list whole."""
    [request] = resume(claude_cli, compacted(realdata, SESSIONS[1], "--max-tokens", "8000"), tmp_path)
    plans = [b["input"]["todos"] for m in request["messages"] if isinstance(m.get("content"), list)
             for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use" and b["name"] == "TodoWrite"]
    assert len(plans) >= 2 and isinstance(plans[-1], list)
    assert all(isinstance(p, str) and "plan superseded by the newer TodoWrite" in p for p in plans[:-1])
