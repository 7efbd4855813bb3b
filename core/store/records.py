"""What the store holds and hands back: the records, their content hashes and handles."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.errors import StoreError
from core.io import jsonio

HANDLE_PREFIX = "off_"
HANDLE_HEX = 16
MIN_PREFIX_HEX = 8
# The columns a StoredMessage is read from (see stored_message).
COLUMNS = "m.handle, m.content_hash, m.source, m.line, m.turn, m.role, m.text, m.message, m.created_at"


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


def group_hash(members: Sequence[str]) -> str:
    """sha256 hex naming a turn by the content hashes of its messages (never equal to a message's hash)."""
    return hashlib.sha256(("turn\n" + "\n".join(members)).encode()).hexdigest()


def handle_of(digest: str) -> str:
    return HANDLE_PREFIX + digest[:HANDLE_HEX]


def handle_digits(handle: str, path: str) -> str:
    """The hex digits of a handle or handle prefix, lower-cased; a StoreError when it is not one."""
    digits = handle.strip().lower().removeprefix(HANDLE_PREFIX)
    if not (MIN_PREFIX_HEX <= len(digits) <= 64) or any(ch not in "0123456789abcdef" for ch in digits):
        raise StoreError(
            f"{handle!r} is not a handle", path=path,
            fix=f"give off_ and at least {MIN_PREFIX_HEX} hex characters, as `compact recall` prints them",
        )
    return digits


def stored_message(row: Sequence[Any]) -> StoredMessage:
    """The StoredMessage of a row selected with COLUMNS."""
    return StoredMessage(
        handle=row[0], content_hash=row[1], source=row[2], line=row[3], turn=row[4], role=row[5],
        text=row[6], message=jsonio.loads(row[7]), created_at=row[8],
    )


def now() -> str:
    """The current time as the store writes it: ISO-8601 UTC, milliseconds, a Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
