"""Statements a summary can quote: those that give a value (a number, an id, a path, a name).

From a message's text, the paragraphs' sentences and the lists and tables with what introduces
them (passages.py); from tool output, its prose lines. Not code, not an opener.
"""

from __future__ import annotations

import re

from core.messages import HARNESS_PREFIXES
from core.summarizers.facts import LINE_NUMBER
from core.summarizers.passages import PASSAGE_CHARS, passages

FACT_CHARS = 200
# Of a tool result (or a message's text), the facts and the error line are looked for in this many characters.
TOOL_SCAN_CHARS = 32_000

VALUE = re.compile(
    r"\d{2,}|\b[0-9a-f]{7,}\b|\b\w+(?:[._/-]\w+){1,}\b|[\w.+-]+@[\w-]+\.\w+|https?://\S+|`[^`]+`|'[^']{2,}'|\"[^\"]{2,}\""
)
_STATEMENT = re.compile(r"\b(?:is|are|was|were|equals|uses|returns|set to|means|lives|runs|expects)\b|: |= ", re.IGNORECASE)
_CODE_LINE = re.compile(r"^\s*(?:def |class |import |from |return |if |for |while |[{}()\[\];#]|//|/\*|\*|@|<)")

def head(text: str) -> str:
    """The first TOOL_SCAN_CHARS of a message's text, in whole lines (a pasted log can be megabytes)."""
    return text if len(text) <= TOOL_SCAN_CHARS else text[: text.rfind("\n", 0, TOOL_SCAN_CHARS) + 1]


def tool_facts(text: str, limit: int) -> list[str]:
    """Prose lines of tool output that state a value ("The token is KX-4471."), not code nor tables.

    Tool output is the bulk of a transcript: only its first TOOL_SCAN_CHARS are read, line by
    line, and the cheap tests come first."""
    found: list[str] = []
    for line in text[:TOOL_SCAN_CHARS].splitlines():
        line = line.strip()
        if not 12 <= len(line) <= 160 or not line[0].isalpha() or not line.endswith((".", "!")):
            continue
        line = LINE_NUMBER.sub("", line).strip()
        if not line[:1].isupper() or line.count(" ") < 3 or _CODE_LINE.match(line):
            continue
        if not VALUE.search(line) or not _STATEMENT.search(line):
            continue
        if sum(ch.isalpha() or ch == " " for ch in line) < 0.7 * len(line):
            continue
        found.append(line)
        if len(found) >= limit:
            break
    return found


def value_statements(text: str, limit: int, *, from_tool: bool) -> list[str]:
    """Statements that give a value (a number, an id, a path, a name), not code; prose first: a
    paragraph's sentences, and lists and tables with what introduces them (passages.py)."""
    if from_tool:
        return tool_facts(text, limit)
    prose: list[str] = []
    other: list[str] = []
    for passage in passages(text):
        sentence = passage.text
        if not 12 <= len(sentence) <= (FACT_CHARS if passage.is_sentence else PASSAGE_CHARS):
            continue
        if _CODE_LINE.match(sentence) or not VALUE.search(sentence) or not _STATEMENT.search(sentence):
            continue
        is_prose = sentence[0].isupper() and (
            not passage.is_sentence or sentence.endswith((".", "!")) and sentence.count(" ") >= 3)
        (prose if is_prose else other).append(sentence)
    return (prose + other)[:limit]


def says_something(sentence: str) -> bool:
    """More than an opener: a value (a name, a number, a path), or four words that are neither an
    exclamation ("Ah, I understand now!") nor a lead-in to what follows ("This makes sense because:")."""
    if VALUE.search(sentence) is not None:
        return True
    return len(sentence.split()) >= 4 and not sentence.rstrip().endswith(("!", ":"))


def asks(text: str) -> bool:
    """User text that asks something (not a harness note: a command's output, a reminder)."""
    return bool(text.strip()) and not text.lstrip().startswith(HARNESS_PREFIXES)
