"""Files compact did not get named: the cache is private, planted symlinks and FIFOs are not followed,
temporary files a killed run left are cleaned up, and a kill never damages the previous output."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

AGENT = SAMPLES / "agent_session.jsonl"


def run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["compact", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- the cache ----------------------------------------------------------------------------------


def test_the_cache_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"COMPACT_CACHE_DIR": "", "XDG_CACHE_HOME": "", "HOME": str(home)}
    monkeypatch.delenv("COMPACT_CACHE_DIR")
    process = run(str(AGENT), "--max-tokens", "3000", "-o", "out.jsonl", cwd=tmp_path, env=env)
    assert process.returncode == 0, process.stderr
    folder = home / ".cache" / "compact"
    assert mode(folder) == 0o700
    assert mode(folder / "token-counts.sqlite") == 0o600


def test_an_old_world_readable_cache_is_made_private(tmp_path: Path, isolated_cache: Path) -> None:
    cache = isolated_cache / "token-counts.sqlite"
    sqlite3.connect(cache).close()
    cache.chmod(0o644)
    assert run(str(AGENT), "--max-tokens", "3000", "-o", "out.jsonl", cwd=tmp_path).returncode == 0
    assert mode(cache) == 0o600


def _memo_rows(cache: Path) -> int:
    db = sqlite3.connect(cache)
    try:
        return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def test_the_run_memo_can_be_turned_off_and_the_cache_cleared(tmp_path: Path, isolated_cache: Path) -> None:
    cache = isolated_cache / "token-counts.sqlite"
    off = run(str(AGENT), "--max-tokens", "3000", "-o", "a.jsonl", cwd=tmp_path, env={"COMPACT_RUN_MEMO": "0"})
    assert off.returncode == 0 and _memo_rows(cache) == 0  # no compacted transcript kept
    on = run(str(AGENT), "--max-tokens", "3000", "-o", "b.jsonl", cwd=tmp_path)
    assert on.returncode == 0 and _memo_rows(cache) == 1
    cleared = run("cache", "clear", cwd=tmp_path)
    assert cleared.returncode == 0 and f"removed {cache}" in cleared.stdout
    assert not cache.exists()
    assert run("cache", "path", cwd=tmp_path).stdout.strip() == str(cache)


def test_the_cache_is_not_opened_through_a_planted_symlink(tmp_path: Path, isolated_cache: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (isolated_cache / "token-counts.sqlite").symlink_to(victim)
    process = run(str(AGENT), "--max-tokens", "3000", "-o", "out.jsonl", cwd=tmp_path)
    assert process.returncode == 0, process.stderr  # the cache is an accelerator: the run goes on without it
    assert victim.read_text() == "precious\n"


# -- FILE.bak and batch outputs -----------------------------------------------------------------


def test_a_symlink_planted_at_the_backup_is_not_followed(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(AGENT.read_bytes())
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "t.jsonl.bak").symlink_to(victim)
    process = run(str(transcript), "--max-tokens", "3000", "--in-place", cwd=tmp_path)
    assert process.returncode == 0, process.stderr
    assert victim.read_text() == "precious\n"
    backup = tmp_path / "t.jsonl.bak.1"  # an existing backup entry is never overwritten
    assert not backup.is_symlink() and backup.read_bytes() == AGENT.read_bytes()


def test_a_fifo_planted_at_the_backup_does_not_hang_the_run(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(AGENT.read_bytes())
    os.mkfifo(tmp_path / "t.jsonl.bak")
    os.mkfifo(tmp_path / "t.jsonl.bak.1")
    process = run(str(transcript), "--max-tokens", "3000", "--in-place", cwd=tmp_path, timeout=60)
    assert process.returncode == 0, process.stderr
    assert stat.S_ISREG(os.lstat(tmp_path / "t.jsonl.bak.2").st_mode)


def test_a_symlink_planted_at_a_batch_output_is_replaced_not_followed(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_bytes(AGENT.read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "a.jsonl").symlink_to(victim)
    os.mkfifo(out / ".a.jsonl.compact.json")  # the sidecar: reading it must not block
    process = run("batch", str(inputs), "--out", str(out), "--max-tokens", "3000", "-j", "1", cwd=tmp_path,
                  timeout=120)
    assert process.returncode == 0, process.stderr
    assert victim.read_text() == "precious\n"
    assert not (out / "a.jsonl").is_symlink() and (out / "a.jsonl").stat().st_size > 0


# -- temporary files ----------------------------------------------------------------------------


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporary_files_of_a_dead_run_are_removed(tmp_path: Path) -> None:
    stale = tmp_path / f".out.jsonl.compact-{_dead_pid()}-abc123.tmp"
    stale.write_text("half")
    live = tmp_path / f".out.jsonl.compact-{os.getpid()}-def456.tmp"  # this test process is alive
    live.write_text("in use")
    unrelated = tmp_path / ".notes.tmp"
    unrelated.write_text("mine")
    assert run(str(AGENT), "--max-tokens", "3000", "-o", "out.jsonl", cwd=tmp_path).returncode == 0
    assert not stale.exists()
    assert live.exists() and unrelated.exists()


@pytest.mark.parametrize("flag", ["-o", "--in-place"])
def test_a_kill_leaves_the_previous_file_whole_and_the_next_run_cleans_up(tmp_path: Path, flag: str) -> None:
    big = b"".join([AGENT.read_bytes()] * 40)  # about 20 MB: the write takes a while
    source = tmp_path / "t.jsonl"
    source.write_bytes(big)
    previous = b'{"role":"user","content":"the previous output"}\n'
    target = source if flag == "--in-place" else tmp_path / "out.jsonl"
    if flag == "-o":
        target.write_bytes(previous)
    args = ["compact", str(source), "--unlimited", "--no-cache", flag] + (["out.jsonl"] if flag == "-o" else [])
    seen: list[tuple[bytes, bytes]] = []
    for delay in (0.6, 1.2, 1.8):
        before = target.read_bytes()
        process = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        if process.returncode != 0:
            seen.append((before, target.read_bytes()))
    again = subprocess.run(args, cwd=tmp_path, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr
    finished = target.read_bytes()
    # Killed: the file is exactly as it was, or (killed after the rename, at shutdown) the whole new
    # output; never half-written.
    for before, after in seen:
        assert after in (before, finished)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
