"""DeduplicateFileReads{tool_name}: older reads of a file point at the newer read or edit instead.

Agents read the same file again and again. Every read but the newest of each
file (the same range of it) becomes a short note pointing at the newer one; a
later write or edit of the file makes older reads stale too. Any other call
made again with the same arguments and answered with the same text (an agent
looking a record up twice) likewise points its older result at the newer
one; a different answer is history and stays. Oldest first, and only as many
as the budget needs.

The read tools of the agents whose logs compact reads are known (Claude Code
``Read``, OpenAI-style ``read_file``, pi ``read``, SWE-agent/OpenHands
``str_replace_editor`` with ``view``, Gemini CLI ``read_file``, Codex ``shell``
running ``cat``/``nl``/``sed -n``/``head``/``tail`` on one file);
``tool_name`` limits it to one tool (the seed's ``read_file``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core.engine import fit, placeholders
from core.engine.file_calls import classify
from core.engine.workspace import Workspace
from core.io import jsonio
from core.messages import call_line, call_name, tool_calls
from core.strategies.base import Param, StrategyInfo

# (position, kind, path, range, tool): a read's result or a write's call.
FileEvent = tuple[int, str, str, str, str]


def apply(workspace: Workspace, *, tool_name: str, path_arg: str) -> str:
    structure = workspace.structure
    messages = workspace.messages
    events: list[FileEvent] = []  # in transcript order once sorted
    repeats: dict[tuple[str, str], list[tuple[int, Mapping[str, Any]]]] = {}  # (tool, arguments) -> [(position, call)]
    change_lines: dict[tuple[int, str], int | None] = {}  # (position, path) -> the line of the call that changed it
    for position, message in enumerate(messages):
        if message.role != "assistant" or not workspace.alive(position):
            continue
        for call in tool_calls(message.data):
            found = classify(call, path_arg, tool_name)
            if found is None:
                if not tool_name:  # (the seed's read_file-only rule stays as it was)
                    repeats.setdefault((call_name(call), _arguments_key(call)), []).append((position, call))
                continue
            kind, path, part = found
            if kind == "write":
                events.append((position, kind, path, part, call_name(call)))
                change_lines[position, path] = call_line(message, str(call.get("id")))
                continue
            for result in structure.results_of_call.get((position, str(call.get("id"))), []):
                events.append((result, kind, path, part, call_name(call)))
    events.sort()
    stale_by = _stale_by(events)
    stale = (fit.Proposal(position, _pointing_at_newer(workspace, position, path, tool, stale_by, change_lines))
             for position, kind, path, _part, tool in events if kind == "read" and position in stale_by)
    replaced = fit.take(workspace, stale)
    repeated = _point_at_newer_answers(workspace, repeats)
    which = tool_name or "file-read"
    also = f", and {repeated} result(s) of a call repeated with the same answer" if repeated else ""
    return f"replaced {replaced} older {which} result(s) with a pointer to the newer read or change{also}"


def _stale_by(events: list[FileEvent]) -> dict[int, tuple[str, int]]:
    """For each read, the next event that makes it stale: a read of the same part, or any change."""
    stale_by: dict[int, tuple[str, int]] = {}
    latest_read: dict[str, dict[str, int]] = {}  # path -> part read -> the newest read of it
    open_reads: dict[str, list[int]] = {}
    for position, kind, path, part, _tool in events:
        if kind == "read":
            parts = latest_read.setdefault(path, {})
            earlier = parts.get(part)
            if earlier is not None:
                stale_by.setdefault(earlier, ("read", position))
            parts[part] = position
            open_reads.setdefault(path, []).append(position)
        else:
            for earlier in open_reads.pop(path, []):
                stale_by.setdefault(earlier, ("write", position))
            latest_read.pop(path, None)
    return stale_by


def _arguments_key(call: Mapping[str, Any]) -> str:
    """A call's arguments as written: two calls with the same text asked the same thing."""
    function = call.get("function")
    arguments = function.get("arguments") if isinstance(function, Mapping) else None
    if isinstance(arguments, str):
        return arguments
    return jsonio.dumps(arguments, sort_keys=True).decode()


def _point_at_newer_answers(workspace: Workspace,
                            repeats: dict[tuple[str, str], list[tuple[int, Mapping[str, Any]]]]) -> int:
    """Older results of a repeated call that a newer result repeats word for word become a pointer to it."""
    messages = workspace.messages
    results_of_call = workspace.structure.results_of_call
    stale: list[tuple[int, str, Mapping[str, Any], int]] = []  # (result, tool, its call, the newer result)
    for (tool, _arguments), calls in repeats.items():
        if len(calls) < 2:
            continue  # (most calls: nothing to compare, nothing more to look up)
        newest_with: dict[str, int] = {}  # result text -> the newest result holding it
        for owner, call in reversed(calls):
            answers = results_of_call.get((owner, str(call.get("id"))), [])
            if len(answers) != 1:
                continue
            position = answers[0]
            content = messages[position].data.get("content")
            # The whole content, not its text: two screenshots without text are not the same answer.
            text = content if isinstance(content, str) else jsonio.dumps(content).decode()
            newer = newest_with.get(text)
            if newer is None:
                newest_with[text] = position
            else:
                stale.append((position, tool, call, newer))
    repeated = (fit.Proposal(position, _pointing(workspace, position, placeholders.same_result(
                    tool, placeholders.call_target(call), messages[newer].line), f"the same result as a newer {tool} call"))
                for position, tool, call, newer in sorted(stale, key=lambda found: found[0]))
    return fit.take(workspace, repeated)


def _pointing_at_newer(workspace: Workspace, position: int, path: str, tool: str, stale_by: dict[int, tuple[str, int]],
                       change_lines: dict[tuple[int, str], int | None]) -> Callable[[], fit.Rewrite | None]:
    """The stale read at ``position`` as a pointer to the newer read of it or the change that made it stale."""
    def make() -> fit.Rewrite | None:
        messages = workspace.messages
        by, at = stale_by[position]
        while by == "read" and at in stale_by:  # point past reads that are stale themselves
            by, at = stale_by[at]
        if by == "read":
            note = placeholders.superseded(tool, path, messages[at].line)
        else:
            note = placeholders.changed_later(tool, path, change_lines.get((at, path), messages[at].line))
        return _pointing(workspace, position, note, f"superseded by a newer read or change of {path}")()
    return make


def _pointing(workspace: Workspace, position: int, note: str, reason: str) -> Callable[[], fit.Rewrite | None]:
    """The result at ``position`` as ``note`` (None for a placeholder, or when the pointer would cost as much)."""
    def make() -> fit.Rewrite | None:
        message = workspace.messages[position]
        if placeholders.is_placeholder(message):
            return None
        data = placeholders.with_content(message, note)
        if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            return None  # the pointer would cost as much as the result
        return fit.Rewrite(data, reason)
    return make


STRATEGY = StrategyInfo(
    name="deduplicate_file_reads",
    alias="DeduplicateFileReads",
    summary="older results of reading a file point at the newer read or change of it",
    params=(
        Param("tool_name", str, "", "only this tool's reads (default: every known read tool)"),
        Param("path_arg", str, "path", "the argument naming the file (path, file_path, … are tried too)"),
    ),
    apply=apply,
)
