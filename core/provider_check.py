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
from dataclasses import asdict, dataclass
from typing import Any

from core.errors import ConfigError
from core.messages import IMAGE_PART_TYPES, Message, call_name, has_text, tool_calls
from core.structure import analyse

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

# The fix of each problem; {placeholders} are filled from the problem.
FIXES = {
    "several-call-ids": "split it into one tool message per call, each with its tool_call_id",
    "missing-tool-call-id": "add the id of the call it answers, or drop it",
    "result-before-call": "move it after the call",
    "missing-call": "drop it with compact --repair, or restore the assistant message that made the call",
    "missing-result": "add a tool message with tool_call_id {id} after it, "
    "or drop the call with compact --repair",
    "result-after-next-assistant": "move it between its call and the next assistant message",
    "result-not-adjacent:openai": "move the tool messages right after the assistant message "
    "that made the calls",
    "result-not-adjacent:anthropic": "move it right after the assistant message that made the "
    "call: tool_result blocks go in the next user message",
    "empty-call-id": "give every tool call a non-empty id, and its result the same tool_call_id",
    "invalid-call-id": "use only letters, digits, _ and - in the id and its result's tool_call_id",
    "duplicate-call-id": "give every tool call a unique id",
    "system-not-at-start": "Anthropic takes one system prompt: move it to the top, "
    "or make it a user message",
    "first-not-user": "start the conversation with a user message",
    "roles-not-alternating": "user and assistant must alternate: merge them into one message",
    "empty-assistant": "give it content or drop it",
    "empty-content": "give it text or drop it",
    "empty-text-part": "remove the empty part",
}


@dataclass(frozen=True)
class ProviderProblem:
    """One thing a provider would refuse: where (list index, 1-based line if known), what, the fix."""

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
        return asdict(self)


def check_transcript(
    messages: Sequence[Mapping[str, Any]],
    provider: str,
    lines: Sequence[int | None] | None = None,
) -> list[ProviderProblem]:
    """Every problem ``provider`` would refuse in ``messages``, in transcript order.

    ``lines`` gives each message's line number (None when unknown). A message
    with a role the provider does not know gets that problem only.
    """
    if provider not in PROVIDERS:
        near = difflib.get_close_matches(provider, PROVIDERS, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        fix = f"{hint}use one of {', '.join(PROVIDERS)}"
        raise ConfigError(f"unknown provider {provider!r}", fix=fix)
    if lines is not None and len(lines) != len(messages):
        raise ValueError("lines must give one entry per message")
    view = _View(messages, lines, provider)
    _unknown_roles(view)
    _result_ids(view)
    _orphans(view)
    _placement(view)
    _call_ids(view)
    if provider == ANTHROPIC:
        # openai's order rule (a tool message follows an assistant message with tool_calls or
        # another tool message) needs no pass of its own: a tool message is either paired and
        # right after its call, or already reported by the pairing checks above.
        _anthropic_role_order(view, flagged={p.index for p in view.problems})
        _anthropic_empty_content(view)
    elif provider == OPENAI:
        _openai_empty_assistant(view)
    unknown = {p.index for p in view.problems if p.code == "unknown-role"}
    kept = [p for p in view.problems if p.code == "unknown-role" or p.index not in unknown]
    return sorted(kept, key=lambda p: p.index)  # stable: a message's problems keep check order


class _View:
    """The messages, their lines, the call/result pairing, and the problems found so far."""

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]],
        lines: Sequence[int | None] | None,
        provider: str,
    ) -> None:
        self.provider = provider
        self.messages = [dict(m) for m in messages]
        self.lines = list(lines) if lines is not None else [None] * len(messages)
        self.structure = analyse([Message(data=m) for m in self.messages])
        self.problems: list[ProviderProblem] = []

    def role(self, index: int) -> str:
        return str(self.messages[index].get("role", ""))

    def report(
        self, index: int, code: str, message: str, fix: str | None = None, **fill: str
    ) -> None:
        fix = fix if fix is not None else FIXES[code].format(**fill)
        self.problems.append(ProviderProblem(index, self.lines[index], code, message, fix))

    def where(self, index: int) -> str:
        line = self.lines[index]
        return f"line {line}" if line is not None else f"message {index + 1}"


