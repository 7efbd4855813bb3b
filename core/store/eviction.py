"""The size cap: refuse an offload past it, or evict the oldest messages until it fits.

The cap bounds the *content size*: the UTF-8 bytes of each stored message's
text plus its JSON, kept exact in ``totals`` by triggers. It is not the
file's size (the FTS index and SQLite's pages add to it): it is exact inside
a transaction and drops the moment a message is deleted, where FTS5 frees
index pages only at a later merge.
"""

from __future__ import annotations

import sqlite3

from core.errors import StoreError
from core.store.database import SQL_CHUNK

AT_CAP_POLICIES = ("refuse", "evict_oldest")


def content_bytes(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT content_bytes FROM totals WHERE id = 1").fetchone()[0])


def fit_cap(
    db: sqlite3.Connection, *, before: int, count: int, referenced: set[int],
    max_bytes: int | None, at_cap: str, path: str,
) -> list[str]:
    """Bring an offload of ``count`` messages (the store held ``before`` bytes) within ``max_bytes``.

    Returns the handles evicted, oldest first; never evicts a row in
    ``referenced``. Raises StoreError when the policy is "refuse" or when
    evicting every other message would not be enough; the caller's
    transaction then writes nothing.
    """
    after = content_bytes(db)
    if max_bytes is None or after <= max_bytes or after == before:
        return []
    if at_cap == "refuse":
        raise StoreError(
            f"offloading {count} messages ({after - before} bytes) would grow the store to"
            f" {after} bytes, past its cap of {max_bytes}; nothing was written",
            path=path, fix="raise the cap, use the evict_oldest policy, or use another store",
        )
    victims, freed = _oldest(db, after - max_bytes, referenced)
    if freed < after - max_bytes:
        raise StoreError(
            f"the {count} messages to offload need {after - freed} bytes, more than the store's"
            f" cap of {max_bytes} even with every older message evicted (but those this run's"
            " placeholders point to); nothing was written",
            path=path, fix="raise the cap or offload fewer turns at a time",
        )
    ids = [message_id for message_id, _ in victims]
    for start in range(0, len(ids), SQL_CHUNK):
        chunk = ids[start : start + SQL_CHUNK]
        db.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk)
    return [handle for _, handle in victims]


def _oldest(db: sqlite3.Connection, excess: int, referenced: set[int]) -> tuple[list[tuple[int, str]], int]:
    """The oldest messages outside ``referenced`` that free ``excess`` bytes (fewer if there are not
    enough), as (id, handle), and the bytes they free."""
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
    return victims, freed
