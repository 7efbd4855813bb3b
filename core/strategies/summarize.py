"""Summarize{turns}: replaces the oldest turns (never the current one) with one summary message.

The summary carries the files read and changed (tracked tool arguments,
compaction-policy.txt) across compactions: a later run folds the previous
summary in — it is handed to the summarizer as the previous summary and its
file lists are united — rather than summarizing a summary blindly. Identifiers
the summarizer lost are appended verbatim. With a store, summaries are cached
by a hash of the span and the prompt, so a rerun asks the model nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from core.budget import FRACTION, TOKENS
from core.errors import StrategyError
from core.messages import (
    SUMMARY_MARKER,
    Message,
    call_arguments,
    call_name,
    starts_with_marker,
    tool_calls,
    is_summary,
    written_by_compact,
)
from core.strategies.base import Param, StrategyInfo
from core.summarizers.base import SummaryRequest
from core.summarizers.facts import MAX_FACTS, PATH_KEYS, extract_facts, missing_facts
from core.workspace import Workspace

MARKER = SUMMARY_MARKER
FILES_READ = "Files read:"
FILES_CHANGED = "Files changed:"
FACTS = "Kept verbatim:"
_HEADER_TURNS = re.compile(re.escape(SUMMARY_MARKER) + r" turns (\d+)-(\d+)")
MAX_FILES = 30
MAX_KEPT_FACTS = 20
READ_TOOLS = ("read_file", "Read", "view", "cat", "open_file", "NotebookRead")
CHANGE_TOOLS = ("write_file", "edit_file", "Edit", "Write", "MultiEdit", "apply_patch", "NotebookEdit", "create_file")


def tracked_files(messages: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    read: dict[str, None] = {}
    changed: dict[str, None] = {}
    for message in messages:
        for call in tool_calls(message):
            name = call_name(call)
            target = read if name in READ_TOOLS else changed if name in CHANGE_TOOLS else None
            if target is None:
                continue
            arguments = call_arguments(call)
            for key in PATH_KEYS:
                if isinstance(arguments.get(key), str):
                    target[arguments[key]] = None
    return list(read), list(changed)


def parse_previous(text: str) -> tuple[str, list[str], list[str], list[str]]:
    """A previous summary's body, its file lists and the identifiers it kept verbatim."""
    body, read, changed, facts = [], [], [], []
    for line in text.splitlines()[1:]:  # the first line is the marker line
        if line.startswith(FILES_READ):
            read = [p.strip() for p in line[len(FILES_READ) :].split(",") if p.strip()]
        elif line.startswith(FILES_CHANGED):
            changed = [p.strip() for p in line[len(FILES_CHANGED) :].split(",") if p.strip()]
        elif line.startswith(FACTS):
            facts = [f.strip() for f in line[len(FACTS) :].split(";") if f.strip()]
        else:
            body.append(line)
    return "\n".join(body).strip(), read, changed, facts


def _newest(items: list[str], limit: int) -> list[str]:
    """At most ``limit`` items, the newest; the list says how many older ones it left out."""
    if len(items) <= limit:
        return items
    return [f"(and {len(items) - limit} earlier)", *items[-limit:]]


