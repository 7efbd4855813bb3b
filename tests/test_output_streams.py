"""Outputs named as a stream compact already holds open (/dev/stdout, /dev/stderr, /dev/fd/N,
/proc/self/fd/N): written to that descriptor, so a pipe works and `>>` appends, never renamed over."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLES

SHORT = SAMPLES / "short_chat.jsonl"  # `--unlimited` writes it back byte for byte
STDOUT_NAMES = ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"]


def compact(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["compact", str(SHORT), "--unlimited", *args], timeout=60, **kwargs)


@pytest.mark.parametrize("name", STDOUT_NAMES)
def test_the_transcript_goes_down_a_pipe(name: str) -> None:
    if not os.path.exists(name):
        pytest.skip(f"no {name} here")
    process = compact("-o", name, capture_output=True)
    assert (process.returncode, process.stderr) == (0, b"")
    assert process.stdout == SHORT.read_bytes()


def test_the_report_goes_down_the_stderr_pipe(tmp_path: Path) -> None:
    process = compact("-o", str(tmp_path / "out.jsonl"), "--report", "/dev/stderr", "-q", capture_output=True)
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stderr)["after"]["messages"] > 0
    assert (tmp_path / "out.jsonl").read_bytes() == SHORT.read_bytes()


@pytest.mark.parametrize("name", STDOUT_NAMES)
def test_an_append_redirect_keeps_what_the_file_held(name: str, tmp_path: Path) -> None:
    """`compact f -o /dev/stdout >> log` replaced log by a rename: what it held was gone, exit 0."""
    if not os.path.exists(name):
        pytest.skip(f"no {name} here")
    log = tmp_path / "log.txt"
    log.write_bytes(b"PREVIOUS\n")
    with open(log, "ab") as stdout:
        process = compact("-o", name, stdout=stdout, stderr=subprocess.PIPE)
    assert process.returncode == 0, process.stderr
    assert log.read_bytes() == b"PREVIOUS\n" + SHORT.read_bytes()


def test_another_open_descriptor_is_written_to(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        process = compact("-o", f"/dev/fd/{write_end}", "-q", pass_fds=(write_end,), capture_output=True)
        os.close(write_end)
        with open(read_end, "rb") as pipe:
            assert pipe.read() == SHORT.read_bytes()
    finally:
        for fd in (read_end, write_end):
            try:
                os.close(fd)
            except OSError:
                pass
    assert (process.returncode, process.stdout, process.stderr) == (0, b"", b"")
    assert list(tmp_path.iterdir()) == []


def test_a_descriptor_that_is_not_open_is_one_line_and_exit_2(tmp_path: Path) -> None:
    process = compact("-o", "/dev/fd/9", capture_output=True, cwd=tmp_path)
    assert process.returncode == 2
    assert process.stderr.decode().splitlines() == [
        "compact: error: /dev/fd/9: cannot write: Bad file descriptor (check it is open for writing)"]
    assert process.stdout == b""


def test_a_run_that_fails_writes_nothing_to_the_stream(tmp_path: Path) -> None:
    """The stream is written with the other outputs, at the end: not when another one cannot be."""
    process = compact("--report", "/dev/stdout", "-o", str(tmp_path / "missing" / "x.jsonl"), capture_output=True)
    assert process.returncode == 2 and b"cannot write" in process.stderr
    assert process.stdout == b""


@pytest.mark.parametrize("name", STDOUT_NAMES)
def test_stdout_named_by_its_path_still_holds_one_thing(name: str, tmp_path: Path) -> None:
    """--report /dev/stdout is --report -: with the transcript also on stdout it is refused, and the
    report alone on stdout is pure JSON (a dry run's plan and a batch table then go to stderr)."""
    if not os.path.exists(name):
        pytest.skip(f"no {name} here")
    both = compact("--report", name, capture_output=True)
    assert both.returncode == 2 and both.stdout == b""
    assert b"--report - needs the transcript in a file" in both.stderr
    alone = compact("-o", str(tmp_path / "out.jsonl"), "--report", name, capture_output=True)
    assert alone.returncode == 0 and json.loads(alone.stdout)["after"]["messages"] > 0
    dry = subprocess.run(["compact", str(SHORT), "--max-tokens", "40", "--dry-run", "--report", name],
                         capture_output=True, timeout=60)
    assert dry.returncode == 0 and json.loads(dry.stdout)["mode"] == "budget"
    batch = subprocess.run(["compact", "batch", str(SHORT), "--out", str(tmp_path / "b"), "--max-tokens", "40",
                            "--report", name, "--table"], capture_output=True, timeout=120)
    assert batch.returncode == 0, batch.stderr
    assert json.loads(batch.stdout)["totals"]["inputs"] == 1
    graph = compact("--graph", str(SAMPLES / "graph" / "valid.json"), "--graph-out", name, capture_output=True)
    assert graph.returncode == 2 and b"--graph-out names stdout" in graph.stderr
