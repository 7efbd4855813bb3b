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

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from core.engine.file_calls import PATH_ARGUMENTS, SHELL_TOOLS, classify, shell_command
from core.messages import call_arguments, call_name, content_text, string_values, tool_calls
from core.summarizers.span_memo import SpanMemo

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


# A line this short (a digest line, a line of a tool's output) is looked up again and again as a
# run composes a span's summary more than once: its names are remembered, a long text's are not.
SHORT_TEXT = 400


def names_in(text: str) -> frozenset[str]:
    """The distinctive names ``text`` holds (see _NAME), without surrounding punctuation."""
    return _short_names(text) if len(text) <= SHORT_TEXT else _names(text)


@functools.lru_cache(maxsize=1 << 16)
def _short_names(text: str) -> frozenset[str]:
    return _names(text)


def _names(text: str) -> frozenset[str]:
    found: set[str] = set()
    for match in _NAME.finditer(text):
        name = (match.group(1) or match.group(2) or "").strip(".-/~")
        if len(name) >= 4:
            found.add(name)
        if "/" in name:  # a path is named by its parts too (`-mnt-c-python-cctrace-test` in ~/.claude/projects/…/)
            found.update(part.strip(".-") for part in name.split("/") if len(part.strip(".-")) >= 6)
    return frozenset(found)


def _message_text(message: Mapping[str, Any]) -> str:
    if message.get("role") in ("tool", "function"):
        return ""
    parts = [content_text(message)[:SCAN_CHARS]]
    for call in tool_calls(message):
        parts += [value[:SCAN_CHARS] for value in string_values(call_arguments(call))]
    return "\n".join(parts)


class Mentions:
    """Where each name of a span is mentioned: the positions of the messages naming it."""

    def __init__(self, messages: Sequence[Mapping[str, Any]], memo: SpanMemo[frozenset[str]] | None = None) -> None:
        """``memo`` keeps each message's names between spans (a run composes one span's summary
        several times, over spans that overlap); it is left holding this span's only."""
        self.at: dict[str, list[int]] = {}
        self.span = len(messages)
        earlier = memo.renewed() if memo is not None else None
        for position, message in enumerate(messages):
            known = earlier.get(message) if earlier is not None else None
            if known is None:
                known = names_in(_message_text(message))
            if memo is not None:
                memo.put(message, known)
            for name in known:
                self.at.setdefault(name, []).append(position)
        limit = max(8, int(len(messages) * COMMON_SHARE))
        self.at = {name: where for name, where in self.at.items() if len(where) <= limit}

    def later(self, text: str, position: int, besides: frozenset[str] = frozenset()) -> int:
        """How many messages after ``position`` name one of the names ``text`` holds (not ``besides``)."""
        later: set[int] = set()
        for name in names_in(text) - besides:
            later.update(p for p in self.at.get(name, ()) if p > position)
        return len(later)

    def gone_back_to(self, text: str, position: int) -> bool:
        return self.later(text, position) >= LATER_MESSAGES

    @functools.cached_property
    def recurrence(self) -> dict[str, int]:
        """Each name's weight in the span: the messages naming it, those of the newer half twice
        (what the work came back to lately is what it is about now)."""
        half = self.span // 2
        return {name: sum(2 if p >= half else 1 for p in where) for name, where in self.at.items()}


# Of a tool's output, so many lines are looked at for lines worth quoting.
QUOTE_SCAN_LINES = 300
QUOTES_PER_RESULT = 2
_LISTING_NUMBER = re.compile(r"^\s*(\d+)(?:→|\t|: ?)")


def quotable_lines(output: str, mentions: Mentions, position: int, asked: str = "") -> list[tuple[int, str]]:
    """The lines of a tool's output the rest of the span went back to (a function's signature, the
    failing assertion, a config value), most named again first, at most QUOTES_PER_RESULT: each
    with its line number (the listing's own, else its place in the output). The names the call
    itself gave (``asked``: its path, its command) do not count: the later work on that file
    names them whatever the line says."""
    besides = frozenset(names_in(asked))
    found: list[tuple[int, int, str]] = []
    for index, raw in enumerate(output.splitlines()[:QUOTE_SCAN_LINES]):
        numbered = _LISTING_NUMBER.match(raw)
        line = (raw[numbered.end():] if numbered else raw).strip()
        if not 12 <= len(line) <= 160 or " " not in line or not any(ch.isalpha() for ch in line):
            continue
        later = mentions.later(line, position, besides)
        if later >= LATER_MESSAGES:
            found.append((later, int(numbered.group(1)) if numbered else index + 1, line))
    found.sort(key=lambda item: -item[0])
    return [(number, line) for _, number, line in found[:QUOTES_PER_RESULT]]


QUOTED_AT = " output, line "  # "- Bash(cargo init) output, line 2: …"


def quoted_output(call: Mapping[str, Any], output: str, mentions: Mentions, position: int) -> list[str]:
    """The summary lines quoting a call's output (quotable_lines), each saying where it came from:
    "- Read(src/a.py) output, line 6: def migrate_checkpoint(...)". Not a write's (its output
    confirms it)."""
    found = classify(call)
    if not output or found is not None and found[0] == "write":
        return []
    arguments = call_arguments(call)
    tool = call_name(call)
    source = next((v.strip() for k in PATH_ARGUMENTS if isinstance(v := arguments.get(k), str) and v.strip()), "")
    if not source and tool in SHELL_TOOLS:
        source = " ".join(shell_command(arguments).split())[:90]
    called = f"{tool}({source})" if source else tool
    asked = " ".join(string_values(arguments))
    return [f"- {called}{QUOTED_AT}{number}: {' '.join(line.split())[:200]}"
            for number, line in quotable_lines(output, mentions, position, asked)]
