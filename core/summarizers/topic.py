"""What a span that does not open the conversation was about, in a few words, for its summary's topic."""

from __future__ import annotations

import re
from collections.abc import Iterable

TOPIC_NAMES = 2
_CHANGED = re.compile(r"^- changed ([^:]+)")
_CALLED = re.compile(r"^- (?:ran `|([\w.-]+)\()")


def span_topic(lines: Iterable[tuple[bool, str]]) -> str:
    """What a span that does not open the conversation was about: how many requests, and the files
    it changed most (else the tools it called most), from the lines read."""
    lines = list(lines)
    requests = sum(is_request for is_request, _ in lines)
    changed: dict[str, int] = {}
    called: dict[str, int] = {}
    for _, text in lines:
        if (found := _CHANGED.match(text)) is not None:
            for path in found.group(1).split(", "):
                name = path.rstrip("/").rsplit("/", 1)[-1]
                changed[name] = changed.get(name, 0) + 1
        elif (found := _CALLED.match(text)) is not None:
            name = found.group(1) or "shell"
            called[name] = called.get(name, 0) + 1
    names, what = (changed, "changes to") if changed else (called, "calls to")
    ranked = sorted(names, key=lambda name: -names[name])
    said = ", ".join(ranked[:TOPIC_NAMES]) + (f" and {len(ranked) - TOPIC_NAMES} more" if len(ranked) > TOPIC_NAMES else "")
    asked = f"{requests} request{'s' * (requests != 1)}" if requests else "the assistant's work"
    return f"{asked}; {what} {said}" if said else asked
