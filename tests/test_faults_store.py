"""Fault tests: a store that cannot be written fails the run once, early, with exit 2 and one line.

Each runs the installed `compact` against a real SQLite store made unusable the
way a user meets it: a lock another process holds, a file size limit (what a
full disk looks like to SQLite), a read-only file. The transcript output must
not appear, and nothing may be printed but the one error line.
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

AGENT = SAMPLES / "agent_session.jsonl"


def run(*args: str, cwd: Path, preexec_fn=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["compact", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          preexec_fn=preexec_fn)


def assert_one_line_failure(process: subprocess.CompletedProcess[str], *, code: int = 2) -> str:
    assert process.returncode == code, process.stderr
    lines = process.stderr.splitlines()
    assert len(lines) == 1, process.stderr
    assert lines[0].startswith("compact: error: ")
    assert "Traceback" not in process.stderr
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store that already holds one run's offloads."""
    path = tmp_path / "offload.sqlite"
    first = run(str(AGENT), "--max-tokens", "2000", "--store", str(path), "-o", str(tmp_path / "first.jsonl"),
                "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    return path


def test_a_lock_held_by_another_process_fails_once_and_quickly(tmp_path: Path, store: Path) -> None:
    (tmp_path / "c.toml").write_text("store_timeout = 1\n")
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        process = run(str(AGENT), "--max-tokens", "2000", "--store", str(store), "-c", "c.toml",
                      "-o", "out.jsonl", cwd=tmp_path)
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    line = assert_one_line_failure(process)
    assert line == (f"compact: error: {store}: cannot write the store: another process held it locked for"
                    " over 1 s (rerun when the other compact run has finished)")
    # One wait of the timeout, not one per strategy that offloads (there are several passes).
    assert elapsed < 8
    assert not (tmp_path / "out.jsonl").exists()


def _limit_file_size(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_fails_the_run_with_one_line(tmp_path: Path) -> None:
    # A file size limit is what a full disk is to SQLite: the write comes back short.
    store = tmp_path / "new.sqlite"
    process = run(str(AGENT), "--max-tokens", "2000", "--store", str(store), "--no-cache",
                  cwd=tmp_path, preexec_fn=_limit_file_size(40_000))
    line = assert_one_line_failure(process)
    assert str(store) in line and ("disk" in line)
    assert process.stdout == ""


def test_a_store_that_fills_up_mid_run_fails_the_run(tmp_path: Path, store: Path) -> None:
    """The early probe passes (it needs no new page), the first offload does not: still exit 2, nothing out."""
    from core.api import compact_file
    from core.config import MemoryConfig
    from core.engine.seams import Seams
    from core.errors import StoreUnavailable
    from core.store import OffloadStore

    fresh = tmp_path / "fresh.sqlite"
    opened = OffloadStore.open(fresh)
    pages = opened._conn().execute("PRAGMA page_count").fetchone()[0]
    opened._conn().execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
    opened.check_writable()
    config = MemoryConfig(store=str(fresh)).with_overrides(max_tokens=2000)
    try:
        with pytest.raises(StoreUnavailable, match="the disk is full"):
            compact_file(str(AGENT), config, seams=Seams(store=opened), use_cache=False)
    finally:
        opened.close()


@pytest.fixture
def read_only(store: Path) -> Iterator[Path]:
    """The store made read-only: by its mode, and for root (who ignores modes) by the immutable flag."""
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    store.chmod(0o444)
    immutable = False
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a file read-only")
        made = subprocess.run(["chattr", "+i", str(store)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {made.stderr!r}")
        immutable = True
    try:
        yield store
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(store)], check=True)
        store.chmod(0o644)


def test_a_read_only_store_fails_the_run_with_one_line(tmp_path: Path, read_only: Path) -> None:
    process = run(str(AGENT), "--max-tokens", "2000", "--store", str(read_only), "-o", "out.jsonl",
                  "--report", "report.json", cwd=tmp_path)
    line = assert_one_line_failure(process)
    assert str(read_only) in line and "read-only" in line
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "report.json").exists()


def test_a_store_that_is_fine_still_lets_the_run_through(tmp_path: Path, store: Path) -> None:
    """The probe is a real write: it must not get in the way of an ordinary run (nor of a second one)."""
    for name in ("a.jsonl", "b.jsonl"):
        process = run(str(AGENT), "--max-tokens", "2000", "--store", str(store), "-o", name, "-q", cwd=tmp_path)
        assert process.returncode == 0, process.stderr
        assert process.stderr == ""


def test_a_damaged_row_an_offload_would_rely_on_fails_the_run(tmp_path: Path, store: Path) -> None:
    """The same content keeps one row, so a rerun offloads onto the rows the first run wrote. A row
    whose stored message no longer matches its hash (a damaged disk) would stand in for a message
    that then cannot be recalled: the run fails, writing nothing, instead of trusting it."""
    with sqlite3.connect(store) as db:
        db.execute("UPDATE messages SET message = replace(message, 'e', 'E') WHERE id = (SELECT min(id) FROM messages)")
    process = run(str(AGENT), "--max-tokens", "2000", "--store", str(store), "-o", "out.jsonl",
                  "--report", "report.json", cwd=tmp_path)
    line = assert_one_line_failure(process)
    assert "the store is corrupt (a stored message differs from its hash)" in line
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "report.json").exists()
