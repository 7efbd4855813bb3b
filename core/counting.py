"""Counting messages: each distinct text once per run, long texts once across runs."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from core.messages import IMAGE_TOKENS, Message, countable_text, image_count
from core.tokens import FRAMING_PER_MESSAGE, FRAMING_PER_NAME, FRAMING_REPLY, TokenCounter

# Shorter texts are cheaper to count than to look up.
PERSIST_MIN_CHARS = 512
_SQL_CHUNK = 500


def default_cache_path() -> Path:
    base = os.environ.get("COMPACT_CACHE_DIR")
    if base:
        return Path(base) / "token-counts.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "compact" / "token-counts.sqlite"


class CountCache:
    """A persistent map (encoder, blake2b of text) -> tokens in one SQLite file.

    The cache is an accelerator only: if it cannot be opened or written
    (read-only home, locked file), counting carries on without it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hits = 0
        self.error: str | None = None
        self._db: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=5.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS counts (encoder TEXT NOT NULL, digest BLOB NOT NULL,"
                " tokens INTEGER NOT NULL, PRIMARY KEY (encoder, digest)) WITHOUT ROWID"
            )
            db.commit()
            self._db = db
        except (sqlite3.Error, OSError) as exc:
            self.error = str(exc)

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

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class MessageCounter:
    """Counts messages with a token counter, remembering every text it has counted."""

    def __init__(self, counter: TokenCounter, *, framing: bool = False, cache: CountCache | None = None) -> None:
        self.counter = counter
        self.framing = framing
        self.cache = cache
        self._memo: dict[str, int] = {}
        self.texts_counted = 0

    @property
    def cache_key(self) -> str:
        return f"{self.counter.backend}:{self.counter.name}"

    def reply_priming(self) -> int:
        return FRAMING_REPLY if self.framing else 0

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            self._count_missing(missing)
        memo = self._memo
        return [memo[t] for t in texts]

    def _count_missing(self, texts: list[str]) -> None:
        long_texts = [t for t in texts if len(t) >= PERSIST_MIN_CHARS] if self.cache else []
        if long_texts and self.cache is not None:
            digests = {t: _digest(t) for t in long_texts}
            known = self.cache.lookup(self.cache_key, list(digests.values()))
            for text, digest in digests.items():
                if digest in known:
                    self._memo[text] = known[digest]
            texts = [t for t in texts if t not in self._memo]
        counts = self.counter.count_batch(texts) if texts else []
        self.texts_counted += len(texts)
        fresh: dict[bytes, int] = {}
        for text, tokens in zip(texts, counts):
            self._memo[text] = tokens
            if self.cache is not None and len(text) >= PERSIST_MIN_CHARS:
                fresh[_digest(text)] = tokens
        if self.cache is not None:
            self.cache.store(self.cache_key, fresh)

    def count_text(self, text: str) -> int:
        return self.count_texts([text])[0]

    def count_messages(self, messages: Sequence[Message]) -> list[Message]:
        """The messages with ``tokens`` filled in (skipped invalid lines count 0)."""
        texts = [countable_text(m.data) if m.data else "" for m in messages]
        counts = self.count_texts(texts)
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
