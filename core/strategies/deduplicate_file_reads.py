"""DeduplicateFileReads{tool_name}: older reads of a file point at the newer read or edit instead.

Agents read the same file again and again. Every read but the newest of each
file (the same range of it) becomes a short note pointing at the newer one; a
later write or edit of the file makes older reads stale too. Oldest first, and
only as many as the budget needs.

The read tools of the agents whose logs compact reads are known (Claude Code
``Read``, OpenAI-style ``read_file``, pi ``read``, SWE-agent/OpenHands
``str_replace_editor`` with ``view``, Gemini CLI ``read_file``, Codex ``shell``
running ``cat``/``nl``/``sed -n``/``head``/``tail`` on one file);
``tool_name`` limits it to one tool (the seed's ``read_file``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from core.engine import placeholders
from core.engine.workspace import Workspace
from core.messages import call_arguments, call_name, tool_calls
from core.strategies.base import Param, StrategyInfo

# Argument names agents use for the file a read targets, tried after `path_arg`.
PATH_ARGUMENTS = ("path", "file_path", "absolute_path", "filename", "file", "notebook_path")
READ_TOOLS = frozenset({"Read", "read_file", "read", "view", "open_file", "NotebookRead", "ReadFile", "read_many_files"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "edit_file_tool"})
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "edit_file", "create_file",
                         "edit", "write", "replace", "apply_patch"})
SHELL_TOOLS = frozenset({"shell", "bash", "Bash", "exec_command", "local_shell", "run_shell_command"})
# Arguments that say which part of a file was read: reads of different parts do not supersede each other.
RANGE_ARGUMENTS = ("offset", "limit", "view_range", "start_line", "end_line", "line_range")
_SHELL_READERS = ("cat", "nl", "head", "tail", "sed", "bat", "less")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)


def _path(arguments: Mapping[str, Any], path_arg: str) -> str | None:
    for key in (path_arg, *PATH_ARGUMENTS):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _shell_words(arguments: Mapping[str, Any]) -> list[str]:
    command = arguments.get("command", arguments.get("cmd"))
    if isinstance(command, list):
        words = [str(w) for w in command]
        if len(words) >= 3 and words[0] in ("bash", "sh", "zsh") and words[1] in ("-lc", "-c"):
            command = words[2]
        else:
            return words
    if not isinstance(command, str):
        return []
    if any(sep in command for sep in ("|", ";", "&&", ">", "$(", "`")):
        return []  # a pipeline or several commands: not a plain read of one file
    try:
        return shlex.split(command)
    except ValueError:
        return []


def shell_read(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """(path, range) when a shell command only prints one file (``cat f``, ``sed -n 1,80p f``, ...)."""
    words = _shell_words(arguments)
    if not words or words[0] not in _SHELL_READERS:
        return None
    files = [w for w in words[1:] if not w.startswith("-") and not re.fullmatch(r"[\d,]+p?|'.*'", w)]
    if words[0] == "sed" and (len(words) < 4 or words[1] != "-n"):
        return None
    if len(files) != 1:
        return None
    return files[0], " ".join(w for w in words if w != files[0])


def classify(call: Mapping[str, Any], path_arg: str, only: str) -> tuple[str, str, str] | None:
    """("read" | "write", path, range) for a call that reads or changes one file, else None."""
    name = call_name(call)
    arguments = call_arguments(call)
    if only:
        if name != only:
            return None
        path = _path(arguments, path_arg)
        return ("read", path, _range(arguments)) if path else None
    if name in READ_TOOLS:
        path = _path(arguments, path_arg)
        return ("read", path, _range(arguments)) if path else None
    if name in EDITOR_TOOLS:
        path = _path(arguments, path_arg)
        if not path:
            return None
        return ("read", path, _range(arguments)) if arguments.get("command") == "view" else ("write", path, "")
    if name in WRITE_TOOLS:
        path = _path(arguments, path_arg)
        if path is None and isinstance(arguments.get("input"), str):
            found = _PATCH_FILE.findall(arguments["input"])
            path = found[0].strip() if len(found) == 1 else None
        return ("write", path, "") if path else None
    if name in SHELL_TOOLS:
        read = shell_read(arguments)
        return ("read", read[0], read[1]) if read else None
    return None


def _range(arguments: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={arguments[k]}" for k in RANGE_ARGUMENTS if arguments.get(k) is not None)


def apply(workspace: Workspace, *, tool_name: str, path_arg: str) -> str:
    structure = workspace.structure
    messages = workspace.messages
    events: list[tuple[int, str, str, str, str]] = []  # (position, kind, path, range, tool), transcript order
    for position, message in enumerate(messages):
        if message.role != "assistant" or not workspace.alive(position):
            continue
        for call in tool_calls(message.data):
            found = classify(call, path_arg, tool_name)
            if found is None:
                continue
            kind, path, part = found
            if kind == "write":
                events.append((position, kind, path, part, call_name(call)))
                continue
            for result in structure.results_of_call.get((position, str(call.get("id"))), []):
                events.append((result, kind, path, part, call_name(call)))
    events.sort()
    # For each read, the next event that makes it stale: a read of the same part, or any change.
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
    replaced = 0
    for position, kind, path, _part, tool in events:
        if kind != "read" or position not in stale_by:
            continue
        if not workspace.should_continue():
            break
        message = messages[position]
        if workspace.pinned(position) or workspace.must_go(position) or placeholders.is_placeholder(message) or not workspace.alive(position):
            continue
        by, at = stale_by[position]
        while by == "read" and at in stale_by:  # point past reads that are stale themselves
            by, at = stale_by[at]
        if by == "read":
            note = placeholders.superseded(tool, path, messages[at].line)
        else:
            note = placeholders.changed_later(tool, path, messages[at].line)
        data = placeholders.with_content(message, note)
        if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            continue  # the pointer would cost as much as the read
        workspace.rewrite(position, data, f"superseded by a newer read or change of {path}")
        replaced += 1
    which = tool_name or "file-read"
    return f"replaced {replaced} older {which} result(s) with a pointer to the newer read or change"


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
