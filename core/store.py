"""The offload store: one SQLite file (standard library sqlite3, WAL mode, FTS5).

Offload and Summarize write here; `compact recall` and `compact store stats`
read it. Tables: ``messages`` (each offloaded message once, keyed by the
sha256 of its canonical JSON, with the source, line, turn and role of its
first sighting, its searchable text and its JSON as handed in);
``sightings`` (every source and line it was offloaded from); ``messages_fts``
(FTS5 over the text, kept in step by triggers); ``summaries`` (the summary
cache); ``groups`` (an offloaded turn: the handle its placeholder prints and
the content hashes of its messages, in order; created by the first offload
that needs it, so stores written before it still open); ``totals`` and
``schema_version``.

Every write is one ``BEGIN IMMEDIATE`` transaction: all or nothing. Two
processes can write at once: WAL keeps readers going, the busy timeout makes
a writer wait for the other, and a bounded retry covers the cases where
SQLite reports "database is locked" without waiting.

The size cap, ``max_bytes``, bounds the *content size*: the UTF-8 bytes of
each stored message's text plus its JSON, kept exact in ``totals`` by
triggers. It is not the file's size (the FTS index and SQLite's pages add to
it; ``stats()["bytes_on_disk"]`` has that): it is exact inside a transaction
and drops the moment a message is deleted, where FTS5 frees index pages only
at a later merge. At the cap, ``at_cap="refuse"`` refuses the whole offload
with a StoreError and writes nothing (the strategy keeps the turns), and
``at_cap="evict_oldest"`` deletes the oldest messages, never one the offload
refers to, until the new ones fit, listing their handles in ``last_evicted``.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, TypeVar

from core.errors import StoreError, StoreUnavailable
from core.io import jsonio

SCHEMA_VERSION = 1
AT_CAP_POLICIES = ("refuse", "evict_oldest")
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_SUMMARIES = 10_000
HANDLE_PREFIX = "off_"
HANDLE_HEX = 16
MIN_PREFIX_HEX = 8
SNIPPET_TOKENS = 16
_MAX_ATTEMPTS = 8
_SQL_CHUNK = 500
_FTS5_PROBE = "CREATE VIRTUAL TABLE temp.compact_fts5_probe USING fts5(x)"

T = TypeVar("T")

_SCHEMA = f"""
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES ({SCHEMA_VERSION});
CREATE TABLE totals (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    content_bytes INTEGER NOT NULL,
    last_max_bytes INTEGER,
    last_at_cap TEXT NOT NULL
);
INSERT INTO totals (id, content_bytes, last_at_cap) VALUES (1, 0, 'refuse');
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    handle TEXT NOT NULL,
    source TEXT NOT NULL,
    line INTEGER,
    turn INTEGER NOT NULL,
    role TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    text TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE TABLE sightings (
    message_id INTEGER NOT NULL,
    source TEXT NOT NULL,
    line INTEGER,
    turn INTEGER NOT NULL,
    seen_at TEXT NOT NULL
);
CREATE UNIQUE INDEX sightings_once ON sightings (message_id, source, ifnull(line, -1));
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, content='messages', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
    UPDATE totals SET content_bytes = content_bytes + new.bytes WHERE id = 1;
END;
CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
    DELETE FROM sightings WHERE message_id = old.id;
    UPDATE totals SET content_bytes = content_bytes - old.bytes WHERE id = 1;
