"""Which of a span's candidate lines the rest of the span went back to.

A finding the agent and the user kept coming back to ("Claude Code uses
`-mnt-c-python-cctrace-test` (with hyphen)", later "fix the underscore path normalization bug")
is worth more than one nobody mentioned again, however new. The signal is read before the cut,
from the span alone: the distinctive names a line holds (a path, an identifier, a quoted or
backticked term, a CamelCase or snake_case name, a number of four digits or more) and how many
later messages of the span name one of them again: a user's words, an assistant's text and the
arguments of its calls (tool output is the bulk of a span and mostly echoes what was asked).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from core.messages import call_arguments, content_text, string_values, tool_calls

# A name worth following: backticked, a path or dotted name, snake_case, kebab-case, CamelCase, or a long number.
_NAME = re.compile(
    r"`([^`\s]{3,80})`|((?:[\w.-]*/)+[\w.-]+|\b[A-Za-z_][\w-]*[_.-][\w.-]*\w\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|\b\d{4,}\b)"
)
# Of each message, the names are looked for in this many characters.
SCAN_CHARS = 4000
# Names most messages hold (a file every call touches) say nothing about one line.
COMMON_SHARE = 0.25
# A line is "gone back to" when this many later messages name one of its names.
LATER_MESSAGES = 2


def names_in(text: str) -> set[str]:
    """The distinctive names ``text`` holds (see _NAME), without surrounding punctuation."""
    found: set[str] = set()
    for match in _NAME.finditer(text):
        name = (match.group(1) or match.group(2) or "").strip(".-/~")
        if len(name) >= 4:
            found.add(name)
        if "/" in name:  # a path is named by its parts too (`-mnt-c-python-cctrace-test` in ~/.claude/projects/…/)
            found.update(part.strip(".-") for part in name.split("/") if len(part.strip(".-")) >= 6)
    return found


def _message_text(message: Mapping[str, Any]) -> str:
    if message.get("role") in ("tool", "function"):
        return ""
    parts = [content_text(message)[:SCAN_CHARS]]
    for call in tool_calls(message):
        parts += [value[:SCAN_CHARS] for value in string_values(call_arguments(call))]
    return "\n".join(parts)


class Mentions:
    """Where each name of a span is mentioned: the positions of the messages naming it."""

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self.at: dict[str, list[int]] = {}
        for position, message in enumerate(messages):
            for name in names_in(_message_text(message)):
                self.at.setdefault(name, []).append(position)
        limit = max(8, int(len(messages) * COMMON_SHARE))
        self.at = {name: where for name, where in self.at.items() if len(where) <= limit}

    def later(self, text: str, position: int) -> int:
        """How many messages after ``position`` name one of the names ``text`` holds."""
        later: set[int] = set()
        for name in names_in(text):
            later.update(p for p in self.at.get(name, ()) if p > position)
        return len(later)

    def gone_back_to(self, text: str, position: int) -> bool:
        return self.later(text, position) >= LATER_MESSAGES
