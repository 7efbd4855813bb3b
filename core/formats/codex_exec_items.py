"""The items of a ``codex exec --json`` stream, one by one: as canonical calls and results, and back.

* ``agent_message`` and ``plan`` {text}: the model's text; ``reasoning`` {text}: its thinking.
* ``command_execution`` {command, aggregated_output, exit_code, status}: a ``shell`` call
  ``{"command": command}`` (the command line as Codex printed it, ``/bin/bash -lc '...'``), answered
  by its output, after ``Exit code: N`` when the command failed.
* ``file_change`` {changes: [{path, kind}], status}: a ``file_change`` call ``{"changes": [...]}``
  (the summary's "Files changed" list reads the paths), answered by its status.
* ``mcp_tool_call`` {server, tool, arguments, result {content, structured_content} | error {message},
  status}: a ``mcp__<server>__<tool>`` call, answered by the result's text or the error's message.
* ``web_search`` {query}: a ``web_search`` call answered by ``""`` (the stream holds no results).
* ``todo_list`` {items: [{text, completed}]}: an ``update_plan`` call ``{"items": [...]}`` answered
  by ``Plan updated``, so that the supersede_plans strategy points older lists at the newest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from core.engine.file_calls import SHELL_TOOLS, shell_command
from core.formats.anthropic import COMPACT_PREFIXES
from core.formats.base import EMPTY_LEFT_OUT, PARENT_RESULTS, Losses, says_nothing
from core.formats.gemini_stream import plain_text
from core.messages import (
    FAILED,
    PLACEHOLDER_PREFIX,
    Message,
    arguments_value,
    call_arguments,
    call_name,
    result_ids,
    tool_calls,
)

TEXT_ITEMS = frozenset({"agent_message", "plan"})
CALL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search", "todo_list"})
ANSWERED_AT_ONCE = frozenset({"todo_list"})  # completes when the turn ends, but the model had its answer at once
PLAN_ANSWER = "Plan updated"
STATUS_ONLY = "tool results of file changes, web searches and to-do lists (a codex exec stream keeps their status only)"


def item_problem(item: Any) -> str | None:
    """What is wrong with an item's shape for its reader, or None."""
    if not isinstance(item, dict):
        return "event needs an item object"
    if not isinstance(item.get("id"), str) or not isinstance(item.get("type"), str):
        return "item needs an id and a type (strings)"
    kind = item["type"]
    wanted = {"agent_message": "text", "plan": "text", "reasoning": "text", "command_execution": "command",
              "web_search": "query", "mcp_tool_call": "tool"}.get(kind)
    if wanted and not isinstance(item.get(wanted), str):
        return f"{kind} item needs its {wanted} (a string)"
    if kind == "command_execution" and not isinstance(item.get("aggregated_output", ""), str | None):
        return "command_execution item's aggregated_output is not a string"
    listed = {"file_change": ("changes", "path"), "todo_list": ("items", "text")}.get(kind)
    if listed and not (isinstance(item.get(listed[0]), list) and all(
            isinstance(entry, dict) and isinstance(entry.get(listed[1]), str) for entry in item[listed[0]])):
        return f"{kind} item needs its {listed[0]} (objects with a {listed[1]} string)"
    return None


# --- reading -------------------------------------------------------------------------------------

def call_of(item: dict[str, Any]) -> dict[str, Any]:
    """The canonical call an item of CALL_ITEMS stands for (its id is the item's)."""
    kind = item["type"]
    arguments: Any
    if kind == "command_execution":
        name, arguments = "shell", {"command": item["command"]}
    elif kind == "file_change":
        name, arguments = "file_change", {"changes": item["changes"]}
    elif kind == "mcp_tool_call":
        name, arguments = f"mcp__{item.get('server', '')}__{item['tool']}", item.get("arguments")
    elif kind == "web_search":
        name, arguments = "web_search", {"query": item["query"]}
    else:
        name, arguments = "update_plan", {"items": item["items"]}
    return {"id": item["id"], "type": "function",
            "function": {"name": name, "arguments": orjson.dumps({} if arguments is None else arguments).decode()}}


def result_of(item: dict[str, Any]) -> tuple[str, bool]:
    """(the result's text, whether the call failed) of a call item."""
    kind = item["type"]
    status = item.get("status")
    if kind == "command_execution":
        code = item.get("exit_code")
        output = item.get("aggregated_output") or ""
        # (compact's placeholder for a cleared result stands alone, as it was written: read back, the file
        # counts what the run reported)
        text = output if code in (0, None) or output.startswith(PLACEHOLDER_PREFIX) else f"Exit code: {code}\n{output}"
        return text, status in ("failed", "declined") or code not in (0, None)
    if kind == "mcp_tool_call":
        error = item.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"], True
        return _mcp_text(item.get("result")), status == "failed"
    if kind == "file_change":
        return str(status or ""), status == "failed"
    if kind == "todo_list":
        return PLAN_ANSWER, False
    return "", False


def _mcp_text(result: Any) -> str:
    """An MCP result as the model reads it: its text blocks, else its structured content as JSON."""
    if not isinstance(result, dict):
        return ""
    content = result.get("content")
    texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)] \
        if isinstance(content, list) else []
    if texts:
        return "\n".join(texts)
    shown = result.get("structured_content") or content
    return orjson.dumps(shown).decode() if shown else ""


# --- writing back --------------------------------------------------------------------------------

