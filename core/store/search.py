"""Reading offloaded messages back: full-text search, handles and handle prefixes, turns, sightings.

Each function runs its queries on a connection the store hands it (inside the
store's retry); none writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from core.io import jsonio
from core.store.database import SQL_CHUNK
from core.store.records import COLUMNS, RecallHit, StoredMessage, stored_message

SNIPPET_TOKENS = 16


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


def search(db: sqlite3.Connection, match: str, limit: int) -> list[RecallHit]:
    """The best ``limit`` messages for an FTS5 ``match``, best first."""
    rows = db.execute(
        f"SELECT {COLUMNS}, bm25(messages_fts) AS rank,"
        f" snippet(messages_fts, 0, '[', ']', '…', {SNIPPET_TOKENS})"
        " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
        " WHERE messages_fts MATCH ? ORDER BY rank, m.id LIMIT ?",
        (match, limit),
    ).fetchall()
    return [RecallHit(stored_message(row[:9]), -float(row[9]), row[10]) for row in rows]


def messages_by_prefix(db: sqlite3.Connection, digits: str) -> list[StoredMessage]:
    """The first two messages whose content hash starts with ``digits`` (two: the prefix is ambiguous)."""
    rows = db.execute(
        f"SELECT {COLUMNS} FROM messages m WHERE m.content_hash >= ? AND m.content_hash < ?"
        " ORDER BY m.id LIMIT 2",
        (digits, digits + "g"),
    ).fetchall()
    return [stored_message(row) for row in rows]


def groups_by_prefix(db: sqlite3.Connection, digits: str) -> list[list[str]]:
    """The member hashes of the first two turns whose hash starts with ``digits``."""
    try:
        rows = db.execute(
            "SELECT members FROM groups WHERE hash >= ? AND hash < ? ORDER BY rowid LIMIT 2",
            (digits, digits + "g"),
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # a store that has never stored a turn
        raise
    return [jsonio.loads(row[0]) for row in rows]


def messages_by_hash(db: sqlite3.Connection, hashes: Sequence[str]) -> dict[str, StoredMessage]:
    """The stored messages among ``hashes``, by content hash (the evicted ones are missing)."""
    found: dict[str, StoredMessage] = {}
    for start in range(0, len(hashes), SQL_CHUNK):
        chunk = list(hashes[start : start + SQL_CHUNK])
        marks = ", ".join("?" * len(chunk))
        for row in db.execute(f"SELECT {COLUMNS} FROM messages m WHERE m.content_hash IN ({marks})", chunk):
            found[row[1]] = stored_message(row)
    return found


def sightings(db: sqlite3.Connection, digest: str) -> list[dict[str, Any]]:
    """Every (source, line, turn, seen_at) the message with content hash ``digest`` was offloaded from."""
    rows = db.execute(
        "SELECT s.source, s.line, s.turn, s.seen_at FROM sightings s JOIN messages m ON m.id = s.message_id"
        " WHERE m.content_hash = ? ORDER BY s.rowid",
        (digest,),
    ).fetchall()
    return [{"source": r[0], "line": r[1], "turn": r[2], "seen_at": r[3]} for r in rows]
