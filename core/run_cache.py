"""Whole-run memo: the same transcript with the same settings gives back the stored result.

Rerunning `compact` on an unchanged transcript (an agent loop calling it on
every turn) then costs a hash of the file instead of a parse and a count. The
key covers the file's bytes, its path, every setting, the tokenizer backend
and the code itself, so any change misses. Runs with side effects or other
inputs (a store, a summarizer, a graph) are never memoised.
"""

from __future__ import annotations

import hashlib
import sqlite3
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from core.counting.counter import CacheFile

MAX_OUTPUT_BYTES = 8 << 20
KEEP_RUNS = 50  # at most 400 MB of memoised outputs
_BLOCK = 8 << 20


@cache
def code_fingerprint() -> bytes:
    """A digest of the library's source files (path, size, mtime): a code change misses the memo."""
    digest = hashlib.blake2b(digest_size=16)
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.digest()


def run_key(path: str, settings: dict[str, Any]) -> bytes:
    digest = hashlib.blake2b(digest_size=32)
    digest.update(b"compact-run/1\0" + code_fingerprint() + path.encode() + b"\0")
    digest.update(orjson.dumps(settings, option=orjson.OPT_SORT_KEYS) + b"\0")
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(_BLOCK), b""):
            digest.update(block)
    return digest.digest()


class RunCache(CacheFile):
    """Stored results in the token-count cache's SQLite file; failures only disable it."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            "CREATE TABLE IF NOT EXISTS runs (key BLOB PRIMARY KEY, output BLOB NOT NULL,"
            " report BLOB NOT NULL, used INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)))",
        )

    def get(self, key: bytes) -> tuple[bytes, dict[str, Any]] | None:
        if self._db is None:
            return None
        try:
            row = self._db.execute("SELECT output, report FROM runs WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            with self._db:
                self._db.execute("UPDATE runs SET used = CAST(strftime('%s','now') AS INTEGER) WHERE key = ?", (key,))
        except sqlite3.Error:
            return None
        return bytes(row[0]), orjson.loads(row[1])

    def put(self, key: bytes, output: bytes, report: dict[str, Any]) -> None:
        if self._db is None or len(output) > MAX_OUTPUT_BYTES:
            return
        try:
            with self._db:
                self._db.execute(
                    "INSERT OR REPLACE INTO runs (key, output, report) VALUES (?, ?, ?)",
                    (key, output, orjson.dumps(report)),
                )
                self._db.execute(
                    "DELETE FROM runs WHERE key NOT IN (SELECT key FROM runs ORDER BY used DESC LIMIT ?)",
                    (KEEP_RUNS,),
                )
        except sqlite3.Error:
            pass
