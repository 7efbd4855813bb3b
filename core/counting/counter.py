"""Counting messages: each distinct text once per run, long texts once across runs."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from core.counting.tokenizers import (
    FRAMING_PER_MESSAGE,
    FRAMING_PER_NAME,
    FRAMING_REPLY,
    TokenCounter,
)
from core.messages import IMAGE_TOKENS, Message, countable_text, image_count

# Reports (what, done, total) as long counts go; the CLI draws a bar on a terminal.
Progress = Callable[[str, int, int], None]
PROGRESS_CHUNK = 2000
# Shorter texts are cheaper to count than to look up.
PERSIST_MIN_CHARS = 512
_SQL_CHUNK = 500


def default_cache_path() -> Path:
    base = os.environ.get("COMPACT_CACHE_DIR")
    if base:
        return Path(base) / "token-counts.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "compact" / "token-counts.sqlite"


CACHE_SUFFIXES = ("", "-wal", "-shm")


def open_cache_db(path: Path, table_sql: str) -> sqlite3.Connection:
    """The user's cache file (WAL, shared by concurrent runs) with ``table_sql`` applied; raises on failure.

    The cache holds the texts' digests and, in the run memo, whole compacted
    transcripts: it is made private (folder 0700, file 0600; SQLite gives its
    -wal and -shm files the file's mode) and never opened through a symlink.
    """
    _private_folder(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)  # a cache made by an older compact (0644)
    finally:
        os.close(fd)
    db = sqlite3.connect(path, timeout=5.0)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(table_sql)
        db.commit()
    except sqlite3.Error:
        db.close()
        raise
    return db


def _private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.name == "compact" and folder.stat().st_mode & 0o077:
        folder.chmod(0o700)  # our own folder under ~/.cache, made 0755 by an older compact


def clear_cache(path: Path | None = None) -> list[Path]:
    """Delete the cache file (token counts and run memo) and its -wal/-shm; returns what was removed."""
    path = path or default_cache_path()
    removed = []
    for suffix in CACHE_SUFFIXES:
        target = Path(f"{path}{suffix}")
        try:
            target.unlink()
        except FileNotFoundError:
            continue
        removed.append(target)
    return removed


def run_memo_enabled() -> bool:
    """``COMPACT_RUN_MEMO=0`` turns off the run memo (the token counts are still cached)."""
    return os.environ.get("COMPACT_RUN_MEMO", "1").strip().lower() not in ("0", "false", "no", "off")


class CacheFile:
    """A cache in the user's cache file (see open_cache_db), opened at construction.

    A cache is an accelerator only: when the file cannot be opened it stays
    closed, ``error`` says why, and every lookup misses and every store is skipped.
    """

    def __init__(self, path: Path, table_sql: str) -> None:
        self.path = path
        self.error: str | None = None
        self._db: sqlite3.Connection | None = None
        try:
            self._db = open_cache_db(path, table_sql)
        except (sqlite3.Error, OSError) as exc:
            self.error = str(exc)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class CountCache(CacheFile):
    """A persistent map (encoder, blake2b of text) -> tokens in one SQLite file.

    The cache is an accelerator only: if it cannot be opened or written
    (read-only home, locked file), counting carries on without it.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            "CREATE TABLE IF NOT EXISTS counts (encoder TEXT NOT NULL, digest BLOB NOT NULL,"
            " tokens INTEGER NOT NULL, PRIMARY KEY (encoder, digest)) WITHOUT ROWID",
        )
        self.hits = 0

    def lookup(self, encoder: str, digests: Sequence[bytes]) -> dict[bytes, int]:
        found: dict[bytes, int] = {}
        if self._db is None or not digests:
            return found
        try:
            for start in range(0, len(digests), _SQL_CHUNK):
                chunk = digests[start : start + _SQL_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT digest, tokens FROM counts WHERE encoder = ? AND digest IN ({marks})",
                    (encoder, *chunk),
                )
                found.update(rows)
        except sqlite3.Error as exc:
            self.error = str(exc)
        self.hits += len(found)
        return found

    def store(self, encoder: str, counts: dict[bytes, int]) -> None:
        if self._db is None or not counts:
            return
        try:
            with self._db:
                self._db.executemany(
                    "INSERT OR IGNORE INTO counts (encoder, digest, tokens) VALUES (?, ?, ?)",
                    [(encoder, digest, tokens) for digest, tokens in counts.items()],
                )
        except sqlite3.Error as exc:
            self.error = str(exc)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class MessageCounter:
    """Counts messages with a token counter, remembering every text it has counted."""

    def __init__(self, counter: TokenCounter, *, framing: bool = False, cache: CountCache | None = None) -> None:
        self.counter = counter
        self.framing = framing
        self.cache = cache
        self._memo: dict[str | bytes, int] = {}
        self.texts_counted = 0
        self.progress: Progress | None = None

    @property
    def cache_key(self) -> str:
        return f"{self.counter.backend}:{self.counter.name}"

    def reply_priming(self) -> int:
        return FRAMING_REPLY if self.framing else 0

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        # Long texts are remembered by digest, not by the text: the memo then holds a few
        # bytes per distinct text instead of keeping every joined text alive for the run.
        keys: list[str | bytes] = [t if len(t) < PERSIST_MIN_CHARS else _digest(t) for t in texts]
        memo = self._memo
        missing: dict[str | bytes, str] = {}
        for key, text in zip(keys, texts):
            if key not in memo and key not in missing:
                missing[key] = text
        if missing:
            self._count_missing(missing)
        return [memo[key] for key in keys]

    def _count_missing(self, missing: dict[str | bytes, str]) -> None:
        if self.cache is not None:
            digests = [key for key in missing if isinstance(key, bytes)]
            for digest, tokens in self.cache.lookup(self.cache_key, digests).items():
                self._memo[digest] = tokens
                del missing[digest]
        if not missing:
            return
        counts = self.counter.count_batch(list(missing.values()))
        self.texts_counted += len(counts)
        fresh: dict[bytes, int] = {}
        for key, tokens in zip(missing, counts):
            self._memo[key] = tokens
            if isinstance(key, bytes):
                fresh[key] = tokens
        if self.cache is not None:
            self.cache.store(self.cache_key, fresh)

    def count_text(self, text: str) -> int:
        return self.count_texts([text])[0]

    def count_messages(self, messages: Sequence[Message]) -> list[Message]:
        """The messages with ``tokens`` filled in (skipped invalid lines count 0)."""
        texts = [countable_text(m.data) if m.data else "" for m in messages]
        if self.progress is None or len(texts) <= PROGRESS_CHUNK:
            counts = self.count_texts(texts)
        else:
            counts = []
            for start in range(0, len(texts), PROGRESS_CHUNK):
                counts.extend(self.count_texts(texts[start : start + PROGRESS_CHUNK]))
                self.progress("counting tokens", min(start + PROGRESS_CHUNK, len(texts)), len(texts))
        return [m.with_tokens(self._with_extras(m, n)) for m, n in zip(messages, counts)]

    def count_message(self, message: Message) -> Message:
        return self.count_messages([message])[0]

    def _with_extras(self, message: Message, tokens: int) -> int:
        if not message.data:
            return 0
        tokens += IMAGE_TOKENS * image_count(message.data.get("content"))
        if self.framing:
            tokens += FRAMING_PER_MESSAGE
            if "name" in message.data:
                tokens += FRAMING_PER_NAME
        return tokens
