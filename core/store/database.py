"""The store's SQLite file: opening it, its schema, transactions, retries and error lines.

Every write is one ``BEGIN IMMEDIATE`` transaction: all or nothing. Two
processes can write at once: WAL keeps readers going, the busy timeout makes
a writer wait for the other, and a bounded retry covers the cases where
SQLite reports "database is locked" without waiting.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Self, TypeVar

from core.errors import StoreError, StoreUnavailable

SCHEMA_VERSION = 1
DEFAULT_TIMEOUT = 30.0
SQL_CHUNK = 500  # at most this many ? in one statement
_MAX_ATTEMPTS = 8
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

# Created by the first offload that stores a group, so stores written without it still open.
GROUPS_TABLE = """CREATE TABLE IF NOT EXISTS groups (
    hash TEXT PRIMARY KEY,
    members TEXT NOT NULL,
    created_at TEXT NOT NULL
)"""


class Database:
    """One connection to a store file, with its path and write timeout; the store's base class."""

    def __init__(self, db: sqlite3.Connection, path: str, *, timeout: float) -> None:
        self._db: sqlite3.Connection | None = db
        self.path = path
        self.timeout = timeout

    # -- opening ---------------------------------------------------------------------

    def _prepare(self, *, create: bool, read_only: bool = False) -> None:
        """Check FTS5 and the schema version; switch to WAL; create the schema in a new file."""
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
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"the store has schema version {version}, newer than this compact reads ({SCHEMA_VERSION})",
                path=self.path, fix="upgrade compact, or use another --store file",
            )
        if read_only:
            return
        self._retry(lambda: db.execute("PRAGMA journal_mode=WAL").fetchone(), "open")
        db.execute("PRAGMA synchronous=NORMAL")
        if version is None:
            self._write(self._create_schema, "create")

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

    def _disk_bytes(self) -> int:
        """The file's size on disk, with its WAL and shared-memory files."""
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
            except (ValueError, TypeError, KeyError) as exc:  # a row of the wrong shape: the store was damaged
                raise StoreUnavailable(
                    f"cannot {action}: the store holds a value of the wrong shape ({type(exc).__name__}: {exc})",
                    path=self.path, fix="the file was changed outside compact: restore it, or give --store a new file",
                ) from None
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


def connect(path: str, *, timeout: float, create: bool, read_only: bool = False) -> sqlite3.Connection:
    """A connection to the file at ``path`` (created only with ``create``), or a StoreError saying why not.

    ``read_only`` (recall, stats, a dry run's copy) never writes, so a store on a read-only disk or
    in a folder this user cannot write still reads: a WAL store there has no ``-shm`` file to share,
    and is then read as it stands in its main file, unless a ``-wal`` file holds writes not merged
    into it yet (which it would miss): that is an error saying so.
    """
    target = Path(path)
    if target.is_dir():
        raise StoreError("is a folder, not a store file", path=path, fix="give --store a file name")
    if not target.exists():
        if not create:
            raise StoreError("no store here", path=path,
                             fix="check the path or COMPACT_STORE; a store is created by offloading")
        if not target.parent.is_dir():
            raise missing_folder(target)
    mode = "ro" if read_only else "rwc" if create else "rw"
    uri = f"file:{urllib.parse.quote(str(target.absolute()))}?mode={mode}"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        if read_only and not _readable(db):
            db.close()
            # Read as immutable, SQLite ignores the -wal file: what it holds would silently be missing.
            wal = Path(f"{target}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreUnavailable(
                    "cannot read the store here: it has writes not yet merged into it (its -wal file), which "
                    "SQLite reads only through a -shm file this folder cannot hold", path=path,
                    fix="copy the store and its -wal file into a folder you can write and recall from there")
            db = sqlite3.connect(f"{uri}&immutable=1", uri=True, timeout=timeout, isolation_level=None)
        return db
    except sqlite3.Error as exc:
        raise store_error(exc, path, "open", timeout) from None


def _readable(db: sqlite3.Connection) -> bool:
    """Whether a read-only connection can read (a WAL store whose folder cannot hold its -shm cannot)."""
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        if (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY):
            return False
        raise
    return True


def _read_only_folder(path: str) -> bool:
    folder = Path(path).absolute().parent
    try:  # (root may write anywhere but on a read-only mount; statvfs is POSIX only)
        mounted_read_only = hasattr(os, "statvfs") and bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        return mounted_read_only or not os.access(folder, os.W_OK)
    except OSError:
        return False


def write_problem(path: str) -> str | None:
    """Why a run could not write the store at ``path`` (what ``--dry-run``, which only reads, warns of), or None."""
    if _read_only_folder(path):
        return "its folder is read-only"
    if Path(path).exists() and not os.access(path, os.W_OK):
        return "the file is read-only"
    return None


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
        if _read_only_folder(path):  # (a writer needs its -wal and -shm files beside it)
            return StoreUnavailable("cannot write the store: its folder is read-only", path=path,
                                    fix="give --store a file in a folder you can write (recall and stats read it where it is)")
        return StoreUnavailable("cannot open the store", path=path, fix="check the path and its folder's permissions")
    if code == sqlite3.SQLITE_IOERR or "disk I/O error" in text:
        return StoreUnavailable(f"cannot {action} the store: disk I/O error (a full disk or a file size limit?)",
                                path=path, fix="free some space, check the disk, and rerun")
    return StoreUnavailable(f"cannot {action} the store: {text}", path=path)


def _is_busy(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


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


def missing_folder(target: Path) -> StoreError:
    """Why a store cannot be created at ``target``: its folder is missing, or a file stands in its path."""
    blocking = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        return StoreError(f"{blocking} is a file, not a folder", path=str(target), fix="give --store a path inside a folder")
    return StoreError("the store's folder does not exist", path=str(target), fix="create the folder first")
