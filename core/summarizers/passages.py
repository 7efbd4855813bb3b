"""Whole statements of a message's text, each standing on its own out of context.

A summary quotes single statements of a long message. Split at line ends, Markdown gives pieces
that mean nothing alone: a list item without what it lists ("- Format: `<hash>@v<version>`"), a
table row without its table, a heading ("**Drafting project creation plan**"). Here a paragraph
gives its sentences; a list or a table gives one passage, led by what introduces it (the
sentence before it that ends with a colon, else the heading above it), its items joined; a
heading alone and code blocks give none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.messages import iter_text_parts

_FENCE = re.compile(r"^\s*(?:```|~~~)")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+(.+?)[\s#]*|\*\*([^*]+)\*\*:?|__([^_]+)__:?)$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.*)$")
_ROW = re.compile(r"^\s*\|(.*)\|?\s*$")
_RULE = re.compile(r"^[\s|:-]+$")  # a table's |---|---| line
# A sentence ends at its stop before a word that is not lower case, or at a line end before a
# capital (a line of its own: "Note: the pager is PGR-88213."); a line that runs on is wrapped text.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])|\n(?=[A-Z`\"'])")
_EMPHASIS = re.compile(r"\*\*|__")
_POINT_NUMBER = re.compile(r"^\d{1,3}[.)]$")
# A line of a code block or log that is a sentence ("The deploy token is KX-4471."), not code.
_PROSE_LINE = re.compile(r"^[A-Z][a-z]+(?: [^ ]+){3,}[.!?]$")
# How long a list or table passage may grow: its first items that fit, and how many more.
PASSAGE_CHARS = 240


@dataclass(frozen=True)
class Passage:
    text: str
    is_sentence: bool  # a paragraph's sentence (else a list or table with its lead-in)


def _plain(text: str) -> str:
    return " ".join(_EMPHASIS.sub("", text).split())


def _joined(lead: str, items: list[str], limit: int) -> str:
    """The lead-in and as many items as fit in ``limit`` characters, then how many more."""
    head = f"{lead.rstrip(':').strip()}: " if lead else ""
    text = head
    for count, item in enumerate(items):
        added = ("; " if text != head else "") + item
        if len(text) + len(added) > limit and text != head:
            return f"{text}; and {len(items) - count} more"
        text += added
    return text


def _row_cells(line: str) -> list[str]:
    return [_plain(cell) for cell in line.strip().strip("|").split("|")]


def _table(rows: list[str], lead: str, limit: int) -> str:
    """A table as one passage: each row "first cell: the others", after what introduces it (or its header)."""
    cells = [_row_cells(row) for row in rows if not _RULE.match(row)]
    has_header = len(rows) > 1 and bool(_RULE.match(rows[1]))
    if has_header:
        header, cells = cells[0], cells[1:]
        lead = lead or " / ".join(cell for cell in header if cell)
    items = [f"{row[0]}: {', '.join(c for c in row[1:] if c)}" if len(row) > 1 else row[0] for row in cells if any(row)]
    return _joined(lead, items, limit)


class _Reader:
    """Reads a text's lines into passages; ``lead`` is what introduces the next list or table."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.found: list[Passage] = []
        self.paragraph: list[str] = []
        self.heading = ""
        self.lead = ""

    def end_paragraph(self) -> None:
        if not self.paragraph:
            return
        sentences = [_plain(s) for s in _SENTENCE_END.split("\n".join(self.paragraph)) if s.strip()]
        self.paragraph = []
        # A point's number ("**2. The cache** is stale …") is no sentence: it leads the one after it.
        for index in range(len(sentences) - 2, -1, -1):
            if _POINT_NUMBER.match(sentences[index]):
                sentences[index:index + 2] = [f"{sentences[index]} {sentences[index + 1]}"]
        if self.lead and sentences:  # "The fix is:" and the paragraph it leads to
            sentences[0] = f"{self.lead} {sentences[0]}"
            self.lead = ""
        self.flush_lead()
        # A sentence ending with a colon introduces what follows: a list or table takes it in.
        self.lead = sentences.pop() if sentences and sentences[-1].endswith(":") else ""
        self.found += [Passage(s, True) for s in sentences]

    def flush_lead(self) -> None:
        """A lead-in nothing followed is a sentence of its own."""
        if self.lead:
            self.found.append(Passage(self.lead, True))
        self.lead = ""

    def block(self, kind: str, lines: list[str]) -> None:
        self.end_paragraph()
        lead = self.lead or self.heading
        if kind == "list":
            text = _joined(lead, [_plain(line) for line in lines], self.limit)
        else:
            text = _table(lines, lead, self.limit)
        if text:
            self.found.append(Passage(text, False))
        self.lead = ""

    def read(self, text: str) -> list[Passage]:
        lines = text.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            if _FENCE.match(line):  # code, up to its closing fence: only a line that reads as a sentence
                self.end_paragraph()
                self.flush_lead()
                index += 1
                while index < len(lines) and not _FENCE.match(lines[index]):
                    if _PROSE_LINE.match(lines[index].strip()):
                        self.found.append(Passage(lines[index].strip(), True))
                    index += 1
            elif not line.strip():
                self.end_paragraph()
            elif (heading := _HEADING.match(line)) is not None:
                self.end_paragraph()
                self.flush_lead()
                self.heading = _plain(next(g for g in heading.groups() if g)).rstrip(":")
            elif _ITEM.match(line) or _ROW.match(line):
                kind = "list" if _ITEM.match(line) else "table"
                block: list[str] = []
                while index < len(lines) and lines[index].strip() and not _FENCE.match(lines[index]):
                    item = _ITEM.match(lines[index]) if kind == "list" else None
                    if kind == "list" and item is None and block and lines[index][:1].isspace():
                        block[-1] += " " + lines[index].strip()  # an item's continuation line
                    elif kind == "list" and item is not None:
                        block.append(item.group(1))
                    elif kind == "table" and _ROW.match(lines[index]):
                        block.append(lines[index])
                    else:
                        break
                    index += 1
                self.block(kind, block)
                continue
            else:
                self.paragraph.append(line.strip())
            index += 1
        self.end_paragraph()
        self.flush_lead()
        return self.found


def passages(text: str, limit: int = PASSAGE_CHARS) -> list[Passage]:
    """The statements of ``text`` that stand on their own, in order (see the module's doc)."""
    return _Reader(limit).read(text)


def said_and_thought(data: Mapping[str, Any]) -> tuple[str, str]:
    """A message's text in two: what it says, and its thinking (Anthropic thinking, a reasoning summary)."""
    content = data.get("content")
    if not isinstance(content, list):
        return "\n".join(iter_text_parts(content)), ""
    said: list[str] = []
    thought: list[str] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        (thought if kind in ("thinking", "reasoning") else said).extend(iter_text_parts([part]))
    return "\n".join(said), "\n".join(thought)
