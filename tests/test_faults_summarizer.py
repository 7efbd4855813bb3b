"""Fault tests: a hostile summarizer server on 127.0.0.1 is handled within its bounds, and the key never leaks.

Redirects (the key must not follow them), a server that drips its reply a byte
at a time (the attempt's total time is bounded), a reply too big to be a
summary (read up to a cap), and a server that reflects the key \\u-escaped
(scrubbed once decoded). The last test runs the installed `compact` and looks
for the key in every file and stream the run produced.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest

from core.summarizers.chat_client import MAX_REPLY_BYTES, ChatClient, SummarizerError
from tests.chat_server import ChatServer
from tests.conftest import SAMPLES
from tests.helpers import invoke

if TYPE_CHECKING:
    from collections.abc import Iterator

pytest_plugins = ["tests.chat_server"]

KEY = "sk-test-Zq7uKEYSHOULDNEVERLEAK-4711"
MESSAGES = [{"role": "system", "content": "Summarize."}, {"role": "user", "content": "a b c"}]


@pytest.fixture
def other_server() -> Iterator[ChatServer]:
    """A second server: the host a redirect points at."""
    server = ChatServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


def client_for(server: ChatServer, **options: float) -> ChatClient:
    return ChatClient(server.url, "m", sleep=lambda _: None, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_the_key_stays_home(
    chat_server: ChatServer, other_server: ChatServer, status: int,
) -> None:
    target = other_server.url + "/chat/completions"
    chat_server.raw(b"", status=status, headers={"Location": target})
    with pytest.raises(SummarizerError) as caught:
        client_for(chat_server, retries=0).complete(MESSAGES)
    assert other_server.requests == []  # nothing, let alone the Authorization header, reached the other host
    assert chat_server.requests[0][0]["authorization"] == f"Bearer {KEY}"
    message = str(caught.value)
    assert f"HTTP {status}, a redirect to {target}, which compact does not follow" in message
    assert "--summarizer-url" in message and KEY not in message


def test_a_dripping_server_is_cut_off_at_the_attempts_total_timeout(chat_server: ChatServer) -> None:
    body = orjson.dumps({"choices": [{"message": {"content": "x" * 200}}]})
    chat_server.drip(body, 0.05)  # each byte well within the timeout: only a total bound stops it
    started = time.monotonic()
    with pytest.raises(SummarizerError, match=r"no reply from .* within 1 s"):
        client_for(chat_server, timeout=1.0, retries=0).complete(MESSAGES)
    assert time.monotonic() - started < 2.5


def test_headers_dripped_slowly_are_bounded_too(chat_server: ChatServer) -> None:
    chat_server.delay(3.0)  # no byte at all for 3 s
    started = time.monotonic()
    with pytest.raises(SummarizerError, match="within 0.5 s"):
        client_for(chat_server, timeout=0.5, retries=0).complete(MESSAGES)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "until-close"])
def test_a_huge_reply_is_refused_at_the_cap(chat_server: ChatServer, sized: bool) -> None:
    filler = "y" * (MAX_REPLY_BYTES + 1024)
    body = orjson.dumps({"choices": [{"message": {"content": filler}}]})
    if sized:
        chat_server.raw(body)
    else:
        chat_server.unsized(body)
    with pytest.raises(SummarizerError, match=r"sent a reply over 8 MiB; it was not read"):
        client_for(chat_server, timeout=20.0).complete(MESSAGES)
    assert len(chat_server.requests) == 1  # not retried: it would be as big again


def test_a_key_reflected_with_json_escapes_is_scrubbed_from_the_summary(chat_server: ChatServer) -> None:
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in KEY)
    chat_server.raw(b'{"choices": [{"message": {"content": "your key is ' + escaped.encode() + b' ok"}}]}')
    text = client_for(chat_server).complete(MESSAGES)
    assert text == "your key is [redacted] ok"


def test_a_key_reflected_with_json_escapes_in_an_error_is_scrubbed(chat_server: ChatServer) -> None:
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in KEY)
    chat_server.raw(b'{"error": {"message": "bad key ' + escaped.encode() + b'"}}', status=401)
    with pytest.raises(SummarizerError) as caught:
        client_for(chat_server).complete(MESSAGES)
    assert KEY not in str(caught.value) and "bad key [redacted]" in str(caught.value)


def test_the_key_lands_in_no_file_the_run_writes(
    tmp_path: Path, chat_server: ChatServer, other_server: ChatServer, isolated_cache: Path,
) -> None:
    """A server that redirects, then one that reflects the key escaped: nothing compact writes holds it."""
    escaped = "".join(f"\\u{ord(ch):04x}" for ch in KEY)
    chat_server.raw(b"", status=302, headers={"Location": other_server.url + "/chat/completions"})
    chat_server.default = lambda request: f"decision: keep going. rationale: key {KEY}"
    chat_server.raw(b'{"choices": [{"message": {"content": "summary ' + escaped.encode()
                    + b' decision rationale"}}]}')
    store = tmp_path / "store.sqlite"
    process = subprocess.run(
        ["compact", str(SAMPLES / "agent_session.jsonl"), "--max-tokens", "3000", "--store", str(store),
         "-s", "summarize", "-s", "offload", "-s", "sliding_window",
         "--summarizer", "openai", "--summarizer-url", chat_server.url, "--summarizer-model", "m",
         "-o", str(tmp_path / "out.jsonl"), "--report", str(tmp_path / "report.json"), "--table"],
        capture_output=True, text=True, timeout=120,
        env={**_env(), "OPENAI_API_KEY": KEY, "COMPACT_CACHE_DIR": str(isolated_cache)},
    )
    assert process.returncode == 4, process.stderr  # the redirect made the summary fail: written, not silent
    assert other_server.requests == []
    assert KEY not in process.stdout and KEY not in process.stderr
    written = [p for folder in (tmp_path, isolated_cache) for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "out.jsonl" for p in written) and any(p.name == "store.sqlite" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    report = json.loads((tmp_path / "report.json").read_text())
    assert any(a["strategy"] == "summarize" for a in report["actions"])


# What `export OPENAI_API_KEY="$(cat key.txt)"` gives when the file has a second line, and its kin.
UNSENDABLE_KEYS = {  # the key, and what the error says of it (never the key itself)
    "a second line": ("sk-SECRET123\nX-Evil: 1", "a line break"),
    "a carriage return": ("sk-SECRET123\rX", "a line break"),
    "an escape character": ("sk-SECRET123\x1b[31m", "an unprintable character (U+001B)"),
    "a curly quote": ("sk-SECRET123\u2019", "a character outside Latin-1 (U+2019)"),
}


@pytest.mark.parametrize(("bad_key", "holds"), UNSENDABLE_KEYS.values(), ids=UNSENDABLE_KEYS.keys())
def test_a_key_no_header_can_carry_is_refused_before_any_request(
    tmp_path: Path, chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch, bad_key: str, holds: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", bad_key)
    result = invoke(str(SAMPLES / "agent_session.jsonl"), "--max-tokens", "3000", "--summarizer", "openai",
                    "--summarizer-url", chat_server.url, "--summarizer-model", "m",
                    "-o", str(tmp_path / "out.jsonl"), "--report", str(tmp_path / "report.json"))
    assert result.exit_code == 2, result.output  # a bad setting, like a bad --summarizer-url: before any work
    assert result.stderr == (f"compact: error: $OPENAI_API_KEY holds {holds}, which an HTTP header cannot carry "
                             "(set OPENAI_API_KEY to the key alone, on one line)\n")
    assert "SECRET" not in result.output
    assert chat_server.requests == [] and list(tmp_path.iterdir()) == []


def test_a_key_quoted_escaped_in_an_error_is_scrubbed(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the check (the variable changed after it): http.client quotes the header's repr, \\n and all."""
    client = client_for(chat_server, retries=0)
    monkeypatch.setenv("OPENAI_API_KEY", UNSENDABLE_KEYS["a second line"][0])
    with pytest.raises(SummarizerError) as caught:
        client.complete(MESSAGES)
    assert "SECRET" not in str(caught.value) and "[redacted]" in str(caught.value)
    assert chat_server.requests == []


