"""SupersedePlans{tools}: older calls that rewrite the agent's whole plan point at the newest one.

Agents keep a todo list by writing all of it again at every step: Claude Code
``TodoWrite``, Codex ``update_plan``, Gemini CLI ``write_todos``, opencode
``todowrite``, Cursor and Amp ``todo_write``. Only the newest list is the
state; each older call's arguments become one pointer to the newer call
(the call, its id and its result stay, so pairing holds). Oldest first, and
only as many as the budget needs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson

from core.engine import fit
from core.engine.placeholders import PREFIX
from core.engine.workspace import Workspace
from core.messages import call_arguments, call_line, call_name, tool_calls
from core.strategies.base import Param, StrategyInfo

PLAN_TOOLS = "TodoWrite,update_plan,write_todos,todowrite,todo_write"


def _pointer(call: dict[str, Any], note: str) -> dict[str, Any]:
    """The call with its arguments replaced by ``note`` under the first argument's name."""
    function = call.get("function")
    if not isinstance(function, dict):
        return call
    key = next(iter(call_arguments(call)), "plan")
    arguments = function.get("arguments")
    value: Any = orjson.dumps({key: note}).decode() if isinstance(arguments, str) else {key: note}
    return {**call, "function": {**function, "arguments": value}}


def apply(workspace: Workspace, *, tools: str) -> str:
    names = {name.strip() for name in tools.split(",") if name.strip()}
    messages = workspace.messages
    plans = [(position, str(call.get("id")), call_name(call)) for position, message in enumerate(messages)
             if message.role == "assistant" and workspace.alive(position)
             for call in tool_calls(message.data) if call_name(call) in names]
    if not plans:
        return "replaced 0 older plan(s) with a pointer to the newest"
    newer = plans[-1][0]
    newer_line = call_line(messages[newer], plans[-1][1])
    older = (fit.Proposal(position, _pointing(workspace, position, call_id, f"plan superseded by the newer {tool} at line {newer_line}"))
             for position, call_id, tool in itertools.takewhile(lambda plan: plan[0] != newer, plans))
    replaced = fit.take(workspace, older)  # (the newest plan's message keeps every plan call it makes)
    return f"replaced {replaced} older plan(s) with a pointer to the newest"


def _pointing(workspace: Workspace, position: int, call_id: str, reason: str) -> Callable[[], fit.Rewrite | None]:
    """The message at ``position`` with the plan call ``call_id`` pointing at the newer plan (None when
    the pointer would cost as much as the plan)."""
    def make() -> fit.Rewrite | None:
        message = workspace.messages[position]
        calls = [_pointer(c, f"{PREFIX} {reason}]") if isinstance(c, dict) and str(c.get("id")) == call_id else c
                 for c in message.data["tool_calls"]]
        data = {**message.data, "tool_calls": calls}
        if workspace.counter.count_message(message.rewritten(data)).tokens >= message.tokens:
            return None
        return fit.Rewrite(data, reason)
    return make


STRATEGY = StrategyInfo(
    name="supersede_plans",
    alias="SupersedePlans",
    summary="older calls that rewrite the agent's whole todo list point at the newest one",
    params=(Param("tools", str, PLAN_TOOLS, "the tools whose every call rewrites the whole plan (comma-separated)"),),
    apply=apply,
)
