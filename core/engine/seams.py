"""The store and the summarizer a run's strategies may use, and the items a run offloads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.messages import Message, countable_text, wire_message

if TYPE_CHECKING:  # the store is imported only by runs that offload (sqlite3 is not free to load)
    from core.store import OffloadStore
    from core.summarizers.base import Summarizer


@dataclass
class Seams:
    """What a run has to offload to and summarize with; None means absent (the strategy is skipped)."""

    store: OffloadStore | None = None
    summarizer: Summarizer | None = None

    def reason_missing(self, need: str | None) -> str | None:
        if need is None or getattr(self, need) is not None:
            return None
        return f"no {need}"

    def needed_summarizer(self) -> Summarizer:
        """The summarizer, for a strategy that needs it (the pipeline skips one when there is none)."""
        assert self.summarizer is not None, "a strategy that needs the summarizer ran without one"
        return self.summarizer


def offload_items(originals: Sequence[tuple[Message, int]], source: str) -> list[Any]:
    """The store's items for messages a step removed or rewrote (their content before the step)."""
    from core.store import OffloadItem

    return [
        OffloadItem(source=source, line=m.line, turn=turn, role=m.role, text=countable_text(m.data),
                    message=wire_message(m.data))  # stored as the transcript holds it
        for m, turn in originals
        if m.data
    ]