def _unite(first: Sequence[str], second: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


def _cache_key(summarizer: Any, request: SummaryRequest) -> str:
    payload = orjson.dumps(
        [summarizer.identity(), request.previous, list(request.messages), list(request.facts), request.max_tokens],
        option=orjson.OPT_SORT_KEYS,
    )
    return "summary:" + hashlib.sha256(payload).hexdigest()


def _previous_summary(workspace: Workspace, before: int) -> int | None:
    """The nearest earlier summary before ``before`` (inside the span too: a pinned message may precede it)."""
    for position in range(before - 1, -1, -1):
        message = workspace.messages[position]
        if workspace.alive(position) and is_summary(message):
            return position
    return None


def apply(workspace: Workspace, *, turns: int, max_tokens: int) -> str:
    summarizer = workspace.seams.summarizer
    starts = workspace.structure.user_positions
    count = min(turns, len(starts) - 1)  # never the current turn
    if count <= 0:
        return "nothing to summarize: only the current turn is left"
    span_start, span_end = starts[0], starts[count]
    # What compact wrote itself (an earlier summary, offload placeholders) is never summarized again.
    positions = [
        p
        for p in range(span_start, span_end)
        if workspace.alive(p) and not workspace.pinned(p) and not written_by_compact(workspace.messages[p])
    ]
    # Each message goes with its exchange; an exchange holding a pinned message stays whole.
    removable = sorted(set().union(*(workspace.removal_set([p]) or set() for p in positions)))
    if not removable:
        return "nothing to summarize: the oldest turns are pinned"
    span = [workspace.messages[p].data for p in removable]
    previous_at = _previous_summary(workspace, span_end)
    previous_text = workspace.messages[previous_at].data["content"] if previous_at is not None else ""
    previous_body, read_before, changed_before, facts_before = (
        parse_previous(previous_text) if previous_text else ("", [], [], [])
    )
    facts = list(dict.fromkeys([*facts_before, *extract_facts(span)]))[-MAX_FACTS:]
    # Turns are numbered from the start of the conversation: an earlier summary already covers some.
    covered = _HEADER_TURNS.match(previous_text)
    first_covered = int(covered.group(1)) if covered else None
    turns_before = int(covered.group(2)) if covered else 0
    request = SummaryRequest(
        messages=tuple(span),
        first_turn=turns_before + workspace.structure.turn_of[span_start] + 1,
        last_turn=turns_before + workspace.structure.turn_of[span_start] + count,
        previous=previous_body or None,
        facts=tuple(facts),
        max_tokens=max_tokens,
    )
    store = workspace.seams.store
    key = _cache_key(summarizer, request)
    cached = store.get_summary(key) if store is not None else None
    if cached is not None:
        text, by, notes = cached["text"], cached["meta"].get("by", summarizer.name), ["from the summary cache"]
    else:
        result = summarizer.summarize(request, workspace.counter)
        text, by, notes = result.text, result.by, result.notes
        if store is not None:
            store.put_summary(key, text, {"by": by, "attempts": result.attempts})
    read, changed = tracked_files(span)
    read = _newest(_unite(read_before, read), MAX_FILES)
    changed = _newest(_unite(changed_before, changed), MAX_FILES)
    lost = _newest(missing_facts(text, request.facts), MAX_KEPT_FACTS)
    lines = [
        f"{MARKER} turns {first_covered or request.first_turn}-{request.last_turn} "
        f"(lines {_line_range(workspace, removable)}, {len(removable)} messages) summarized by {by}.",
        text,
    ]
    if read:
        lines.append(f"{FILES_READ} {', '.join(read)}")
    if changed:
        lines.append(f"{FILES_CHANGED} {', '.join(changed)}")
    if lost:
        lines.append(f"{FACTS} {'; '.join(lost)}")
    summary = {"role": "system", "content": "\n".join(lines)}
    summary_tokens = workspace.counter.count_message(Message(data=summary)).tokens
    span_tokens = sum(workspace.messages[p].tokens for p in removable)
    if previous_at is not None:
        span_tokens += workspace.messages[previous_at].tokens
    # Under a message budget a summary pays off by its count alone; under a token budget it must be smaller.
    if not workspace.full and workspace.budget.trigger in (TOKENS, FRACTION) and summary_tokens >= span_tokens:
        raise StrategyError(
            f"the summary ({summary_tokens:,} tokens) would not be smaller than what it replaces "
            f"({span_tokens:,} tokens); the turns stay as they are"
        )
    for position in removable:
        workspace.remove([position], f"summarized into turns {request.first_turn}-{request.last_turn}")
    if previous_at is not None and not workspace.pinned(previous_at):
        workspace.rewrite(previous_at, summary, "earlier summary folded into the new one")
    else:
        workspace.insert(span_start, Message(data=summary))  # before the span's first turn, not inside it
    detail = f"summarized turns {request.first_turn}-{request.last_turn} ({len(removable)} messages) with {by}"
    if lost:
        detail += f"; appended {len(lost)} identifier(s) the summary had lost: {'; '.join(lost)}"
    if notes:
        detail += "; " + "; ".join(notes)
    return detail


def _line_range(workspace: Workspace, positions: Sequence[int]) -> str:
    lines = [workspace.messages[p].line for p in positions if workspace.messages[p].line is not None]
    if not lines:
        return "?"
    return f"{min(lines)}-{max(lines)}"  # type: ignore[type-var]


STRATEGY = StrategyInfo(
    name="summarize",
    alias="Summarize",
    summary="replace the oldest turns with one summary (needs --summarizer)",
    params=(
        Param("turns", int, 10, "how many of the oldest turns to summarize"),
        Param("max_tokens", int, 1024, "the most tokens the summary may take"),
    ),
    apply=apply,
    needs="summarizer",
)
