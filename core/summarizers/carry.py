"""An earlier summary carried into the next one, within the room the new summary leaves it.

Whole when it fits. A summary a model wrote may open with its own working-out (Claude Code's
"Analysis:" before "Summary:"): what it concluded follows it, so that goes first. Then the
newest of compact's own segments that fit, else the head and tail of the text.
"""

from __future__ import annotations

import re

from core.counting.counter import MessageCounter
from core.engine.clamp import clamp_text
from core.engine.placeholders import CUT_START
from core.summarizers.base import TRAILER

_SEGMENT = re.compile(r"<summary\b.*?</summary>", re.DOTALL)

# A model's summary may open with its own working-out ("Analysis:" … "Summary:", Claude Code's):
# what it concluded is in the summary after it, so a summary too long to carry loses it first.
_ANALYSIS = re.compile(r"^(?:Analysis:|<analysis>)\s*$(.*?)^(?=Summary:|<summary>)", re.MULTILINE | re.DOTALL)


def _without_analysis(previous: str, counter: MessageCounter) -> str:
    found = _ANALYSIS.search(previous)
    if found is None:
        return previous
    cut = counter.count_text(found.group(0))
    return f"{previous[:found.start()]}{CUT_START}the earlier summary's analysis, {cut:,} tokens, left out …]\n" \
           f"{previous[found.end():]}"


def carry(previous: str, room: int, counter: MessageCounter) -> str:
    """An earlier summary, whole when it fits; else its newest segments, or its head and tail."""
    # The earlier trailer goes: this summary writes its own.
    previous = "\n".join(ln for ln in previous.splitlines() if not ln.startswith(TRAILER)).strip()
    if not previous or room <= 0:
        return ""
    if counter.count_text(previous) <= room:
        return previous
    previous = _without_analysis(previous, counter)
    if counter.count_text(previous) <= room:
        return previous
    segments = _SEGMENT.findall(previous)
    if segments:
        kept: list[str] = []
        used = 0
        for segment in reversed(segments):
            cost = counter.count_text(segment) + 1
            if used + cost > room:
                break
            kept.insert(0, segment)
            used += cost
        if kept:
            return "\n".join(kept)
    return clamp_text(previous, room, counter) or ""