END;
CREATE TABLE summaries (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    meta TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""

_GROUPS_TABLE = """CREATE TABLE IF NOT EXISTS groups (
    hash TEXT PRIMARY KEY,
    members TEXT NOT NULL,
    created_at TEXT NOT NULL
)"""

_COLUMNS = "m.handle, m.content_hash, m.source, m.line, m.turn, m.role, m.text, m.message, m.created_at"


@dataclass(frozen=True)
class OffloadItem:
    """One message a strategy hands to the store."""

    source: str  # transcript path, or "<stdin>"
    line: int | None  # original line number
    turn: int  # turn index, 0-based; -1 for the preamble
    role: str
    text: str  # the searchable text: content, tool-call names and arguments
    message: dict[str, Any]  # the full message JSON, kept as given


@dataclass(frozen=True)
class StoredMessage:
    """One offloaded message as the store holds it (source/line/turn of its first sighting)."""

    handle: str  # "off_" + the first 16 hex characters of content_hash
    content_hash: str  # sha256 hex of jsonio.dumps(message, sort_keys=True)
    source: str
    line: int | None
    turn: int
    role: str
    text: str
    message: dict[str, Any]
    created_at: str  # ISO-8601 UTC, when it was first offloaded

    def to_dict(self) -> dict[str, Any]:
        return {
            "handle": self.handle, "content_hash": self.content_hash, "source": self.source,
            "line": self.line, "turn": self.turn, "role": self.role, "text": self.text,
            "message": self.message, "created_at": self.created_at,
        }


@dataclass(frozen=True)
class RecallHit:
    """A search result. ``score`` is minus SQLite's bm25, so higher is better."""

    stored: StoredMessage
    score: float
    snippet: str  # FTS5 snippet() with [ ] around the matched terms

    def to_dict(self) -> dict[str, Any]:
        return {**self.stored.to_dict(), "score": self.score, "snippet": self.snippet}


def content_hash(message: dict[str, Any]) -> str:
    """sha256 hex of the message's canonical JSON (keys sorted)."""
    return hashlib.sha256(jsonio.dumps(message, sort_keys=True)).hexdigest()


def handle_of(digest: str) -> str:
    return HANDLE_PREFIX + digest[:HANDLE_HEX]


def fts_query(query: str, *, any_term: bool = False) -> str | None:
    """The user's plain words as an FTS5 query: each quoted, ANDed (or ORed); None when no words.

    Quoting makes punctuation literal ("ops@example.com", "a.py", "C++"), so
    no input raises an FTS syntax error; a term with no letter or digit
    cannot match anything and is dropped.
    """
    terms = dict.fromkeys(t for t in query.split() if any(ch.isalnum() for ch in t))
    if not terms:
        return None
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
    return (" OR " if any_term else " AND ").join(quoted)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _is_busy(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class OffloadStore:
    """An open store. Use ``OffloadStore.open(path)``, ideally as a context manager."""

    def __init__(
        self, db: sqlite3.Connection, path: str, *, max_bytes: int | None, at_cap: str,
        timeout: float, max_summaries: int,
    ) -> None:
        self._db: sqlite3.Connection | None = db
        self.path = path
        self.max_bytes = max_bytes
        self.at_cap = at_cap
        self.timeout = timeout
        self.max_summaries = max_summaries
        # Handles the last offload() evicted under at_cap="evict_oldest", oldest first.
        self.last_evicted: list[str] = []
        # Turns a strategy announced (stage_group), written by the offload that stores their messages.
        self._pending_groups: dict[str, list[str]] = {}
        # Rows this connection wrote or sighted: the placeholders of this run point at them,
        # so evict_oldest never takes them (it refuses the offload instead).
        self._ours: set[int] = set()
        # Summaries cached during a step (begin_step): written with the step's offload, dropped
        # with its rollback, so a step that is undone leaves no cache entry behind.
        self._staged: dict[str, tuple[str, str]] | None = None

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        max_bytes: int | None = None,
        at_cap: str = "refuse",
        timeout: float = DEFAULT_TIMEOUT,
        create: bool = True,
        max_summaries: int = DEFAULT_MAX_SUMMARIES,
    ) -> OffloadStore:
        """Open (or, with ``create``, create) the store at ``path``.

        ``max_bytes`` caps the content size (None: no cap); ``at_cap`` is
        "refuse" or "evict_oldest"; ``timeout`` is how long a write waits for
        another process's write (seconds); ``create=False`` refuses a missing
        file instead of creating one (recall and stats never create a store);
        ``max_summaries`` caps the summary cache (oldest entries go first).
        """
        name = os.fspath(path)
        if at_cap not in AT_CAP_POLICIES:
            raise StoreError(f"unknown at-cap policy {at_cap!r}", path=name, fix="use refuse or evict_oldest")
        if max_bytes is not None and max_bytes < 1:
            raise StoreError(f"the size cap must be at least 1 byte, not {max_bytes}", path=name)
        if max_summaries < 1:
            raise StoreError(f"the summary cap must be at least 1, not {max_summaries}", path=name)
        db = _connect(name, timeout=timeout, create=create)
        store = cls(db, name, max_bytes=max_bytes, at_cap=at_cap, timeout=timeout, max_summaries=max_summaries)
        try:
            store._prepare(create=create)
        except BaseException:
            store.close()
            raise
        return store

    def _prepare(self, *, create: bool) -> None:
        db = self._conn()
        try:
            db.execute(_FTS5_PROBE)
            db.execute("DROP TABLE temp.compact_fts5_probe")
        except sqlite3.Error as exc:
            if "no such module" not in str(exc):
                raise self._error(exc, "open") from None
            raise StoreError(
                f"this Python's sqlite3 (SQLite {sqlite3.sqlite_version}) has no FTS5 ({exc})",
                path=self.path,
                fix="use a Python whose SQLite is built with FTS5: python.org, Debian/Ubuntu, Homebrew and conda builds are",
            ) from None
        version = self._read(self._schema_version, "open")
        if version is None and not create:
            raise StoreError("an empty file, not a compact store", path=self.path,
                             fix="give the --store file compact offloaded to")
        self._retry(lambda: db.execute("PRAGMA journal_mode=WAL").fetchone(), "open")
        db.execute("PRAGMA synchronous=NORMAL")
        if version is None:
            self._write(self._create_schema, "create")
        elif version > SCHEMA_VERSION:
            raise StoreError(
                f"the store has schema version {version}, newer than this compact reads ({SCHEMA_VERSION})",
                path=self.path, fix="upgrade compact, or use another --store file",
            )

    def _schema_version(self, db: sqlite3.Connection) -> int | None:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "schema_version" not in tables:
            if tables:
                raise StoreError("a SQLite database, but not a compact store", path=self.path,
                                 fix="give --store a new file name or a store compact created")
            return None
        row = db.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _create_schema(self, db: sqlite3.Connection) -> None:
        # Another process may have created it while this one waited for the write lock.
        if self._schema_version(db) is not None:
            return
        for statement in _split_script(_SCHEMA):
            db.execute(statement)

    # -- writing ---------------------------------------------------------------------

    def offload(self, items: Sequence[OffloadItem]) -> list[str]:
        """Store ``items`` in one transaction; return their handles, in order.

        All or nothing: on any error the store is as it was. The same content
        (same canonical JSON) keeps one row and one handle; each new
        (source, line) is added to its sightings. At the cap see the module
        docstring; ``last_evicted`` lists what this call evicted.
        """
        pending, self._pending_groups = self._pending_groups, {}
        rows = [self._row(index, item) for index, item in enumerate(items)]
        self.last_evicted = []
        staged, self._staged = self._staged or {}, None
        if not rows and not staged:
            return []
        hashes = {row["content_hash"] for row in rows}
        # A group goes in with its messages, in the same transaction, or not at all.
        groups = {digest: members for digest, members in pending.items() if hashes.issuperset(members)}

        def write(db: sqlite3.Connection) -> tuple[list[str], set[int]]:
            self._put_summaries(db, staged)
            return self._offload_rows(db, rows, groups) if rows else ([], set())

        evicted, referenced = self._write(write, "offload")
        self._ours |= referenced
        self.last_evicted = evicted
        return [row["handle"] for row in rows]

    def begin_step(self) -> None:
        """From now until ``offload`` (the step's end) or ``discard_step``, summaries are staged."""
        self._staged = {}

    def discard_step(self) -> None:
        """The step was rolled back: forget the summaries it cached."""
        self._staged = None

    def stage_group(self, messages: Sequence[dict[str, Any]]) -> str:
        """The handle that recalls all of ``messages`` (an offloaded turn), in order.

        Nothing is written yet: the next ``offload`` that stores every one of
        them records the group in the same transaction, so a refused or
        rolled-back offload leaves no group behind.
        """
        members = [content_hash(message) for message in messages]
        digest = group_hash(members)
        self._pending_groups[digest] = members
        return handle_of(digest)

    def get_group(self, handle: str) -> tuple[list[StoredMessage], int] | None:
        """The messages of the offloaded turn with this handle, in order, and how many are gone (evicted).

        None when no turn has this handle (it may be a message's: see ``get``).
        """
        digits = _handle_digits(handle, self.path)

        def read(db: sqlite3.Connection) -> Any:
            try:
                return db.execute(
                    "SELECT members FROM groups WHERE hash >= ? AND hash < ? ORDER BY rowid LIMIT 2",
                    (digits, digits + "g"),
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return []  # a store from before groups existed
                raise

        rows = self._read(read, "read")
        if len(rows) > 1:
            raise StoreError(f"handle {handle!r} matches more than one turn", path=self.path,
                             fix="give more of its characters")
        if not rows:
            return None
        members: list[str] = jsonio.loads(rows[0][0])
        found = {}
        for start in range(0, len(members), _SQL_CHUNK):
            chunk = members[start : start + _SQL_CHUNK]
            marks = ", ".join("?" * len(chunk))
            # The lambda runs inside _read, before the loop moves on: it sees this chunk.
            for row in self._read(lambda db: db.execute(
                f"SELECT {_COLUMNS} FROM messages m WHERE m.content_hash IN ({marks})", chunk  # noqa: B023
            ).fetchall(), "read"):
                found[row[1]] = _stored(row)
        messages = [found[digest] for digest in members if digest in found]
        return messages, len(members) - len(messages)

    def check_writable(self) -> None:
        """Fail now, with one StoreUnavailable, when this store cannot take a write.

        A run calls it once before any strategy: a read-only file or folder, a
        full disk or a lock held past the timeout is then one error at the
        start instead of a wait and an error in every strategy that offloads.
        The probe is a real committed write (the cap in force, which offload
        records anyway), so it exercises the lock, the journal and the disk.
        """

        def probe(db: sqlite3.Connection) -> None:
            db.execute("UPDATE totals SET last_max_bytes = ?, last_at_cap = ? WHERE id = 1",
                       (self.max_bytes, self.at_cap))

        self._write(probe, "write")

    def _row(self, index: int, item: OffloadItem) -> dict[str, Any]:
        try:
            digest = content_hash(item.message)
            message_json = jsonio.dumps(item.message).decode()
        except TypeError as exc:
            raise StoreError(f"item {index}: the message is not JSON ({exc})", path=self.path) from None
        text = str(item.text)
        try:
            size = len(text.encode("utf-8")) + len(message_json.encode("utf-8"))
        except UnicodeEncodeError:
            raise StoreError(f"item {index}: the text is not valid Unicode (a lone surrogate)", path=self.path) from None
        return {
            "content_hash": digest, "handle": handle_of(digest), "source": str(item.source),
            "line": item.line, "turn": int(item.turn), "role": str(item.role), "bytes": size,
            "text": text, "message": message_json,
        }

    def _offload_rows(
        self, db: sqlite3.Connection, rows: list[dict[str, Any]], groups: dict[str, list[str]] | None = None
    ) -> tuple[list[str], set[int]]:
        now = _now()
        if groups:
            db.execute(_GROUPS_TABLE)
            for digest, members in groups.items():
                db.execute("INSERT OR IGNORE INTO groups (hash, members, created_at) VALUES (?, ?, ?)",
                           (digest, jsonio.dumps(members).decode(), now))
        before = self._content_bytes(db)
        referenced: set[int] = set()
        for row in rows:
            db.execute(
                "INSERT OR IGNORE INTO messages (content_hash, handle, source, line, turn, role, bytes,"
                " created_at, text, message) VALUES (:content_hash, :handle, :source, :line, :turn, :role,"
                " :bytes, :created_at, :text, :message)",
                {**row, "created_at": now},
            )
            message_id = db.execute("SELECT id FROM messages WHERE content_hash = ?", (row["content_hash"],)).fetchone()[0]
            referenced.add(message_id)
            db.execute(
                "INSERT OR IGNORE INTO sightings (message_id, source, line, turn, seen_at) VALUES (?, ?, ?, ?, ?)",
                (message_id, row["source"], row["line"], row["turn"], now),
            )
        db.execute("UPDATE totals SET last_max_bytes = ?, last_at_cap = ? WHERE id = 1", (self.max_bytes, self.at_cap))
        return self._enforce_cap(db, before, referenced | self._ours, len(rows)), referenced

    def _enforce_cap(self, db: sqlite3.Connection, before: int, referenced: set[int], count: int) -> list[str]:
        after = self._content_bytes(db)
        if self.max_bytes is None or after <= self.max_bytes or after == before:
            return []
        if self.at_cap == "refuse":
            raise StoreError(
                f"offloading {count} messages ({after - before} bytes) would grow the store to"
                f" {after} bytes, past its cap of {self.max_bytes}; nothing was written",
                path=self.path, fix="raise the cap, use the evict_oldest policy, or use another store",
            )
        excess = after - self.max_bytes
        victims: list[tuple[int, str]] = []
        freed = 0
        oldest_first = db.execute("SELECT id, handle, bytes FROM messages ORDER BY id")
        for message_id, handle, size in oldest_first:
            if freed >= excess:
                break
            if message_id not in referenced:
                victims.append((message_id, handle))
                freed += size
        oldest_first.close()
        if freed < excess:
            raise StoreError(
                f"the {count} messages to offload need {after - freed} bytes, more than the store's"
                f" cap of {self.max_bytes} even with every older message evicted (but those this run's"
                " placeholders point to); nothing was written",
                path=self.path, fix="raise the cap or offload fewer turns at a time",
            )
        ids = [message_id for message_id, _ in victims]
        for start in range(0, len(ids), _SQL_CHUNK):
            chunk = ids[start : start + _SQL_CHUNK]
            db.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        return [handle for _, handle in victims]

    @staticmethod
    def _content_bytes(db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT content_bytes FROM totals WHERE id = 1").fetchone()[0])

    def put_summary(self, key: str, text: str, meta: dict[str, Any]) -> None:
        """Cache a summary under ``key`` (replacing one there); the oldest go past ``max_summaries``.

        Inside a step (``begin_step``) it is written with the step's offload, or not at all.
        """
        try:
            meta_json = jsonio.dumps(meta).decode()
        except TypeError as exc:
            raise StoreError(f"summary meta is not JSON ({exc})", path=self.path) from None
        if self._staged is not None:
            self._staged[key] = (text, meta_json)
            return
        self._write(lambda db: self._put_summaries(db, {key: (text, meta_json)}), "cache a summary in")

    def _put_summaries(self, db: sqlite3.Connection, entries: dict[str, tuple[str, str]]) -> None:
        if not entries:
            return
        for key, (text, meta_json) in entries.items():
            db.execute(
                "INSERT OR REPLACE INTO summaries (key, text, meta, created_at) VALUES (?, ?, ?, ?)",
                (key, text, meta_json, _now()),
            )
        db.execute(
            "DELETE FROM summaries WHERE rowid IN"
            " (SELECT rowid FROM summaries ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
            (self.max_summaries,),
        )

    # -- reading ---------------------------------------------------------------------

    def get_summary(self, key: str) -> dict[str, Any] | None:
        """The cached summary ``{"text": ..., "meta": {...}}`` for ``key``, or None."""
        if self._staged and key in self._staged:
            text, meta_json = self._staged[key]
            return {"text": text, "meta": jsonio.loads(meta_json)}
        row = self._read(lambda db: db.execute("SELECT text, meta FROM summaries WHERE key = ?", (key,)).fetchone(), "read")
        if row is None:
            return None
        return {"text": row[0], "meta": jsonio.loads(row[1])}

    def recall(self, query: str, *, limit: int = 5) -> list[RecallHit]:
        """The best ``limit`` messages for plain words, best first (all words, else any word)."""
        if limit < 1:
            return []
        every = fts_query(query)
        if every is None:
            return []
        hits = self._read(lambda db: self._search(db, every, limit), "search")
        some = fts_query(query, any_term=True)
        if hits or some is None or some == every:
            return hits
        return self._read(lambda db: self._search(db, some, limit), "search")

    @staticmethod
    def _search(db: sqlite3.Connection, match: str, limit: int) -> list[RecallHit]:
        rows = db.execute(
            f"SELECT {_COLUMNS}, bm25(messages_fts) AS rank,"
            f" snippet(messages_fts, 0, '[', ']', '…', {SNIPPET_TOKENS})"
            " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? ORDER BY rank, m.id LIMIT ?",
            (match, limit),
        ).fetchall()
        return [RecallHit(_stored(row[:9]), -float(row[9]), row[10]) for row in rows]

    def get(self, handle: str) -> StoredMessage | None:
        """The message with this handle, or a unique prefix of at least 8 hex characters after "off_".

        Hex characters past the 16 of a handle match further into the
        content hash. A malformed handle, or a prefix two messages share, is
        a StoreError.
        """
        digits = _handle_digits(handle, self.path)
        rows = self._read(
            lambda db: db.execute(
                f"SELECT {_COLUMNS} FROM messages m WHERE m.content_hash >= ? AND m.content_hash < ?"
                " ORDER BY m.id LIMIT 2",
                (digits, digits + "g"),
            ).fetchall(),
            "read",
        )
        if len(rows) > 1:
            raise StoreError(f"handle {handle!r} matches more than one message", path=self.path,
                             fix="give more of its characters")
        return _stored(rows[0]) if rows else None

    def sightings(self, handle: str) -> list[dict[str, Any]]:
        """Every (source, line, turn, seen_at) the message with ``handle`` was offloaded from."""
        found = self.get(handle)
        if found is None:
            return []
        rows = self._read(
            lambda db: db.execute(
                "SELECT s.source, s.line, s.turn, s.seen_at FROM sightings s JOIN messages m ON m.id = s.message_id"
                " WHERE m.content_hash = ? ORDER BY s.rowid",
                (found.content_hash,),
            ).fetchall(),
            "read",
        )
        return [{"source": r[0], "line": r[1], "turn": r[2], "seen_at": r[3]} for r in rows]

    def stats(self) -> dict[str, Any]:
        """What the store holds.

        ``max_bytes`` and ``at_cap`` are the cap in force: this connection's
        when it was opened with one, else the one the last offload ran with.
        """

        def gather(db: sqlite3.Connection) -> dict[str, Any]:
            messages, oldest, newest = db.execute("SELECT count(*), min(created_at), max(created_at) FROM messages").fetchone()
            max_bytes, at_cap = (self.max_bytes, self.at_cap) if self.max_bytes is not None else db.execute(
                "SELECT last_max_bytes, last_at_cap FROM totals WHERE id = 1").fetchone()
            sightings, sources = db.execute("SELECT count(*), count(DISTINCT source) FROM sightings").fetchone()
            summaries = db.execute("SELECT count(*) FROM summaries").fetchone()[0]
            version = db.execute("SELECT max(version) FROM schema_version").fetchone()[0]
            return {
                "path": self.path, "schema_version": version, "messages": messages, "sightings": sightings,
                "sources": sources, "content_bytes": self._content_bytes(db), "bytes_on_disk": self._disk_bytes(),
                "max_bytes": max_bytes, "at_cap": at_cap, "oldest": oldest, "newest": newest,
                "summaries": summaries, "max_summaries": self.max_summaries,
            }

        return self._read(gather, "read")

    def _disk_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total

    # -- transactions and errors ------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the store is closed", path=self.path)
        return self._db

    def _read(self, work: Callable[[sqlite3.Connection], T], action: str) -> T:
        db = self._conn()
        return self._retry(lambda: work(db), action)

    def _write(self, work: Callable[[sqlite3.Connection], T], action: str) -> T:
        """Run ``work`` in one BEGIN IMMEDIATE transaction; roll back on any error."""
        db = self._conn()

        def attempt() -> T:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # SQLite has already rolled back (disk full, I/O error)
                raise
            return result

        return self._retry(attempt, action)

    def _retry(self, attempt: Callable[[], T], action: str) -> T:
        """Run ``attempt``, retrying "database is locked" until ``timeout`` has passed (bounded)."""
        db = self._conn()
        deadline = time.monotonic() + self.timeout
        for tries in range(1, _MAX_ATTEMPTS + 1):
            remaining = deadline - time.monotonic()
            db.execute(f"PRAGMA busy_timeout = {max(0, int(remaining * 1000))}")
            try:
                return attempt()
            except sqlite3.Error as exc:
                if _is_busy(exc) and tries < _MAX_ATTEMPTS and time.monotonic() < deadline:
                    time.sleep(min(0.05 * 2**tries, 1.0) * random.uniform(0.5, 1.0))
                    continue
                raise self._error(exc, action) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, exc: sqlite3.Error, action: str) -> StoreError:
        return store_error(exc, self.path, action, self.timeout)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def store_error(exc: sqlite3.Error, path: str, action: str, timeout: float) -> StoreUnavailable:
    """One readable line for a SQLite failure, naming the store and the fix."""
    text = str(exc)
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == sqlite3.SQLITE_NOTADB or "not a database" in text:
        return StoreUnavailable("not a SQLite database", path=path, fix="give --store a new file name or a store compact created")
    if code == sqlite3.SQLITE_CORRUPT or "malformed" in text:
        return StoreUnavailable(f"the store is corrupt ({text})", path=path,
                                fix="move the file aside; the next offload starts a new store")
    if code == sqlite3.SQLITE_FULL or "disk is full" in text:
        return StoreUnavailable(f"cannot {action} the store: the disk is full", path=path, fix="free some space and rerun")
    if code == sqlite3.SQLITE_READONLY or "readonly database" in text:
        return StoreUnavailable(f"cannot {action} the store: it is read-only", path=path,
                                fix="make the file and its folder writable, or use another --store")
    if _is_busy(exc):
        return StoreUnavailable(f"cannot {action} the store: another process held it locked for over {timeout:g} s",
                                path=path, fix="rerun when the other compact run has finished")
    if code == sqlite3.SQLITE_CANTOPEN or "unable to open" in text:
        return StoreUnavailable("cannot open the store", path=path, fix="check the path and its folder's permissions")
    if code == sqlite3.SQLITE_IOERR or "disk I/O error" in text:
        return StoreUnavailable(f"cannot {action} the store: disk I/O error (a full disk or a file size limit?)",
                                path=path, fix="free some space, check the disk, and rerun")
    return StoreUnavailable(f"cannot {action} the store: {text}", path=path)


def _connect(path: str, *, timeout: float, create: bool) -> sqlite3.Connection:
    target = Path(path)
    if target.is_dir():
        raise StoreError("is a folder, not a store file", path=path, fix="give --store a file name")
    if not target.exists():
        if not create:
            raise StoreError("no store here", path=path,
                             fix="check the path or COMPACT_STORE; a store is created by offloading")
        if not target.parent.is_dir():
            raise StoreError("the store's folder does not exist", path=path, fix="create the folder first")
    mode = "rwc" if create else "rw"
    uri = f"file:{urllib.parse.quote(str(target.absolute()))}?mode={mode}"
    try:
        return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise store_error(exc, path, "open", timeout) from None


def group_hash(members: Sequence[str]) -> str:
    """sha256 hex naming a turn by the content hashes of its messages (never equal to a message's hash)."""
    return hashlib.sha256(("turn\n" + "\n".join(members)).encode()).hexdigest()


def _handle_digits(handle: str, path: str) -> str:
    digits = handle.strip().lower().removeprefix(HANDLE_PREFIX)
    if not (MIN_PREFIX_HEX <= len(digits) <= 64) or any(ch not in "0123456789abcdef" for ch in digits):
        raise StoreError(
            f"{handle!r} is not a handle", path=path,
            fix=f"give off_ and at least {MIN_PREFIX_HEX} hex characters, as `compact recall` prints them",
        )
    return digits


def _stored(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(
        handle=row[0], content_hash=row[1], source=row[2], line=row[3], turn=row[4], role=row[5],
        text=row[6], message=jsonio.loads(row[7]), created_at=row[8],
    )


def _split_script(script: str) -> list[str]:
    """The statements of a schema script (sqlite3.complete_statement keeps triggers whole)."""
    statements: list[str] = []
    pending = ""
    for line in script.strip().splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return statements
