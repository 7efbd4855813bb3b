"""The offload store: one SQLite file (standard library sqlite3, WAL mode, FTS5).

Offload and Summarize write here; `compact recall` and `compact store stats`
read it. Tables: ``messages`` (each offloaded message once, keyed by the
sha256 of its canonical JSON, with the source, line, turn and role of its
first sighting, its searchable text and its JSON as handed in);
``sightings`` (every source and line it was offloaded from); ``messages_fts``
(FTS5 over the text, kept in step by triggers); ``summaries`` (the summary
cache); ``groups`` (an offloaded turn: the handle its placeholder prints and
the content hashes of its messages, in order; created by the first offload
that needs it, so stores written without it still open); ``totals`` and
``schema_version``.

Every write is one ``BEGIN IMMEDIATE`` transaction: all or nothing. The size
cap, ``max_bytes``, bounds the content size (the UTF-8 bytes of each stored
message's text plus its JSON; ``stats()["bytes_on_disk"]`` has the file's
size). At the cap, ``at_cap="refuse"`` refuses the whole offload with a
StoreError and writes nothing (the strategy keeps the turns), and
``at_cap="evict_oldest"`` deletes the oldest messages, never one the offload
refers to, until the new ones fit, listing their handles in ``last_evicted``.

The modules: ``records`` (the values and their hashes and handles),
``database`` (the file, its schema, transactions and error lines),
``offload`` (``OffloadStore``), ``search`` (reading back), ``eviction`` (the
cap).
"""

from core.errors import StoreError, StoreUnavailable
from core.store.database import DEFAULT_TIMEOUT, SCHEMA_VERSION, store_error, write_problem
from core.store.eviction import AT_CAP_POLICIES
from core.store.offload_store import DEFAULT_MAX_SUMMARIES, OffloadStore
from core.store.records import (
    HANDLE_PREFIX,
    OffloadItem,
    RecallHit,
    StoredMessage,
    content_hash,
    group_hash,
    handle_of,
)
from core.store.search import fts_query

__all__ = [
    "AT_CAP_POLICIES",
    "DEFAULT_MAX_SUMMARIES",
    "DEFAULT_TIMEOUT",
    "HANDLE_PREFIX",
    "SCHEMA_VERSION",
    "OffloadItem",
    "OffloadStore",
    "RecallHit",
    "StoreError",
    "StoreUnavailable",
    "StoredMessage",
    "content_hash",
    "fts_query",
    "group_hash",
    "handle_of",
    "store_error",
    "write_problem",
]
