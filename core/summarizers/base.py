"""The Summarizer seam: what the summarize strategy asks, and what a summarizer answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from core.counting.counter import MessageCounter

PRESERVED_KINDS = ("decision", "rationale", "error", "next_step", "technical_detail")
TRAILER = "## Preserved Kinds:"


@dataclass(frozen=True)
class SummaryRequest:
    """A span of whole turns to summarize (message dicts, in order)."""

    messages: tuple[dict[str, Any], ...]
    first_turn: int
    last_turn: int
    previous: str | None = None  # the body of the summary this one folds in
    facts: tuple[str, ...] = ()  # identifiers that must survive, verbatim
    failed: tuple[int, ...] = ()  # the positions of the results the transcript marks as failed
    # The conversation's turn of each message (a span may go around a request it keeps in place);
    # empty: counted from first_turn.
    turns: tuple[int, ...] = ()
    max_tokens: int = 1024


@dataclass
class SummaryResult:
    text: str  # summary segments and the trailer
    by: str  # "extractive", or "openai:<model>"
    attempts: int = 1
    preserved_kinds: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a required kind still missing after the retry


class Summarizer(Protocol):
    """What the summarize strategy asks of a summarizer.

    ``name`` says who wrote a summary (``SummaryResult.by`` falls back to it for a cached one).
    ``fits_its_room`` says whether the strategy may ask again to fit a summary to its room: True
    when asking is free and the text follows ``max_tokens`` (the extractive digest: asked again for
    a shorter one when the file lists and kept identifiers come on top, and the span refitted to
    keep more of the newest messages when the digest came out smaller); False when each ask costs
    a call (a model), where the first summary stands. (``--summarizer none`` runs no summarizer.)
    """

    @property
    def name(self) -> str: ...

    @property
    def fits_its_room(self) -> bool: ...

    def identity(self) -> str:
        """What determines the output besides the request (model, prompt): part of the cache key."""
        ...

    def summarize(self, request: SummaryRequest, counter: MessageCounter) -> SummaryResult: ...


def preserved_kinds(text: str) -> list[str] | None:
    """The kinds listed in the `## Preserved Kinds:` trailer, or None when there is no trailer."""
    for line in reversed(text.splitlines()):
        if line.strip().startswith(TRAILER):
            listed = line.strip()[len(TRAILER) :]
            return [k.strip().lower().replace(" ", "_") for k in listed.split(",") if k.strip()]
    return None