def _shown(call_id: str) -> str:
    return call_id or "''"


def _unknown_roles(view: _View) -> None:
    accepted = ACCEPTED_ROLES[view.provider]
    for i in range(len(view.messages)):
        role = view.role(i)
        if role not in accepted:
            fix = ROLE_FIXES.get(role, f"use one of {', '.join(accepted)}")
            view.report(i, "unknown-role", f"role {role!r} is not accepted by {view.provider}", fix)


def _result_ids(view: _View) -> None:
    """Each tool message answers exactly one call, by its ``tool_call_id``."""
    for i, data in enumerate(view.messages):
        if data.get("role") != "tool" or data.get("tool_call_id") is not None:
            continue
        if isinstance(data.get("tool_call_ids"), list):
            view.report(i, "several-call-ids", "tool message answers several calls (tool_call_ids)")
        else:
            view.report(i, "missing-tool-call-id", "tool message has no tool_call_id")


def _orphans(view: _View) -> None:
    """Every call has a result after it, and every result a call before it."""
    structure = view.structure
    first_call: dict[str, int] = {}
    for i in range(len(view.messages) - 1, -1, -1):
        if view.role(i) == "assistant":
            for call in tool_calls(view.messages[i]):
                first_call[str(call.get("id"))] = i
    for position in structure.orphan_results:
        answered = {cid for _, cid in structure.answered_by.get(position, [])}
        for rid in _ids_answered(view.messages[position]):
            if rid in answered:
                continue
            call_at = first_call.get(rid)
            if call_at is not None and call_at > position:
                message = (
                    f"tool result for {_shown(rid)} comes before its call at {view.where(call_at)}"
                )
                view.report(position, "result-before-call", message)
            else:
                message = f"tool result for {_shown(rid)} answers no earlier tool call"
                view.report(position, "missing-call", message)
    names = {
        (i, str(call.get("id"))): call_name(call)
        for i, data in enumerate(view.messages)
        for call in tool_calls(data)
    }
    for owner, cid in structure.orphan_calls:
        message = f"tool call {_shown(cid)} ({names.get((owner, cid), '?')}) has no result"
        view.report(owner, "missing-result", message, id=_shown(cid))


def _ids_answered(data: Mapping[str, Any]) -> list[str]:
    single = data.get("tool_call_id")
    if single is not None:
        return [str(single)]
    many = data.get("tool_call_ids")
    return [str(i) for i in many] if isinstance(many, list) else []


def _placement(view: _View) -> None:
    """openai, anthropic: results right after their call; responses: before the next assistant."""
    count = len(view.messages)
    run_start = list(range(count))  # where the run of consecutive tool messages holding i begins
    for i in range(1, count):
        if view.role(i) == "tool" and view.role(i - 1) == "tool":
            run_start[i] = run_start[i - 1]
    next_assistant = [count] * (count + 1)
    for i in range(count - 1, -1, -1):
        next_assistant[i] = i if view.role(i) == "assistant" else next_assistant[i + 1]
    for position, owners in sorted(view.structure.answered_by.items()):
        for owner, cid in owners:
            if view.provider == RESPONSES:
                later = next_assistant[owner + 1]
                if later < position:
                    message = (
                        f"tool result for {cid} comes after the next assistant message "
                        f"({view.where(later)}) instead of before it"
                    )
                    view.report(position, "result-after-next-assistant", message)
                    break
            elif run_start[position] != owner + 1:
                between = run_start[position] - 1  # the message right before the run of results
                message = (
                    f"tool result for {cid} is not directly after its call at {view.where(owner)}: "
                    f"{view.where(between)} ({view.role(between)}) comes between"
                )
                fix = FIXES[f"result-not-adjacent:{view.provider}"]
                view.report(position, "result-not-adjacent", message, fix)
                break


