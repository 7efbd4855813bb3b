"""OffloadStore: what strategies and `compact recall` call (offload, the summary cache, recall, stats)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any, TypeVar

from core.errors import StoreError, StoreUnavailable
from core.io import jsonio
from core.store import search
from core.store.database import DEFAULT_TIMEOUT, GROUPS_TABLE, Database, connect
from core.store.eviction import AT_CAP_POLICIES, content_bytes, fit_cap
from core.store.records import (
    OffloadItem,
    RecallHit,
    StoredMessage,
    content_hash,
    group_hash,
    handle_digits,
    handle_of,
    now,
)

DEFAULT_MAX_SUMMARIES = 10_000

T = TypeVar("T")


class OffloadStore(Database):
    """An open store. Use ``OffloadStore.open(path)``, ideally as a context manager."""

    def __init__(
        self, db: sqlite3.Connection, path: str, *, max_bytes: int | None, at_cap: str,
        timeout: float, max_summaries: int,
    ) -> None:
        super().__init__(db, path, timeout=timeout)
        self.max_bytes = max_bytes
        self.at_cap = at_cap
        self.max_summaries = max_summaries
        # The path the transcript's summaries and traces print for `compact recall --store`: a dry
        # run's throwaway copy prints the store the user gave, so its text is the real run's.
        self.shown_path = path
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
        read_only: bool = False,
    ) -> OffloadStore:
        """Open (or, with ``create``, create) the store at ``path``.

        ``max_bytes`` caps the content size (None: no cap); ``at_cap`` is
        "refuse" or "evict_oldest"; ``timeout`` is how long a write waits for
        another process's write (seconds); ``create=False`` refuses a missing
        file instead of creating one (recall and stats never create a store);
        ``max_summaries`` caps the summary cache (oldest entries go first); ``read_only`` never
        writes (recall, stats), so a store on a read-only disk still reads.
        """
        name = os.fspath(path)
        if at_cap not in AT_CAP_POLICIES:
            raise StoreError(f"unknown at-cap policy {at_cap!r}", path=name, fix="use refuse or evict_oldest")
        if max_bytes is not None and max_bytes < 1:
            raise StoreError(f"the size cap must be at least 1 byte, not {max_bytes}", path=name)
        if max_summaries < 1:
            raise StoreError(f"the summary cap must be at least 1, not {max_summaries}", path=name)
        db = connect(name, timeout=timeout, create=create and not read_only, read_only=read_only)
        store = cls(db, name, max_bytes=max_bytes, at_cap=at_cap, timeout=timeout, max_summaries=max_summaries)
        try:
            store._prepare(create=create and not read_only, read_only=read_only)
        except BaseException:
            store.close()
            raise
        return store

    # -- writing ---------------------------------------------------------------------

    def offload(self, items: Sequence[OffloadItem]) -> list[str]:
        """Store ``items`` in one transaction; return their handles, in order.

        All or nothing: on any error the store is as it was. The same content
        (same canonical JSON) keeps one row and one handle; each new
        (source, line) is added to its sightings. At the cap see the package
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

    def check_writable(self) -> None:
        """Fail now, with one StoreUnavailable, when this store cannot take a write.

        A run calls it once before any strategy: a read-only file or folder, a
        full disk or a lock held past the timeout is then one error at the
        start instead of a wait and an error in every strategy that offloads.
        The probe is a real committed write (the cap in force, which offload
        records anyway), so it exercises the lock, the journal and the disk.
        """
        self._write(self._record_cap, "write")

    def _record_cap(self, db: sqlite3.Connection) -> None:
        db.execute("UPDATE totals SET last_max_bytes = ?, last_at_cap = ? WHERE id = 1", (self.max_bytes, self.at_cap))

    def _row(self, index: int, item: OffloadItem) -> dict[str, Any]:
        try:
            digest = content_hash(item.message)
            message_json = jsonio.dumps(item.message).decode()
        except TypeError as exc:
            raise StoreError(f"item {index}: the message is not JSON ({exc})", path=self.path) from None
        # SQLite takes UTF-8 only: a lone surrogate (half an emoji, valid in JSON) becomes U+FFFD in the
        # searchable text; the message itself keeps it, as the \\u escape its JSON holds.
        text = jsonio.valid_unicode(str(item.text))
        size = len(text.encode("utf-8")) + len(message_json.encode("utf-8"))
        return {
            "content_hash": digest, "handle": handle_of(digest), "source": jsonio.valid_unicode(str(item.source)),
            "line": item.line, "turn": int(item.turn), "role": str(item.role), "bytes": size,
            "text": text, "message": message_json,
        }

    def _offload_rows(
        self, db: sqlite3.Connection, rows: list[dict[str, Any]], groups: dict[str, list[str]] | None = None
    ) -> tuple[list[str], set[int]]:
        stamp = now()
        if groups:
            db.execute(GROUPS_TABLE)
            for digest, members in groups.items():
                db.execute("INSERT OR IGNORE INTO groups (hash, members, created_at) VALUES (?, ?, ?)",
                           (digest, jsonio.dumps(members).decode(), stamp))
        before = content_bytes(db)
        referenced: set[int] = set()
        for row in rows:
            db.execute(
                "INSERT OR IGNORE INTO messages (content_hash, handle, source, line, turn, role, bytes,"
                " created_at, text, message) VALUES (:content_hash, :handle, :source, :line, :turn, :role,"
                " :bytes, :created_at, :text, :message)",
                {**row, "created_at": stamp},
            )
            # Read back whole: a row an earlier run stored (the same content keeps one row) stands in for
            # this message from now on, so a damaged one must fail the run, not be trusted.
            message_id, stored = db.execute("SELECT id, message FROM messages WHERE content_hash = ?",
                                            (row["content_hash"],)).fetchone()
            if stored != row["message"]:
                raise StoreUnavailable("the store is corrupt (a stored message differs from its hash)", path=self.path,
                                       fix="move the file aside; the next offload starts a new store")
            referenced.add(message_id)
            db.execute(
                "INSERT OR IGNORE INTO sightings (message_id, source, line, turn, seen_at) VALUES (?, ?, ?, ?, ?)",
                (message_id, row["source"], row["line"], row["turn"], stamp),
            )
        self._record_cap(db)
        return self._enforce_cap(db, before, referenced | self._ours, len(rows)), referenced

    def _enforce_cap(self, db: sqlite3.Connection, before: int, referenced: set[int], count: int) -> list[str]:
        return fit_cap(db, before=before, count=count, referenced=referenced,
                       max_bytes=self.max_bytes, at_cap=self.at_cap, path=self.path)

    # -- the summary cache -----------------------------------------------------------

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
                (key, text, meta_json, now()),
            )
        db.execute(
            "DELETE FROM summaries WHERE rowid IN"
            " (SELECT rowid FROM summaries ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
            (self.max_summaries,),
        )

    def get_summary(self, key: str) -> dict[str, Any] | None:
        """The cached summary ``{"text": ..., "meta": {...}}`` for ``key``, or None."""
        if self._staged and key in self._staged:
            text, meta_json = self._staged[key]
            return {"text": text, "meta": jsonio.loads(meta_json)}
        row = self._read(lambda db: db.execute("SELECT text, meta FROM summaries WHERE key = ?", (key,)).fetchone(), "read")
        if row is None:
            return None
        return {"text": row[0], "meta": jsonio.loads(row[1])}

    # -- reading ---------------------------------------------------------------------

    def recall(self, query: str, *, limit: int = 5) -> list[RecallHit]:
        """The best ``limit`` messages for plain words, best first (all words, else any word)."""
        if limit < 1:
            return []
        every = search.fts_query(query)
        if every is None:
            return []
        hits = self._read(lambda db: search.search(db, every, limit), "search")
        some = search.fts_query(query, any_term=True)
        if hits or some is None or some == every:
            return hits
        return self._read(lambda db: search.search(db, some, limit), "search")

    def get(self, handle: str) -> StoredMessage | None:
        """The message with this handle, or a unique prefix of at least 8 hex characters after "off_".

        Hex characters past the 16 of a handle match further into the
        content hash. A malformed handle, or a prefix two messages share, is
        a StoreError.
        """
        digits = handle_digits(handle, self.path)
        found = self._read(lambda db: search.messages_by_prefix(db, digits), "read")
        return self._one(found, handle, "message")

    def get_group(self, handle: str) -> tuple[list[StoredMessage], int] | None:
        """The messages of the offloaded turn with this handle, in order, and how many are gone (evicted).

        None when no turn has this handle (it may be a message's: see ``get``).
        """
        digits = handle_digits(handle, self.path)
        members = self._one(self._read(lambda db: search.groups_by_prefix(db, digits), "read"), handle, "turn")
        if members is None:
            return None
        found = self._read(lambda db: search.messages_by_hash(db, members), "read")
        messages = [found[digest] for digest in members if digest in found]
        return messages, len(members) - len(messages)

    def _one(self, matches: list[T], handle: str, kind: str) -> T | None:
        if len(matches) > 1:
            raise StoreError(f"handle {handle!r} matches more than one {kind}", path=self.path,
                             fix="give more of its characters")
        return matches[0] if matches else None

    def sightings(self, handle: str) -> list[dict[str, Any]]:
        """Every (source, line, turn, seen_at) the message with ``handle`` was offloaded from."""
        found = self.get(handle)
        if found is None:
            return []
        return self._read(lambda db: search.sightings(db, found.content_hash), "read")

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
                "sources": sources, "content_bytes": content_bytes(db), "bytes_on_disk": self._disk_bytes(),
                "max_bytes": max_bytes, "at_cap": at_cap, "oldest": oldest, "newest": newest,
                "summaries": summaries, "max_summaries": self.max_summaries,
            }

        return self._read(gather, "read")
