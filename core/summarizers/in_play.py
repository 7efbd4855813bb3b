"""The names a summarized span came back to most, each under the file that held them.

An LLM's summary keeps what the session revolves around: the functions and types the agent read,
changed and named again (`getBranchCheckpoints`, `CheckpointID`), and where they live. Read from
the span alone: how many of its messages name each distinctive name (salience.Mentions), the
newer half counting twice; each name goes under the file most of those messages read or wrote.
The line takes the room the digest's lines left and, up to NAMES_SHARE of it, that of the lines
worth least (the assistant's reads, commands and remarks, what it said without a value): never
what the user said or asked, an error, a change, or a statement of a value.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from core.counting.counter import MessageCounter
from core.engine.file_calls import classify
from core.messages import Pairing, call_with_id, tool_calls
from core.summarizers.call_lines import CHANGE, FACT
from core.summarizers.salience import Mentions
from core.summarizers.statements import value_statements

NAMES_SHARE = 0.15
NAMES_MIN_MESSAGES = 2  # a name one message named is not what the work revolves around
NAMES_MIN_TOKENS = 24  # (less room holds the label and a name or two: not worth a line)
IN_PLAY = "- names most used, by the file that held them: "
ELSEWHERE = "elsewhere"  # the names no file call's message held
_ASSISTANT_SAID = ("- assistant: ", "- assistant (thinking): ")
# Not names a model can look up: words joined by hyphens ("re-running", "repo-aware",
# "Co-Authored-By") and Python's dunders (__name__, __future__), in every module alike.
_NOT_A_NAME = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)+|__\w+__")


class Line(Protocol):
    @property
    def priority(self) -> int: ...
    @property
    def order(self) -> int: ...
    @property
    def text(self) -> str: ...


Chosen = TypeVar("Chosen", bound=Line)


@dataclass
class NamesSource:
    """What the names are read from: the span, its call pairing, and where each name is mentioned."""

    messages: Sequence[Mapping[str, Any]]
    pairing: Pairing
    mentions: Mentions
    _files: dict[int, str] = field(default_factory=dict)

    def file_of(self, position: int) -> str:
        """The file the message at ``position`` read or wrote (a file call, or its result), by its
        last component; "" for none or several."""
        if position not in self._files:
            calls = [call for owner, call_id in self.pairing.answered_by.get(position, ())
                     if (call := call_with_id(self.messages[owner], call_id)) is not None]
            paths = {found[1] for call in calls or tool_calls(self.messages[position])
                     if (found := classify(call)) is not None}
            self._files[position] = next(iter(paths)).rstrip("/").rpartition("/")[2] if len(paths) == 1 else ""
        return self._files[position]


def gives_way(line: Line) -> bool:
    """Whether a digest line may give way to the names line."""
    if line.priority > CHANGE:
        return True
    if line.priority != FACT or not line.text.startswith(_ASSISTANT_SAID):
        return False
    return not value_statements(line.text.partition(": ")[2], 1, from_tool=False)


def with_names_in_play(chosen: list[Chosen], source: NamesSource, room: int, counter: MessageCounter,
                       *, full: bool) -> tuple[list[Chosen], str, int]:
    """The digest's ``chosen`` lines with the names line beside them, in ``room`` tokens: the lines
    that gave way to it (those worth least, the oldest first) left out. And how many gave way.
    ``full``: the digest left lines out; else every line stays and the names get what room is left."""
    costs = [counter.count_text(line.text) + 1 for line in chosen]
    free = room - sum(costs)
    yielding = sorted((i for i, line in enumerate(chosen) if full and gives_way(line)),
                      key=lambda i: (-chosen[i].priority, chosen[i].order))
    names_room = min(max(free, int(room * NAMES_SHARE)), free + sum(costs[i] for i in yielding)) if full else free
    # (a name only a line that may give way says is listed: that line may be the one to go)
    may_go = set(yielding)
    staying = "\n".join(line.text for i, line in enumerate(chosen) if i not in may_go)
    line = names_in_play(source, staying, names_room, counter)
    if not line:
        return chosen, "", 0
    need = counter.count_text(line) + 1 - free
    gone: set[int] = set()
    for i in yielding:
        if need <= 0:
            break
        gone.add(i)
        need -= costs[i]
    return [kept for i, kept in enumerate(chosen) if i not in gone], line, len(gone)


def names_in_play(source: NamesSource, said: str, room: int, counter: MessageCounter) -> str:
    """The line naming what the span revolves around, most named first, that ``said`` (the digest's
    lines) does not name already, grouped by file, in what fits ``room`` ("" when nothing does)."""
    if room < NAMES_MIN_TOKENS:
        return ""
    weights = source.mentions.recurrence
    # A path's folders are named with it (`worktrees`, `strategy`): the file lists say where they are.
    folders = {part.strip(".-") for name in source.mentions.at if "/" in name for part in name.split("/")}
    scored = sorted(((weights[name], name, where) for name, where in source.mentions.at.items()
                     if len(set(where)) >= NAMES_MIN_MESSAGES and "/" not in name and name not in folders
                     and not _NOT_A_NAME.fullmatch(name) and name not in said),
                    key=lambda item: (-item[0], item[1]))
    by_file: dict[str, list[str]] = {}
    shown = ""
    for _, name, where in scored:
        files = Counter(f for p in set(where) if (f := source.file_of(p)))
        home = files.most_common(1)[0][0] if files else ELSEWHERE
        if name == home:
            continue  # (the file's own name: its group says it)
        trial = {**by_file, home: [*by_file.get(home, []), name]}
        text = IN_PLAY + "; ".join(f"{file}: {', '.join(names)}" for file, names in trial.items())
        if counter.count_text(text) > room:
            break
        by_file, shown = trial, text
    return shown
