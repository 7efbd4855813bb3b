"""The files a summary names, and the working copies of them a span goes around.

The summary's "Files read" and "Files changed" lists (tracked tool arguments, whatever the
agent), an earlier summary's parts to fold in, the agent's newest writes of the files it
changed last (the text the continuation edits and builds on), and, under a small budget, the
old cut outputs a summary's findings outrank.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from core.engine.file_calls import classify, patch_changes
from core.messages import (
    FAILED,
    SUMMARY_MARKER,
    call_arguments,
    call_ids,
    call_name,
    content_text,
    original_data,
    result_ids,
    tool_calls,
)
from core.summarizers.facts import first_error_line, tool_output
from core.summarizers.span_memo import SpanMemo

if TYPE_CHECKING:
    from core.engine.workspace import Workspace

FILES_READ = "Files read:"
FILES_CHANGED = "Files changed:"
FACTS = "Kept verbatim:"
MAX_FILES = 30
# The agent's newest write of a file (the text the continuation edits and builds on) is left out
# of the span, as the earlier steps left it, when it takes at most this share of the budget
# (Claude Code likewise brings back the files it worked on after compacting).
WORKING_COPY_SHARE = 0.4
WORKING_FILES = 5
# Under this budget a summary's room holds little beside the requests: the findings it left out
# outrank an old tool output (output_outranked).
SMALL_BUDGET = 3200
OLD_OUTPUT_TOKENS = 200  # (a short result, "Test export cleaned up", costs the summary nothing)

# (is a read, path, holds the whole content) for each file a message's calls read or change.
Touches = list[tuple[bool, str, bool]]


def tracked_files(messages: Sequence[Mapping[str, Any]],
                  memo: SpanMemo[Touches] | None = None) -> tuple[list[str], list[str]]:
    """The files the span's tool calls read and changed, whatever agent made the calls, ordered by
    when each was last touched: the lists keep the newest names, and a file gone back to is recent.
    ``memo`` keeps each message's files between calls on overlapping spans (a run composes one
    span's summary several times, and reading a call's arguments is the cost)."""
    read: dict[str, None] = {}
    changed: dict[str, None] = {}
    touched = [(message, touches(message, memo)) for message in messages]
    failed = failed_calls(messages, {i for message, files in touched if files for i in call_ids(message)})
    for message, files in touched:
        if failed and failed.intersection(call_ids(message)):  # (a file it failed to read or change is neither)
            files = touches({**message, "tool_calls": [c for c in tool_calls(message) if str(c.get("id")) not in failed]},
                            None)
        for is_read, path, _ in files:
            _touch(read if is_read else changed, (path,))
    return list(read), list(changed)


def failed_calls(messages: Sequence[Mapping[str, Any]], among: set[str]) -> set[str]:
    """Of the calls ``among``, those whose result opens with an error (a read of a missing file, an
    edit that found nothing to replace)."""
    return {call_id for message in messages if message.get("role") in ("tool", "function")
            and among.intersection(result_ids(message)) and _opens_with_error(tool_output(content_text(message)))
            for call_id in result_ids(message)}


def _opens_with_error(text: str) -> bool:
    """A file call that failed says so on its first line ("<tool_use_error>File does not exist.",
    "Error: old_string not found", "apply_patch verification failed: …")."""
    first = text.lstrip()[:FIRST_LINE_CHARS].split("\n", 1)[0]
    return bool(first) and first_error_line(first) is not None


def touches(message: Mapping[str, Any], memo: SpanMemo[Touches] | None) -> Touches:
    """The files the message's calls read or change, in order (remembered in ``memo``)."""
    touched = memo.get(message) if memo is not None else None
    if touched is None:
        touched = []
        for call in tool_calls(message):
            found = classify(call)
            if found is not None:
                touched.append((found[0] == "read", found[1], found[0] == "write" and _whole_write(call)))
            # A patch may change several files; one it adds (or deletes) it gives whole.
            touched += [(False, path, whole) for path, whole in patch_changes(call).items()]
        if memo is not None:
            memo.put(message, touched)
    return touched


def _whole_write(call: Mapping[str, Any]) -> bool:
    """Whether a write call holds the file's whole content (not an edit of part of it)."""
    arguments = call_arguments(call)
    return any(isinstance(arguments.get(key), str) for key in ("content", "file_text"))