def with_call(item: dict[str, Any], call: Any) -> dict[str, Any]:
    """The item with the arguments of its rewritten call (a field the call no longer fits stays)."""
    arguments = call_arguments(call)
    kind = item["type"]
    if kind == "command_execution" and isinstance(arguments.get("command"), str):
        return {**item, "command": arguments["command"]}
    if kind == "file_change" and isinstance(arguments.get("changes"), list):
        return {**item, "changes": arguments["changes"]}
    if kind == "web_search" and isinstance(arguments.get("query"), str):
        return {**item, "query": arguments["query"]}
    if kind == "mcp_tool_call":
        return {**item, "arguments": arguments_value(call)}
    if kind == "todo_list":
        steps = arguments.get("items")
        if isinstance(steps, str):  # a pointer to the newer list
            steps = [{"text": steps, "completed": False}]
        return {**item, "items": steps} if isinstance(steps, list) else item
    return item


def with_result(item: dict[str, Any], text: str) -> dict[str, Any]:
    """The item with ``text`` as its result (a file change, a search or a plan has no place for one)."""
    kind = item["type"]
    if kind == "command_execution":
        prefix = f"Exit code: {item.get('exit_code')}\n"
        return {**item, "aggregated_output": text.removeprefix(prefix)}
    if kind == "mcp_tool_call":
        error = item.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return {**item, "error": {**error, "message": text}}
        result = item.get("result")
        new = {**(result if isinstance(result, dict) else {}), "content": [{"type": "text", "text": text}]}
        if new.get("structured_content") is not None:
            new["structured_content"] = None
        return {**item, "result": new}
    return item


# --- --to codex-exec -----------------------------------------------------------------------------

def render_message(message: Message, pending: dict[str, dict[str, Any]], ids: Iterator[str],
                   losses: Losses) -> Iterator[dict[str, Any]]:
    """A canonical message as stream lines; ``pending`` holds the calls started and not yet answered."""
    data = message.data
    role = data.get("role")
    if role == "assistant":
        yield from _reply(data, pending, ids, losses)
    elif role == "tool":
        yield from _answers(message, pending, losses)
    elif role in ("system", "developer", "user") and plain_text(data.get("content")).startswith(COMPACT_PREFIXES):
        yield _said(next(ids), "agent_message", plain_text(data.get("content")))
    else:
        losses.add("user and system messages (a codex exec stream prints none)")


def _said(item_id: str, kind: str, text: str) -> dict[str, Any]:
    return {"type": "item.completed", "item": {"id": item_id, "type": kind, "text": text}}


def _reply(data: dict[str, Any], pending: dict[str, dict[str, Any]], ids: Iterator[str],
           losses: Losses) -> Iterator[dict[str, Any]]:
    content = data.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content if isinstance(content, list) else []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
            yield _said(next(ids), "agent_message", part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), str):
            yield _said(next(ids), "reasoning", part["thinking"])
        elif kind != "text":
            losses.add(f"{kind or 'non-text'} parts (a codex exec stream holds text, reasoning and calls)")
    for call in tool_calls(data):
        item = _item_for(call, losses)
        pending[item["id"]] = item
        yield {"type": "item.started", "item": item}
    if not parts and not tool_calls(data) and says_nothing(data):
        losses.add(EMPTY_LEFT_OUT)


def _item_for(call: Any, losses: Losses) -> dict[str, Any]:
    """The item a canonical call is, as codex exec prints it when it starts."""
    name, arguments, item_id = call_name(call), call_arguments(call), str(call.get("id"))
    if name in SHELL_TOOLS and shell_command(arguments):
        return {"id": item_id, "type": "command_execution", "command": shell_command(arguments),
                "aggregated_output": "", "exit_code": None, "status": "in_progress"}
    if name == "file_change" and isinstance(arguments.get("changes"), list):
        return {"id": item_id, "type": "file_change", "changes": arguments["changes"], "status": "in_progress"}
    if name == "web_search" and isinstance(arguments.get("query"), str):
        return {"id": item_id, "type": "web_search", "query": arguments["query"]}
    if name == "update_plan" and isinstance(arguments.get("items"), list):
        return {"id": item_id, "type": "todo_list", "items": arguments["items"]}
    if name == "update_plan" and isinstance(arguments.get("plan"), list):  # Codex's own update_plan arguments
        steps = [s for s in arguments["plan"] if isinstance(s, dict)]
        return {"id": item_id, "type": "todo_list", "items": [
            {"text": str(s.get("step", "")), "completed": s.get("status") == "completed"} for s in steps]}
    server, _, tool = name.removeprefix("mcp__").partition("__") if name.startswith("mcp__") else ("", "", name)
    if not name.startswith("mcp__"):
        losses.add("tool calls of other tools (written as MCP tool calls of no server)")
    return {"id": item_id, "type": "mcp_tool_call", "server": server, "tool": tool or server,
            "arguments": arguments_value(call), "result": None, "error": None, "status": "in_progress"}


def _answers(message: Message, pending: dict[str, dict[str, Any]], losses: Losses) -> Iterator[dict[str, Any]]:
    text = plain_text(message.data.get("content"))
    failed = bool(message.extra.get(FAILED))
    ids = result_ids(message.data)
    if not ids:
        losses.add(PARENT_RESULTS)
    for call_id in ids:
        item = pending.pop(call_id, None)
        if item is None:
            losses.add(PARENT_RESULTS)
            continue
        done = {**item, "status": "failed" if failed else "completed"} if "status" in item else dict(item)
        if item["type"] == "command_execution":
            done["exit_code"] = 1 if failed else 0
        elif item["type"] == "mcp_tool_call" and failed:
            done["error"] = {"message": text}
        done = with_result(done, text)
        if text and text != result_of(done)[0]:
            losses.add(STATUS_ONLY)
        yield {"type": "item.completed", "item": done}