def _env() -> dict[str, str]:
    import os

    return {name: value for name, value in os.environ.items() if name != "OPENAI_API_KEY"}


def test_a_summarizer_that_fails_is_not_silent_without_the_table(tmp_path: Path, dead_port: int) -> None:
    (tmp_path / "c.toml").write_text("summarizer_timeout = 1\nsummarizer_retries = 0\n")
    process = subprocess.run(
        ["compact", str(SAMPLES / "agent_session.jsonl"), "--max-tokens", "3000", "--summarizer", "openai",
         "--summarizer-url", f"http://127.0.0.1:{dead_port}/v1", "--summarizer-model", "m", "-c", "c.toml",
         "-o", "out.jsonl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(),
    )
    assert process.returncode == 4, process.stderr  # the other strategies went on; the exit code says it failed
    assert (tmp_path / "out.jsonl").stat().st_size > 0
    lines = process.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compact: warning: summarize failed in pass 1: cannot reach")
    # --quiet leaves out warnings, not errors: the exit code gets its one line.
    quiet = subprocess.run([*process.args, "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env())
    assert quiet.returncode == 4
    assert quiet.stderr.splitlines() == [
        "compact: error: the summarizer failed: the transcript was written without a summary (a rerun tries again)"]


@pytest.fixture
def dead_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