def _call_ids(view: _View) -> None:
    """openai, responses: non-empty ids; anthropic: ^[a-zA-Z0-9_-]+$ and unique."""
    first_use: dict[str, int] = {}
    for i, data in enumerate(view.messages):
        if data.get("role") != "assistant":
            continue
        for call in tool_calls(data):
            cid = call.get("id") if isinstance(call.get("id"), str) else ""
            if not cid:
                field = "call_id" if view.provider == RESPONSES else "id"
                message = f"tool call {call_name(call) or '?'} has an empty {field}"
                view.report(i, "empty-call-id", message)
                continue
            if view.provider != ANTHROPIC:
                continue
            if ANTHROPIC_CALL_ID.fullmatch(cid) is None:
                message = f"tool call id {cid!r} has characters Anthropic refuses"
                view.report(i, "invalid-call-id", message)
            if cid in first_use:
                message = (
                    f"tool call id {cid} is used again (first at {view.where(first_use[cid])})"
                )
                view.report(i, "duplicate-call-id", message)
            else:
                first_use[cid] = i


def _anthropic_role_order(view: _View, flagged: set[int]) -> None:
    """System messages only at the start; then user first, and user and assistant alternate.

    A run of tool messages is one user turn (its tool_result blocks), and a
    user message right after it joins that turn as text after the results.
    """
    previous: int | None = None  # the last non-system message
    for i in range(len(view.messages)):
        role = view.role(i)
        if role in (
            "system",
            "developer",
        ):  # developer is refused as a role, but is a system prompt
            if previous is not None:
                view.report(
                    i, "system-not-at-start", "system message after the conversation started"
                )
            continue
        if previous is None:
            if role != "user" and i not in flagged:
                message = f"the first message after the system prompt is {role}, not user"
                view.report(i, "first-not-user", message)
        elif i not in flagged and _same_side(view.role(previous), role):
            side = "assistant" if role == "assistant" else "user"
            message = f"two {side} messages in a row ({view.where(previous)} and {view.where(i)})"
            view.report(i, "roles-not-alternating", message)
        previous = i


def _same_side(previous: str, role: str) -> bool:
    """Would these two follow each other on the same side? (tool results then text is one turn)"""
    if role == "assistant":
        return previous == "assistant"
    return previous == "user"


def _openai_empty_assistant(view: _View) -> None:
    for i, data in enumerate(view.messages):
        if (
            data.get("role") == "assistant"
            and data.get("content") in (None, [])
            and not tool_calls(data)
            and data.get("function_call") is None
        ):
            view.report(
                i, "empty-assistant", "assistant message has neither content nor tool_calls"
            )


def _anthropic_empty_content(view: _View) -> None:
    """Text must not be empty, except in a final assistant message (a prefill)."""
    last = len(view.messages) - 1
    for i, data in enumerate(view.messages):
        role = data.get("role")
        if role not in ("user", "assistant") or (role == "assistant" and i == last):
            continue
        content = data.get("content")
        if isinstance(content, list) and any(_empty_text_part(part) for part in content):
            view.report(
                i,
                "empty-content",
                f"{role} message has an empty text part",
                FIXES["empty-text-part"],
            )
        elif not has_text(data) and not tool_calls(data) and not _has_image(content):
            view.report(i, "empty-content", f"{role} message has no text")


def _empty_text_part(part: Any) -> bool:
    if isinstance(part, str):
        return not part.strip()
    if not isinstance(part, Mapping) or part.get("type") != "text":
        return False
    return not str(part.get("text", "")).strip()


def _has_image(content: Any) -> bool:
    if not isinstance(content, list):
        return False
    return any(isinstance(p, Mapping) and p.get("type") in IMAGE_PART_TYPES for p in content)
