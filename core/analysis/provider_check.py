"""Would a provider's API accept this transcript? (``compact validate --for``, ``--check-for``)

A transcript is judged as its provider would receive it
(:mod:`core.analysis.provider_requests`): each message or input item against the JSON
Schema of the provider's own request type (``schemas/provider-*.schema.json``,
generated from the official SDKs' types and checked against them by the
tests), then the rules the APIs enforce across messages:

* ``openai`` (Chat Completions): the tool messages answering an assistant
  message's calls come right after it, every call answered, none without its
  call; an assistant message has content or calls; a call id of at most 40 characters;
* ``anthropic`` (Messages): consecutive messages of one side are merged (the
  API does that), then the first is a user message, every ``tool_use`` is
  answered by a ``tool_result`` block at the head of the next user message,
  no ``tool_result`` without its call, no empty text, tool_use ids of
  ``[a-zA-Z0-9_-]`` and unique;
* ``responses``: every call with a ``call_id`` has an output after it, and
  every output a call before it (the API has no other ordering rule); a call_id of at most 64
  characters.

Each problem names the item's line and a fix that applies to it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from core.errors import ConfigError
from core.messages import Message, call_name, tool_calls, wire_message

OPENAI = "openai"
ANTHROPIC = "anthropic"
RESPONSES = "responses"
PROVIDERS = (OPENAI, ANTHROPIC, RESPONSES)

ACCEPTED_ROLES = {
    OPENAI: ("system", "developer", "user", "assistant", "tool", "function"),
    ANTHROPIC: ("system", "developer", "user", "assistant", "tool"),
    RESPONSES: ("system", "developer", "user", "assistant", "tool"),
}
ROLE_FIXES = {
    "function": "use a tool message with the tool_call_id of its call",
}
ANTHROPIC_CALL_ID = re.compile(r"[a-zA-Z0-9_-]+")
SCHEMAS = {
    OPENAI: "provider-openai-chat-message",
    RESPONSES: "provider-responses-input-item",
    ANTHROPIC: "provider-anthropic-message",
}
# The problems `compact --repair` fixes (it drops calls without a result and results without a call,
# and writes a one-id tool_call_ids list as tool_call_id).
REPAIRABLE = frozenset({"missing-result", "missing-call", "call-ids-list"})

# The fix of each problem; {placeholders} are filled from the problem.
FIXES = {
    "several-call-ids": "split it into one tool message per call, each with its tool_call_id",
    "call-ids-list": "write it as tool_call_id, as compact --repair does",
    "missing-tool-call-id": "add the id of the call it answers, or drop it",
    "result-before-call": "move it after the call",
    "missing-call": "drop it with compact --repair, or restore the message that made the call",
    "missing-result": "add its result after it, or drop the call with compact --repair",
    "result-not-adjacent:openai": "move the tool messages right after the assistant message "
    "that made the calls",
    "result-not-adjacent:anthropic": "move it right after the assistant message that made the "
    "call: tool_result blocks go first in the next user message",
    "empty-call-id": "give every tool call a non-empty id, and its result the same tool_call_id",
    "invalid-call-id": "use only letters, digits, _ and - in the id and its result's tool_call_id",
    "duplicate-call-id": "give every tool call a unique id",
    "call-id-too-long": "shorten it, and the id its result names with it, as compact --to {provider} "
    "does when it converts from another format",
    "first-not-user": "start the conversation with a user message (or a summary then a user message)",
    "empty-assistant": "give it content or drop it",
    "empty-content": "give it text or drop it",
    "empty-text-part": "remove the empty part",
    "invalid-shape": "fix or drop it: it is not a {what} the API takes",
}
WHAT = {OPENAI: "chat message", ANTHROPIC: "Messages API message", RESPONSES: "Responses input item"}


@dataclass(frozen=True)
class ProviderProblem:
    """One thing a provider would refuse: where (item index, 1-based line if known), what, the fix."""

    index: int
    line: int | None
    code: str
    message: str
    fix: str

    def location(self, path: str) -> str:
        if self.line is None and self.index < 0:  # the request as a whole
            return path
        where = str(self.line) if self.line is not None else f"message {self.index + 1}"
        return f"{path}:{where}"

    def in_result(self) -> str:
        """Where it is in a result about to be written (``--check-for``)."""
        if self.line is None and self.index < 0:
            return "the result"
        return f"line {self.line} of the result" if self.line is not None else f"message {self.index + 1} of the result"

    def format(self, path: str) -> str:
        """``FILE:LINE: problem (fix)`` on one line."""
        return " ".join(f"{self.location(path)}: {self.message} ({self.fix})".split())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_provider(provider: str) -> None:
    if provider not in PROVIDERS:
        near = difflib.get_close_matches(provider, PROVIDERS, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        fix = f"{hint}use one of {', '.join(PROVIDERS)}"
        raise ConfigError(f"unknown provider {provider!r}", fix=fix)


def check_transcript(
    messages: Sequence[Mapping[str, Any]],
    provider: str,
    lines: Sequence[int | None] | None = None,
) -> list[ProviderProblem]:
    """Every problem ``provider`` would refuse in canonical ``messages`` (OpenAI chat shape), in order.

    For ``openai`` the messages are judged as they are; for the others as
    ``compact --to PROVIDER`` writes them. ``lines`` gives each message's line
    number (None when unknown).
    """
    from core.analysis.provider_requests import WireRequest, rendered

    check_provider(provider)
    if lines is not None and len(lines) != len(messages):
        raise ValueError("lines must give one entry per message")
    numbers: list[int | None] = list(lines) if lines is not None else [None] * len(messages)
    if provider == OPENAI:
        request = WireRequest([wire_message(dict(m)) for m in messages], numbers)
    else:
        wrapped = [Message(data=dict(m), line=n) for m, n in zip(messages, numbers)]
        request = rendered(wrapped, provider)
    problems = check_request(request, provider)
    if provider != OPENAI:  # name the canonical message each problem comes from
        problems = [ProviderProblem(request.indexes[p.index] if p.index >= 0 else 0, p.line, p.code, p.message,
                                    p.fix) for p in problems]
    return problems


def check_request(request: Any, provider: str) -> list[ProviderProblem]:
    """Every problem in one request (a :class:`core.analysis.provider_requests.WireRequest`), in item order."""
    check_provider(provider)
    view = _View(request, provider)
    if provider == ANTHROPIC and request.system is not None:
        error = _shape_error("provider-anthropic-system", request.system)
        if error:
            view.problems.append(ProviderProblem(-1, request.system_line, "invalid-shape",
                                                 f"the system prompt is not a string or text blocks: {error}",
                                                 "make it a string"))
    for index, item in enumerate(request.items):
        _check_item(view, index, item)
    if provider == OPENAI:
        _chat_pairing(view)
    elif provider == RESPONSES:
        _responses_pairing(view)
    else:
        _anthropic_turns(view)
    return sorted(view.problems, key=lambda p: p.index)  # stable: an item's problems keep check order


class _View:
    def __init__(self, request: Any, provider: str) -> None:
        self.items: list[dict[str, Any]] = [dict(i) if isinstance(i, Mapping) else {} for i in request.items]
        self.lines: list[int | None] = list(request.lines)
        self.provider = provider
        self.problems: list[ProviderProblem] = []
        self.flagged: set[int] = set()  # items whose shape is wrong: no rule is checked on them

    def report(self, index: int, code: str, message: str, fix: str | None = None, **fill: str) -> None:
        fix = fix if fix is not None else FIXES[code].format(**fill)
        self.problems.append(ProviderProblem(index, self.lines[index], code, message, fix))

    def where(self, index: int) -> str:
        line = self.lines[index]
        return f"line {line}" if line is not None else f"message {index + 1}"


def _check_item(view: _View, index: int, item: dict[str, Any]) -> None:
    role = item.get("role")
    # A Responses item with a "type" (a function call, a reasoning item) carries no role.
    if (view.provider != RESPONSES or "type" not in item) and role not in ACCEPTED_ROLES[view.provider]:
        fix = ROLE_FIXES.get(str(role), f"use one of {', '.join(ACCEPTED_ROLES[view.provider])}")
        view.report(index, "unknown-role", f"role {role!r} is not accepted by {view.provider}", fix)
        view.flagged.add(index)
        return
    if view.provider == OPENAI and role == "tool" and item.get("tool_call_id") is None:
        ids = item.get("tool_call_ids")
        if isinstance(ids, list) and len(ids) == 1:  # SWE-agent's shape
            view.report(index, "call-ids-list", f"tool message names its call {ids[0]} in a tool_call_ids list")
        elif isinstance(ids, list):
            shown = ", ".join(str(i) for i in ids)
            view.report(index, "several-call-ids", f"tool message answers several calls in a tool_call_ids list: "
                        f"{shown}")
        else:
            view.report(index, "missing-tool-call-id", "tool message has no tool_call_id")
        view.flagged.add(index)
        return
    sent = item
    if view.provider == RESPONSES and item.get("type") == "reasoning" and "id" not in item \
            and isinstance(item.get("encrypted_content"), str):
        sent = {**item, "id": "rs_sent_without_id"}  # Codex sends encrypted reasoning so, and the API takes it
    elif view.provider == RESPONSES and item.get("type") == "message" and item.get("role") == "assistant" \
            and "id" not in item and isinstance(item.get("content"), list):
        # Codex sends its assistant history as output messages without id and status; the API takes them.
        parts = [{**p, "annotations": p.get("annotations", [])} if isinstance(p, Mapping)
                 and p.get("type") == "output_text" else p for p in item["content"]]
        sent = {**item, "content": parts, "id": "msg_sent_without_id", "status": "completed"}
    if view.provider == ANTHROPIC and _compaction_blocks(item):
        sent = _without_compaction(view, index, item)  # the beta block the shipped (non-beta) schema lacks
    error = _shape_error(SCHEMAS[view.provider], sent)
    if error:
        kind = item.get("type") if item.get("type") not in (None, "message") else f"{role} message"
        view.report(index, "invalid-shape", f"this {kind} is not a valid {WHAT[view.provider]}: {error}",
                    what=WHAT[view.provider])
        view.flagged.add(index)


# BetaCompactionBlockParam (anthropic SDK, beta compact-2026-01-12): what a compaction block may hold.
COMPACTION_FIELDS = frozenset({"type", "content", "encrypted_content", "signature", "tool_changes", "cache_control"})


def _compaction_blocks(item: dict[str, Any]) -> list[Any]:
    content = item.get("content")
    return [b for b in content if _is(b, "compaction")] if isinstance(content, list) else []


def _without_compaction(view: _View, index: int, item: dict[str, Any]) -> dict[str, Any]:
    """The message less its compaction blocks (each checked here), for the schema to judge the rest."""
    for block in _compaction_blocks(item):
        strings = all(block.get(k) is None or isinstance(block.get(k), str) for k in ("content", "encrypted_content", "signature"))
        if not strings or not COMPACTION_FIELDS.issuperset(block) or block.get("content") == "":
            view.report(index, "invalid-shape", f"this {item.get('role')} message is not a valid "
                        f"{WHAT[ANTHROPIC]}: a compaction block holds content, signature, encrypted_content "
                        "(strings or null), tool_changes and cache_control only", what=WHAT[ANTHROPIC])
    rest = [b for b in item["content"] if not _is(b, "compaction")]
    return {**item, "content": rest or [{"type": "text", "text": "(compaction)"}]}


def _shape_error(schema: str, value: Any) -> str | None:
    from core.io.schema_loader import validator

    checker = validator(schema)
    if checker.is_valid(value):
        return None
    return _explain(value)


def _explain(value: Any) -> str:
    """A short reason: the first content part or field that looks wrong."""
    if not isinstance(value, Mapping):
        return "not a JSON object"
    content = value.get("content")
    if isinstance(content, list):
        for position, part in enumerate(content):
            if isinstance(part, Mapping):
                kind = part.get("type")
                if kind in ("thinking",) and not isinstance(part.get("signature"), str):
                    return f"content[{position}] is a thinking block without its signature"
                if kind in ("reasoning",) or (isinstance(kind, str) and kind.endswith("_call")):
                    return f"content[{position}] is a {kind} item, which is not a content block"
            else:
                return f"content[{position}] is not a content part (an object with a type)"
        kinds = sorted({str(p.get("type")) for p in content if isinstance(p, Mapping)})
        return f"check its content parts ({', '.join(kinds)}) and fields"
    return "a required field is missing or has the wrong type"


def _chat_pairing(view: _View) -> None:
    """Tool messages right after the assistant message whose calls they answer; every call answered."""
    waiting: dict[str, int] = {}  # call id -> the assistant message that made it
    made: dict[str, int] = {}
    names: dict[tuple[int, str], str] = {}
    for index, item in enumerate(view.items):
        role = item.get("role")
        if role == "tool":
            if index in view.flagged:  # its shape is the problem: it still answers its calls
                for answered in _answered_ids(item):
                    waiting.pop(answered, None)
                continue
            call_id = str(item.get("tool_call_id"))
            if call_id in waiting:
                del waiting[call_id]
            elif call_id in made:
                owner = made[call_id]
                between = next((i for i in range(owner + 1, index) if view.items[i].get("role") != "tool"), None)
                if between is None:  # right after its call, which an earlier result answered already
                    view.report(index, "duplicate-call-id", f"a second tool result for {_shown(call_id)}: "
                                f"its call at {view.where(owner)} was answered already")
                    continue
                view.report(index, "result-not-adjacent",
                            f"tool result for {call_id} is not directly after its call at {view.where(owner)}: "
                            f"{view.where(between)} ({view.items[between].get('role')}) comes between",
                            FIXES["result-not-adjacent:openai"])
            elif _called_later(view, index, call_id):
                view.report(index, "result-before-call", f"tool result for {_shown(call_id)} comes before its call")
            else:
                view.report(index, "missing-call", f"tool result for {_shown(call_id)} answers no earlier tool call")
            continue
        _unanswered(view, waiting, names)
        waiting = {}
        if role == "assistant" and index not in view.flagged:
            calls = tool_calls(item)
            for call in calls:
                call_id = str(call.get("id") or "")
                if not call_id:
                    view.report(index, "empty-call-id", f"tool call {call_name(call) or '?'} has an empty id")
                    continue
                _id_length(view, index, call_id)
                waiting[call_id] = made[call_id] = index
                names[(index, call_id)] = call_name(call)
            if item.get("content") in (None, []) and not calls and item.get("function_call") is None:
                view.report(index, "empty-assistant", "assistant message has neither content nor tool_calls")
    _unanswered(view, waiting, names)


def _answered_ids(item: dict[str, Any]) -> list[str]:
    """The calls a tool message answers: its tool_call_id, or the ids of its tool_call_ids list (SWE-agent)."""
    ids = item.get("tool_call_ids")
    if item.get("tool_call_id") is None and isinstance(ids, list):
        return [str(i) for i in ids]
    return [str(item.get("tool_call_id"))]


def _called_later(view: _View, index: int, call_id: str) -> bool:
    return any(str(c.get("id")) == call_id for item in view.items[index + 1:] for c in tool_calls(item))


def _unanswered(view: _View, waiting: dict[str, int], names: dict[tuple[int, str], str]) -> None:
    for call_id, owner in waiting.items():
        name = names.get((owner, call_id)) or "?"
        view.report(owner, "missing-result", f"tool call {_shown(call_id)} ({name}) has no result", id=call_id)


def _id_length(view: _View, index: int, call_id: str) -> None:
    # The limits --to shortens ids to (imported here: this module loads at start-up, conversion need not).
    from core.formats.conversion import CALL_ID_LIMITS

    limit = CALL_ID_LIMITS[view.provider]
    if len(call_id) > limit:
        view.report(index, "call-id-too-long", f"tool call id {call_id} is {len(call_id)} characters: "
                    f"{view.provider} takes at most {limit}", provider=view.provider)


def _shown(call_id: str) -> str:
    return call_id or "''"


def _responses_pairing(view: _View) -> None:
    """Every call with a call_id has an output after it; every output a call before it."""
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for index, item in enumerate(view.items):
        kind = str(item.get("type", ""))
        call_id = item.get("id") if kind == "local_shell_call_output" else item.get("call_id")
        if kind.endswith("_call_output"):
            if index in view.flagged:
                continue
            if call_id not in calls:
                later = any(i.get("call_id") == call_id and str(i.get("type", "")).endswith("_call")
                            for i in view.items[index + 1:])
                code = "result-before-call" if later else "missing-call"
                text = "comes before its call" if later else "answers no earlier call"
                view.report(index, code, f"{kind} for {_shown(str(call_id))} {text}")
            answered.add(str(call_id))
        elif kind.endswith("_call") and isinstance(call_id, str):
            if not call_id:
                view.report(index, "empty-call-id", f"{kind} {item.get('name') or ''} has an empty call_id")
            elif call_id not in calls:
                _id_length(view, index, call_id)
            calls.setdefault(call_id, index)
    for call_id, owner in calls.items():
        if call_id not in answered and call_id:
            name = view.items[owner].get("name") or view.items[owner].get("type")
            view.report(owner, "missing-result", f"tool call {call_id} ({name}) has no output", id=call_id)


def _anthropic_turns(view: _View) -> None:
    """Merge same-side messages as the API does, then: user first, calls answered at the head of the next turn."""
    turns: list[tuple[int, str, list[Any]]] = []
    for index, item in enumerate(view.items):
        role = str(item.get("role"))
        if role == "system":
            continue
        content = item.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if turns and turns[-1][1] == role:
            turns[-1][2].extend(blocks)
        else:
            turns.append((index, role, blocks))
    if turns and turns[0][1] != "user" and not (turns[0][2] and _is(turns[0][2][0], "compaction")):
        view.report(turns[0][0], "first-not-user",  # (a compaction block stands for what it summarized)
                    f"the first message is {turns[0][1]}, not user")
    seen_ids: dict[str, int] = {}
    for position, (index, role, blocks) in enumerate(turns):
        last = position == len(turns) - 1
        prefill = last and role == "assistant"
        if not blocks and not prefill:
            view.report(index, "empty-content", f"{role} message has no content")
        elif not prefill and any(_empty_text(b) for b in blocks):
            view.report(index, "empty-content", f"{role} message has an empty text part", FIXES["empty-text-part"])
        calls = [b for b in blocks if _is(b, "tool_use")]
        for call in calls:
            call_id = str(call.get("id") or "")
            if not ANTHROPIC_CALL_ID.fullmatch(call_id):
                view.report(index, "invalid-call-id", f"tool call id {call_id!r} has characters Anthropic refuses")
            elif call_id in seen_ids:
                view.report(index, "duplicate-call-id",
                            f"tool call id {call_id} is used again (first at {view.where(seen_ids[call_id])})")
            else:
                seen_ids[call_id] = index
        following = turns[position + 1] if position + 1 < len(turns) else None
        if calls:
            _anthropic_answers(view, index, calls, following)
        if role == "user":
            before = turns[position - 1][2] if position > 0 and turns[position - 1][1] == "assistant" else []
            known = {b.get("id") for b in before if _is(b, "tool_use")}
            for block in blocks:
                if _is(block, "tool_result") and block.get("tool_use_id") not in known:
                    view.report(index, "missing-call",
                                f"tool result for {_shown(str(block.get('tool_use_id')))} answers no tool call "
                                "of the assistant message before it")


def _anthropic_answers(view: _View, index: int, calls: list[Any], following: Any) -> None:
    blocks = following[2] if following is not None else []
    leading: list[Any] = []
    for block in blocks:
        if not _is(block, "tool_result"):
            break
        leading.append(block.get("tool_use_id"))
    answered = {b.get("tool_use_id") for b in blocks if _is(b, "tool_result")}
    for call in calls:
        call_id = call.get("id")
        if call_id not in answered:
            view.report(index, "missing-result",
                        f"tool call {_shown(str(call_id))} ({call.get('name') or '?'}) has no result in the next "
                        "user message", id=str(call_id))
        elif call_id not in leading:
            view.report(following[0], "result-not-adjacent",
                        f"tool result for {call_id} comes after other blocks of its user message",
                        FIXES["result-not-adjacent:anthropic"])


def _is(block: Any, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def _empty_text(block: Any) -> bool:
    return _is(block, "text") and not str(block.get("text", "")).strip()
