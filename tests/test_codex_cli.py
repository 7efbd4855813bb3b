"""Compacted Codex CLI rollouts resumed by the real Codex CLI, against a fake Responses API on 127.0.0.1.

The CLI (npm ``@openai/codex``, pinned below; the package carries a native
binary for the platform as an optional dependency, about 420 MB on
linux-x64) is installed once into a cache folder with ``npm``; the test is
skipped when Node or npm is missing, the package cannot be installed (no
registry) or its binary does not run here. ``codex exec resume ID "PROMPT"``
runs with ``CODEX_HOME`` in a temporary folder whose ``config.toml`` names a
model provider at tests/fake_responses_api.py (``wire_api = "responses"``),
which records what the CLI sends; the rollout is put where Codex looks for
it, ``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fake_responses_api import fake_responses_api
from tests.npm_clients import installed

CODEX = "0.171.0"
PROMPT = "What is left to do?"
POMODORO = "codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl"
# Codex compacts a history once the tokens the API last reported pass this; the pomodoro rollout's last
# report is 19,856 tokens, what compact leaves of it at --max-tokens 4000 is far below.
COMPACT_LIMIT = 15000


@pytest.fixture(scope="module")
def codex_cli() -> Path:
    cli = installed("@openai/codex", CODEX, "codex", "bin/codex.js")
    version = subprocess.run(["node", str(cli), "--version"], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    if version.returncode != 0:
        pytest.skip(f"the Codex CLI {CODEX} binary does not run on this platform: {version.stderr.strip()[-200:]}")
    return cli


def _config(url: str) -> str:
    return (f'model = "gpt-5"\nmodel_provider = "fake"\nmodel_auto_compact_token_limit = {COMPACT_LIMIT}\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{url}/v1"\nwire_api = "responses"\n'
            'env_key = "CODEX_FAKE_API_KEY"\n')


def resume(cli: Path, rollout: bytes, tmp_path: Path) -> list[dict[str, Any]]:
    """The /v1/responses requests Codex sends when it resumes ``rollout`` with PROMPT."""
    return resumed(cli, rollout, tmp_path)[0]


def resumed(cli: Path, rollout: bytes, tmp_path: Path) -> tuple[list[dict[str, Any]], bytes]:
    """The requests Codex sends when it resumes ``rollout`` with PROMPT, and the rollout it leaves (with
    this turn appended, as the pinned version writes it)."""
    meta = next(r["payload"] for r in rows(rollout) if r.get("type") == "session_meta")
    day, time = meta["timestamp"][:10], meta["timestamp"][11:19].replace(":", "-")
    home, project = tmp_path / "codex", tmp_path / "project"
    project.mkdir(parents=True)
    sessions = home / "sessions" / day.replace("-", "/")
    sessions.mkdir(parents=True)
    path = sessions / f"rollout-{day}T{time}-{meta['id']}.jsonl"
    path.write_bytes(rollout)
    with fake_responses_api() as (url, api):
        (home / "config.toml").write_text(_config(url))
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEX_HOME": str(home),
               "CODEX_FAKE_API_KEY": "sk-test-key"}
        run = subprocess.run(["node", str(cli), "exec", "--skip-git-repo-check", "resume", meta["id"], PROMPT],
                             cwd=project, env=env, capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-2000:]
        return api.bodies("/responses"), path.read_bytes()


def rows(rollout: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in rollout.splitlines() if line.strip()]


def items(rollout: bytes) -> list[dict[str, Any]]:
    """The Responses items of a rollout, in order: the history Codex rebuilds from it (without the field
    of its own that Codex keeps off the wire)."""
    return [{k: v for k, v in r["payload"].items() if k != "internal_chat_message_metadata_passthrough"}
            for r in rows(rollout) if r.get("type") == "response_item"]


def compacted(path: Path, *args: str) -> bytes:
    from tests.helpers import invoke

    run = invoke(str(path), *args)
    assert run.exit_code == 0, run.stderr
    return run.stdout.encode()


def text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or ())


def assert_sent_as_written(request: dict[str, Any], rollout: bytes) -> None:
    """Codex sends its own instructions, then every item of the rollout, unchanged and in order, then
    its context for this run (instructions, environment) and the new prompt, last."""
    sent, history = request["input"], items(rollout)
    assert sent[0]["role"] == "developer" and "Codex" in text_of(sent[0])
    assert sent[1:1 + len(history)] == history
    assert sent[-1]["role"] == "user" and text_of(sent[-1]) == PROMPT
    called = set()
    for item in sent:  # every output follows its call
        if item["type"].endswith("_call"):
            called.add(item["call_id"])
        elif item["type"].endswith("_call_output"):
            assert item["call_id"] in called


def test_codex_resumes_a_compacted_rollout_with_exactly_its_items(
    codex_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    rollout = compacted(realdata / "codex-cli" / POMODORO, "--max-tokens", "4000")
    [request] = resume(codex_cli, rollout, tmp_path)  # one request: not compacted again
    assert_sent_as_written(request, rollout)
    assert any(text_of(i).startswith("CUCA summary:") for i in request["input"] if i["type"] == "message")


def test_an_uncompacted_rollout_over_the_limit_makes_codex_compact_it(
    codex_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    """The control: the rollout as it was reports more tokens than the limit, and Codex summarises it first."""
    requests = resume(codex_cli, (realdata / "codex-cli" / POMODORO).read_bytes(), tmp_path)
    assert len(requests) == 2
    assert "COMPACTION" in text_of(requests[0]["input"][-1])


def test_codex_resumes_what_compact_to_codex_wrote_from_a_claude_code_session(
    codex_cli: Path, realdata: Path, tmp_path: Path
) -> None:
    rollout = compacted(realdata / "claude-code" / "claude-reliability-python-to-rust-port.jsonl",
                        "--max-tokens", "8000", "--to", "codex")
    [request] = resume(codex_cli, rollout, tmp_path)
    assert_sent_as_written(request, rollout)
    assert text_of(request["input"][1]).startswith("Port this Python project to Rust")  # the first prompt
    said = [i for i in request["input"] if i["type"] == "message" and i["role"] == "assistant"]
    assert len(said) >= 10  # the assistant's text, not only its calls


def test_codex_resumes_a_compacted_rollout_it_wrote_itself(codex_cli: Path, realdata: Path, tmp_path: Path) -> None:
    """A rollout holding a turn the pinned version wrote (world_state, token_usage_record lines, its own
    fields on items), compacted again: Codex sends exactly what is left."""
    _, written = resumed(codex_cli, compacted(realdata / "codex-cli" / POMODORO, "--max-tokens", "4000"),
                         tmp_path / "first")
    assert {r["type"] for r in rows(written)} >= {"world_state", "token_usage_record"}
    source = tmp_path / "written.jsonl"
    source.write_bytes(written)
    rollout = compacted(source, "--max-tokens", "3000")
    [request] = resume(codex_cli, rollout, tmp_path / "second")
    assert_sent_as_written(request, rollout)
    assert [text_of(i) for i in request["input"] if i.get("role") == "user"].count(PROMPT) == 2  # both turns
    summaries = [i for i in request["input"] if i["type"] == "message" and text_of(i).startswith("CUCA summary:")]
    assert len(summaries) == 1  # the first compaction's summary folded into the second's, not summarised


def test_codex_resumes_a_2025_layout_rollout_that_to_codex_rewrote(codex_cli: Path, realdata: Path, tmp_path: Path) -> None:
    """Codex resumes no rollout of the 2025 layout ("failed to read session metadata"); `--to codex`
    writes it in the envelope layout, which it does resume."""
    rollout = compacted(realdata / "codex-cli-2025-layout" / "legacy-layout-thirdparty-synthetic.jsonl",
                        "--unlimited", "--to", "codex")
    [request] = resume(codex_cli, rollout, tmp_path)
    history = items(rollout)
    assert rows(rollout)[0]["type"] == "session_meta" and len(history) == 5
    # Every item of the rollout, in order (Codex sends a reasoning item's absent content as null).
    assert [{k: v for k, v in i.items() if v is not None} for i in request["input"][1:1 + len(history)]] == history
    assert text_of(request["input"][1]) == "Create a README file" and text_of(request["input"][-1]) == PROMPT
