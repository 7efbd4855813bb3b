"""Which tool results the agent went on to use: the conversation's own evidence of what matters.

A result is *used later* when a distinctive string it holds (a path, an id, a number of five or
more digits, a dotted, snake_case or CamelCase name) appears in what the assistant wrote after it:
its text and the values of its later calls' arguments (not their keys, which are the tool's
schema). A lookup the agent never came back to (the wrong reservation, a search that found
nothing useful, a listing it moved past) is the cheapest thing to lose; the record it quotes
from, the file it edits, is not. clear_tool_results uses it as the order: what was not used
later goes first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.engine.workspace import Workspace
from core.messages import Message, call_arguments, content_text, string_values, tool_calls

# A string worth following: it carries a digit, a path or dotted separator, an underscore or an
# inner capital (KA7I60, gift_card_7480005, src/app/cache.py, self._window, TokenCounter), 5+ chars.
_STRING = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{3,}[A-Za-z0-9_]")
_DISTINCT = re.compile(r"[0-9_./]|[a-z][A-Z]")
# A long result is read at its ends: what an agent quotes from a file or a listing is most often
# near the top, and a command's verdict at the bottom (and it keeps the cost linear and small).
HEAD_CHARS = 12_000
TAIL_CHARS = 3_000


def distinct_strings(text: str) -> set[str]:
    return {s for s in _STRING.findall(text) if _DISTINCT.search(s)}


def _authored(data: Mapping[str, Any]) -> str:
    """What the assistant itself wrote in a message: its text and its calls' argument values."""
    parts = [content_text(data)]
    for call in tool_calls(data):
        parts.extend(string_values(call_arguments(call)))
    return "\n".join(parts)


# A string found in more than this share of the results judged (and in more than two) is the
# session's boilerplate (an import line, a common exception, a JSON key), not a sign of use.
COMMON_SHARE = 0.1


def used_later(workspace: Workspace, results: Mapping[int, Message]) -> set[int]:
    """The positions of ``results`` whose message holds a string the assistant wrote after it."""
    held = {p: distinct_strings(_ends(content_text(m.data))) for p, m in results.items()}
    found_in: dict[str, int] = {}
    for strings in held.values():
        for string in strings:
            found_in[string] = found_in.get(string, 0) + 1
    common = max(2, int(COMMON_SHARE * len(results)))
    last_written: dict[str, int] = {}
    for position, message in enumerate(workspace.messages):
        if message.role == "assistant" and workspace.alive(position):
            for string in distinct_strings(_authored(message.data)):
                last_written[string] = position
    return {p for p, strings in held.items()
            if any(found_in[s] <= common and last_written.get(s, -1) > p for s in strings)}


def _ends(text: str) -> str:
    return text if len(text) <= HEAD_CHARS + TAIL_CHARS else text[:HEAD_CHARS] + "\n" + text[-TAIL_CHARS:]
