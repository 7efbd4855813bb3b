"""Would a provider's API accept this transcript? (``compact validate --for``, ``--check-for``)

``check_transcript`` reads canonical messages (plain dicts, OpenAI Chat shape)
and returns one ProviderProblem per thing the provider would refuse, in
transcript order. It is pure and linear; tool results are paired with their
calls exactly as compaction pairs them (core.structure: a result answers the
nearest earlier call with its id).

Providers: ``openai`` (Chat Completions), ``anthropic`` (Messages: tool
results ride in the next user message, one system prompt) and ``responses``
(OpenAI Responses items: function_call / function_call_output).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import ConfigError
from core.messages import IMAGE_PART_TYPES, Message, call_name, has_text, tool_calls
from core.structure import Structure, analyse

OPENAI = "openai"
ANTHROPIC = "anthropic"
RESPONSES = "responses"
PROVIDERS = (OPENAI, ANTHROPIC, RESPONSES)

ACCEPTED_ROLES = {
    OPENAI: ("system", "developer", "user", "assistant", "tool", "function"),
    ANTHROPIC: ("system", "user", "assistant", "tool"),
    RESPONSES: ("system", "developer", "user", "assistant", "tool"),
}
ROLE_FIXES = {
    "developer": "use role system",
    "function": "use a tool message with the tool_call_id of its call",
}
ANTHROPIC_CALL_ID = re.compile(r"[a-zA-Z0-9_-]+")
# Problems about how results and calls hang together; role-order checks do not repeat them.
_ADJACENCY_FIX = {
    OPENAI: "move the tool messages right after the assistant message that made the calls",
    ANTHROPIC: "move it right after the assistant message that made the call: "
    "tool_result blocks go in the next user message",
}


@dataclass(frozen=True)
class ProviderProblem:
    """One thing a provider would refuse: where (list index, 1-based line if known), what and the fix."""

    index: int
    line: int | None
    code: str
    message: str
    fix: str

    def location(self, path: str) -> str:
        where = str(self.line) if self.line is not None else f"message {self.index + 1}"
        return f"{path}:{where}"

    def format(self, path: str) -> str:
        """``FILE:LINE: problem (fix)`` on one line."""
        return " ".join(f"{self.location(path)}: {self.message} ({self.fix})".split())

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "line": self.line, "code": self.code, "message": self.message, "fix": self.fix}


def check_transcript(
    messages: Sequence[Mapping[str, Any]],
    provider: str,
    lines: Sequence[int | None] | None = None,
) -> list[ProviderProblem]:
    """Every problem ``provider`` would refuse in ``messages``, in transcript order.

    ``lines`` gives each message's line number (None when unknown); without it
    problems carry no line.
    """
    if provider not in PROVIDERS:
        near = difflib.get_close_matches(provider, PROVIDERS, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise ConfigError(f"unknown provider {provider!r}", fix=f"{hint}use one of {', '.join(PROVIDERS)}")
    if lines is not None and len(lines) != len(messages):
        raise ValueError("lines must give one entry per message")
    view = _View(messages, lines)
    problems = [
        *_unknown_roles(view, provider),
        *_result_ids(view),
        *_pairing(view, provider),
        *_call_ids(view, provider),
    ]
    flagged = {p.index for p in problems}
    problems += _role_order(view, provider, flagged)
    problems += _empty_content(view, provider)
    unknown = {p.index for p in problems if p.code == "unknown-role"}
    problems = [p for p in problems if p.code == "unknown-role" or p.index not in unknown]
    return sorted(problems, key=lambda p: p.index)  # stable: checks keep their order within a message


class _View:
    """The messages with their lines and the call/result pairing, computed once."""

    def __init__(self, messages: Sequence[Mapping[str, Any]], lines: Sequence[int | None] | None) -> None:
        self.messages = [dict(m) for m in messages]
        self.lines = list(lines) if lines is not None else [None] * len(messages)
        wrapped = [Message(data=m, line=line) for m, line in zip(self.messages, self.lines)]
        self.structure: Structure = analyse(wrapped)

    def role(self, index: int) -> str:
        return str(self.messages[index].get("role", ""))

    def problem(self, index: int, code: str, message: str, fix: str) -> ProviderProblem:
        return ProviderProblem(index, self.lines[index], code, message, fix)

    def where(self, index: int) -> str:
        line = self.lines[index]
        return f"line {line}" if line is not None else f"message {index + 1}"


def _unknown_roles(view: _View, provider: str) -> list[ProviderProblem]:
    accepted = ACCEPTED_ROLES[provider]
    return [
        view.problem(
            i, "unknown-role", f"role {view.role(i)!r} is not accepted by {provider}",
            ROLE_FIXES.get(view.role(i), f"use one of {', '.join(accepted)}"),
        )
        for i in range(len(view.messages))
        if view.role(i) not in accepted
    ]


def _result_ids(view: _View) -> list[ProviderProblem]:
    """Each tool message answers exactly one call by a ``tool_call_id``."""
    problems = []
    for i, data in enumerate(view.messages):
        if data.get("role") != "tool" or data.get("tool_call_id") is not None:
            continue
        if isinstance(data.get("tool_call_ids"), list):
            problems.append(view.problem(
                i, "several-call-ids", "tool message answers several calls (tool_call_ids)",
                "split it into one tool message per call, each with its tool_call_id",
            ))
        else:
            problems.append(view.problem(
                i, "missing-tool-call-id", "tool message has no tool_call_id",
                "add the id of the call it answers, or drop it",
            ))
    return problems


def _pairing(view: _View, provider: str) -> list[ProviderProblem]:
    """Every call has a result and every result a call, placed where the provider wants it."""
    structure = view.structure
    problems = []
    later_call: dict[str, int] = {}
    for i in range(len(view.messages) - 1, -1, -1):
        for call in tool_calls(view.messages[i]):
            if view.role(i) == "assistant":
                later_call[str(call.get("id"))] = i
    for position in structure.orphan_results:
        for rid in _ids_answered(view.messages[position]):
            if any(key[1] == rid for key in structure.answered_by.get(position, [])):
                continue
            call_at = later_call.get(rid)
            if call_at is not None and call_at > position:
                problems.append(view.problem(
                    position, "result-before-call",
                    f"tool result for {_shown(rid)} comes before its call at {view.where(call_at)}",
                    "move it after the call",
                ))
            else:
                problems.append(view.problem(
                    position, "missing-call", f"tool result for {_shown(rid)} answers no earlier tool call",
                    "drop it with compact --repair, or restore the assistant message that made the call",
                ))
    names = _call_names(view)
    for owner, cid in structure.orphan_calls:
        problems.append(view.problem(
            owner, "missing-result", f"tool call {_shown(cid)} ({names.get((owner, cid), '?')}) has no result",
            f"add a tool message with tool_call_id {_shown(cid)} after it, or drop the call with compact --repair",
        ))
    problems += _placement(view, provider)
    return problems


def _shown(call_id: str) -> str:
    return call_id or "''"


def _ids_answered(data: Mapping[str, Any]) -> list[str]:
    single = data.get("tool_call_id")
    if single is not None:
        return [str(single)]
    many = data.get("tool_call_ids")
    return [str(i) for i in many] if isinstance(many, list) else []


def _call_names(view: _View) -> dict[tuple[int, str], str]:
    return {
        (i, str(call.get("id"))): call_name(call)
        for i, data in enumerate(view.messages)
        for call in tool_calls(data)
    }


def _placement(view: _View, provider: str) -> list[ProviderProblem]:
    """openai/anthropic: results directly after their call; responses: before the next assistant message."""
    count = len(view.messages)
    run_start = [0] * count  # where the run of consecutive tool messages holding i begins
    for i in range(count):
        run_start[i] = run_start[i - 1] if i and view.role(i) == "tool" and view.role(i - 1) == "tool" else i
    next_assistant = [count] * (count + 1)
    for i in range(count - 1, -1, -1):
        next_assistant[i] = i if view.role(i) == "assistant" else next_assistant[i + 1]
    problems = []
    for position, owners in sorted(view.structure.answered_by.items()):
        for owner, cid in owners:
            if provider == RESPONSES:
                later = next_assistant[owner + 1]
                if later < position:
                    problems.append(view.problem(
                        position, "result-after-next-assistant",
                        f"tool result for {cid} comes after the next assistant message ({view.where(later)}) "
                        f"instead of before it",
                        "move it between its call and the next assistant message",
                    ))
                    break
            elif run_start[position] != owner + 1:
                between = run_start[position] - 1  # the message just before the run holding the result
                problems.append(view.problem(
                    position, "result-not-adjacent",
                    f"tool result for {cid} is not directly after its call at {view.where(owner)}: "
                    f"{view.where(between)} ({view.role(between)}) comes between",
                    _ADJACENCY_FIX[provider],
                ))
                break
    return problems


def _call_ids(view: _View, provider: str) -> list[ProviderProblem]:
    problems = []
    first_use: dict[str, int] = {}
    for i, data in enumerate(view.messages):
        if data.get("role") != "assistant":
            continue
        for call in tool_calls(data):
            raw = call.get("id")
            cid = raw if isinstance(raw, str) else ""
            if not cid:
                field = "call_id" if provider == RESPONSES else "id"
                problems.append(view.problem(
                    i, "empty-call-id", f"tool call {call_name(call) or '?'} has an empty {field}",
                    "give every tool call a non-empty id, and its result the same tool_call_id",
                ))
                continue
            if provider != ANTHROPIC:
                continue
            if ANTHROPIC_CALL_ID.fullmatch(cid) is None:
                problems.append(view.problem(
                    i, "invalid-call-id", f"tool call id {cid!r} has characters Anthropic refuses",
                    "use only letters, digits, _ and - in the id and its result's tool_call_id",
                ))
            if cid in first_use:
                problems.append(view.problem(
                    i, "duplicate-call-id", f"tool call id {cid} is used again (first at {view.where(first_use[cid])})",
                    "give every tool call a unique id",
                ))
            else:
                first_use[cid] = i
    return problems


def _role_order(view: _View, provider: str, flagged: set[int]) -> list[ProviderProblem]:
    # openai's rule (a tool message follows an assistant message with tool_calls or another tool
    # message) needs no check of its own: every tool message is either paired and directly after
    # its call, or already reported (missing-call, result-not-adjacent, missing-tool-call-id, ...).
    if provider == ANTHROPIC:
        return _anthropic_role_order(view, flagged)
    return []


def _anthropic_role_order(view: _View, flagged: set[int]) -> list[ProviderProblem]:
    """System messages only at the start; then user first, and user and assistant alternate.

    A run of tool messages is one user turn (its tool_result blocks), and a
    user message right after it joins that turn as text after the results.
    """
    problems = []
    previous: int | None = None  # the last non-system message
    for i in range(len(view.messages)):
        role = view.role(i)
        if role in ("system", "developer"):  # developer is refused as a role, but it is a system prompt
            if previous is not None:
                problems.append(view.problem(
                    i, "system-not-at-start", "system message after the conversation started",
                    "Anthropic takes one system prompt: move it to the top, or make it a user message",
                ))
            continue
        if previous is None:
            if role != "user" and i not in flagged:
                problems.append(view.problem(
                    i, "first-not-user", f"the first message after the system prompt is {role}, not user",
                    "start the conversation with a user message",
                ))
        elif i not in flagged and _same_turn_clash(view.role(previous), role):
            side = "assistant" if role == "assistant" else "user"
            problems.append(view.problem(
                i, "roles-not-alternating",
                f"two {side} messages in a row ({view.where(previous)} and {view.where(i)})",
                "user and assistant must alternate: merge them into one message",
            ))
        previous = i
    return problems


def _same_turn_clash(previous: str, role: str) -> bool:
    if role == "assistant":
        return previous == "assistant"
    if role == "tool":
        return previous == "user"
    return previous == "user"  # a user message after tool results joins their turn


def _empty_content(view: _View, provider: str) -> list[ProviderProblem]:
    if provider == OPENAI:
        return [
            view.problem(
                i, "empty-assistant", "assistant message has neither content nor tool_calls",
                "give it content or drop it",
            )
            for i, data in enumerate(view.messages)
            if data.get("role") == "assistant" and data.get("content") in (None, [])
            and not tool_calls(data) and data.get("function_call") is None
        ]
    if provider == ANTHROPIC:
        return _anthropic_empty_content(view)
    return []


def _anthropic_empty_content(view: _View) -> list[ProviderProblem]:
    """Text must not be empty, except in a final assistant message (a prefill)."""
    problems = []
    last = len(view.messages) - 1
    for i, data in enumerate(view.messages):
        role = data.get("role")
        if role not in ("user", "assistant") or (role == "assistant" and i == last):
            continue
        content = data.get("content")
        if isinstance(content, list) and any(_empty_text_part(part) for part in content):
            problems.append(view.problem(
                i, "empty-content", f"{role} message has an empty text part", "remove the empty part",
            ))
        elif not has_text(data) and not tool_calls(data) and not _has_image(content):
            problems.append(view.problem(
                i, "empty-content", f"{role} message has no text", "give it text or drop it",
            ))
    return problems


def _empty_text_part(part: Any) -> bool:
    if isinstance(part, str):
        return not part.strip()
    return isinstance(part, Mapping) and part.get("type") == "text" and not str(part.get("text", "")).strip()


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, Mapping) and p.get("type") in IMAGE_PART_TYPES for p in content
    )
