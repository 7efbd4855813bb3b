"""DeduplicateFileReads{tool_name}: older reads of a file point at the newest read instead."""

from __future__ import annotations

from core.messages import call_arguments, call_name, tool_calls
from core.strategies import placeholders
from core.strategies.base import Param, StrategyInfo
from core.workspace import Workspace

# Argument names agents use for the file a read targets, tried after `path_arg`.
PATH_ARGUMENTS = ("path", "file_path", "filename", "file")


def _read_path(arguments: dict[str, object], path_arg: str) -> str | None:
    for key in (path_arg, *PATH_ARGUMENTS):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def apply(workspace: Workspace, *, tool_name: str, path_arg: str) -> str:
    structure = workspace.structure
    messages = workspace.messages
    reads: list[tuple[int, str]] = []  # (result position, path), in transcript order
    for position, message in enumerate(messages):
        for call in tool_calls(message.data):
            if message.role != "assistant" or call_name(call) != tool_name:
                continue
            path = _read_path(call_arguments(call), path_arg)
            if path is None:
                continue
            for result in structure.results_of_call.get((position, str(call.get("id"))), []):
                reads.append((result, path))
    reads.sort()
    newest: dict[str, int] = {}
    for result, path in reads:
        newest[path] = result
    superseded = 0
    for result, path in reads:
        if not workspace.should_continue():
            break
        latest = newest[path]
        message = messages[result]
        if result == latest or workspace.pinned(result) or placeholders.is_placeholder(message):
            continue
        data = placeholders.with_content(message, placeholders.superseded(tool_name, path, messages[latest].line))
        if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            continue  # the pointer would cost as much as the read
        workspace.rewrite(result, data, f"superseded by a newer read of {path}")
        superseded += 1
    return f"replaced {superseded} older {tool_name} result(s) with a pointer to the newest read"


STRATEGY = StrategyInfo(
    name="deduplicate_file_reads",
    alias="DeduplicateFileReads",
    summary="older results of reading the same file point at the newest read",
    params=(
        Param("tool_name", str, "read_file", "the tool whose calls read files"),
        Param("path_arg", str, "path", "the argument naming the file (path, file_path, … are tried too)"),
    ),
    apply=apply,
)