def writes(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(tool, path) for each call of the message that writes a file (its content, an edit, a patch)."""
    return [(call_name(call), found[1]) for call in tool_calls(message)
            if (found := classify(call)) is not None and found[0] == "write"]


def _touch(files: dict[str, None], paths: Sequence[str]) -> None:
    """``paths`` moved to the end of ``files`` (the lists are ordered by last touch)."""
    for path in paths:
        files.pop(path, None)
        files[path] = None


class Previous(NamedTuple):
    """What an earlier summary holds: its body, its file lists, the identifiers it kept verbatim,
    and how many older names each list said it left out (changed, read)."""

    body: str
    read: list[str]
    changed: list[str]
    facts: list[str]
    left_out: tuple[int, int]


def parse_previous(text: str) -> Previous:
    """A previous summary's parts ("" gives an empty one)."""
    body: list[str] = []
    read: list[str] = []
    changed: list[str] = []
    facts: list[str] = []
    read_left, changed_left = 0, 0
    for line in text.splitlines()[1:]:  # the first line is the marker line
        if line.startswith(FILES_READ):
            read, read_left = _listed(line[len(FILES_READ) :])
        elif line.startswith(FILES_CHANGED):
            changed, changed_left = _listed(line[len(FILES_CHANGED) :])
        elif line.startswith(FACTS):
            facts = [f.strip() for f in line[len(FACTS) :].split(";") if f.strip()]
        else:
            body.append(line)
    if text and not text.startswith(SUMMARY_MARKER) and body:  # the agent's own (Claude Code's): say whose
        body = [CARRIED_LABEL, *(line for line in body if not line.startswith(CONTINUE_AS_ASKED))]
    return Previous("\n".join(body).strip(), read, changed, facts, (changed_left, read_left))


# An earlier summary compact did not write is carried under this line, not as compact's own words,
# without the instruction that ended it (what follows the new summary is the conversation itself).
FIRST_LINE_CHARS = 400
CARRIED_LABEL = "The agent's own earlier summary:"
CONTINUE_AS_ASKED = "Please continue the conversation from where we left"


_LEFT_OUT = re.compile(r"\(and (\d+) earlier\)")


def _listed(text: str) -> tuple[list[str], int]:
    """The paths of a "Files read:" line, and how many older ones its "(and N earlier)" note left out."""
    found = _LEFT_OUT.match(text.strip())
    paths = [p.strip() for p in text.split(",") if p.strip() and not p.strip().startswith("(and ")]
    return paths, int(found.group(1)) if found else 0


def unite(earlier: Sequence[str], later: Sequence[str]) -> list[str]:
    """Both lists, each name at its latest place."""
    united = dict.fromkeys(earlier)
    _touch(united, later)
    return list(united)


def working_copy(workspace: Workspace, memo: SpanMemo[Touches], share: float) -> set[int]:
    """The exchanges that hold the agent's working copies of the files it changed last: for each
    file, newest change first, its newest whole write (the content) and the edits after it, while
    they all take at most WORKING_COPY_SHARE of the budget (at most WORKING_FILES files; a file only
    ever edited keeps its newest edits that fit; a file whose whole copy does not fit ends the list,
    so an older file never takes the room of the one changed after it; exchanges among the newest
    messages, which stay anyway, cost nothing). A write older than the file's newest whole write is
    stale and never kept."""
    limit = int((workspace.budget.limit or 0) * WORKING_COPY_SHARE)
    counted = workspace.structure.counted
    # Only before the current turn: the summary never needs to reach into it for a write, and
    # going around one there would take the turn's newest messages instead.
    current = workspace.structure.current_turn_start
    end = len(workspace.messages) if current is None else current
    # A file the current turn wrote whole again: its older writes are stale.
    replaced = {path for position in range(end, len(workspace.messages))
                if workspace.messages[position].role == "assistant" and workspace.alive(position)
                for is_read, path, is_whole in touches(original_data(workspace.messages[position]), memo)
                if is_whole and not is_read}
    copies: dict[str, list[set[int]]] = {}  # path -> its working copy's exchanges, newest file and exchange first
    whole: set[str] = set()  # files whose newest whole write is found: older writes are stale
    for position in range(end - 1, -1, -1):
        message = workspace.messages[position]
        if message.role != "assistant" or not workspace.alive(position):
            continue
        exchange = None
        for is_read, path, is_whole in touches(original_data(message), memo):
            if is_read or path in whole or path in replaced or path not in copies and len(copies) == WORKING_FILES:
                continue
            if exchange is None:
                exchange = workspace.removal_set([position]) or set()
            if any(workspace.messages[p].extra.get(FAILED) for p in exchange):
                break  # a write that failed changed nothing: the summary records the failure
            copies.setdefault(path, []).append(exchange)
            if is_whole:
                whole.add(path)
        if len(whole) == WORKING_FILES:
            break  # every file's working copy is found: the rest is stale
    # Each file's copy whole when it fits. A file only ever edited (no whole write to build on)
    # keeps its newest edits that fit; edits without the content they change are not worth it.
    kept: set[int] = set()
    used = 0
    # The newest messages stay whatever the span takes (the budget less the summary's and the copies'
    # rooms): a copy's exchanges among them cost its room nothing.
    newest = workspace.recent_start(1 - share - WORKING_COPY_SHARE)
    for path, exchanges in copies.items():
        taken: set[int] = set()
        cost = 0
        for exchange in exchanges:
            added = exchange - kept - taken
            tokens = sum(workspace.messages[p].tokens for p in added if counted[p] and p < newest)
            if used + cost + tokens > limit:
                if path in whole:
                    return kept  # the file worked on last does not fit: an older one must not take its room
                break
            taken |= added
            cost += tokens
        kept |= taken
        used += cost
    return kept


def last_touches(messages: Sequence[Mapping[str, Any]], memo: SpanMemo[Touches]) -> dict[str, int]:
    """Each path the span's calls read or change, and the index of the message that touched it last."""
    return {path: i for i, message in enumerate(messages) for _, path, _ in touches(message, memo)}


def newest_files(workspace: Workspace, changed: list[str], read: list[str], room: int,
                  touched_last: Mapping[str, int], left_out: tuple[int, int] = (0, 0)) -> tuple[list[str], list[str]]:
    """The files changed and read that fit in ``room`` tokens, the last touched first whichever list
    they are on (at most MAX_FILES each), each list in its order; a list that leaves some out
    says how many (all of them under --full, up to MAX_FILES), with the ``left_out`` (changed,
    read) names an earlier summary's lists no longer name."""
    older = len(changed) + len(read)  # the earlier summary's files: before the span, in their order
    rank = {path: (touched_last.get(path, i - older), is_changed)
            for is_changed, items in ((False, read), (True, changed)) for i, path in enumerate(items)}
    kept: set[str] = set()
    counts = {True: 0, False: 0}
    room -= 12  # two "(and N earlier)" notes
    for path in sorted(rank, key=rank.__getitem__, reverse=True):
        is_changed = rank[path][1]
        if counts[is_changed] == MAX_FILES:
            continue
        cost = 0 if workspace.full else workspace.counter.count_text(path) + 1
        if cost > room and not workspace.full:
            break
        kept.add(path)
        counts[is_changed] += 1
        room -= cost
    return _with_earlier([p for p in changed if p in kept], len(changed) + left_out[0]), _with_earlier(
        [p for p in read if p in kept], len(read) + left_out[1])


def _with_earlier(kept: list[str], total: int) -> list[str]:
    return [f"(and {total - len(kept)} earlier)", *kept] if kept and len(kept) < total else kept


def names_that_fit(workspace: Workspace, items: list[str], room: int) -> list[str]:
    """The newest of ``items`` that fit in ``room`` tokens (all of them under --full)."""
    if workspace.full:
        return items
    kept: list[str] = []
    for item in reversed(items):
        cost = workspace.counter.count_text(item) + 1
        if cost > room:
            break
        kept.insert(0, item)
        room -= cost
    return kept


def old_outputs(workspace: Workspace, removable: list[int], keep: set[int] | frozenset[int]) -> list[int]:
    """Under a small budget, the exchanges between the span and the current turn whose bulk is a tool
    result an earlier step cut: an old output the summary's findings outrank (_output_outranked)."""
    current = workspace.structure.current_turn_start
    taken: set[int] = set()
    for position in range(removable[-1] + 1, len(workspace.messages) if current is None else current):
        if position in taken or not workspace.alive(position) or workspace.pinned(position):
            continue
        exchange = workspace.removal_set([position]) or set()
        largest = max(exchange, key=lambda p: workspace.messages[p].tokens) if exchange else position
        # (A read tool's file stays: the working copies and the file lists are built on those.)
        reads = any(found[0] == "read" and not found[2] for p in exchange
                    for call in tool_calls(workspace.messages[p].data) if (found := classify(call)))
        if exchange and not reads and not exchange & keep and max(exchange) < (current or len(workspace.messages)) \
                and output_outranked(workspace, exchange) and workspace.rewritten_in_place(largest) \
                and workspace.messages[largest].tokens >= OLD_OUTPUT_TOKENS:
            taken |= exchange
    return sorted(taken)


def output_outranked(workspace: Workspace, exchange: set[int]) -> bool:
    """Under a small budget the findings a summary left out outrank an old tool output kept with its
    middle cut (cctrace at 2,000 tokens kept a cut `head -80` output and lost its key finding): the
    slack goes to the summary (_top_up) when the cut would fall on a tool result."""
    if (workspace.budget.limit or 0) >= SMALL_BUDGET:
        return False
    largest = max(exchange, key=lambda p: workspace.messages[p].tokens)
    return workspace.messages[largest].role in ("tool", "function")
