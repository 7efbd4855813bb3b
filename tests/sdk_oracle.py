"""The providers' own request types as the judge of what compact writes (test-only: the SDKs are test dependencies).

Each message or item is validated with pydantic's ``TypeAdapter`` over the
official SDKs' request parameter types (``openai``: ``ChatCompletionMessageParam``
and ``ResponseInputItemParam``; ``anthropic``: ``MessageParam`` and the
top-level ``system``), then the cross-message rules the APIs enforce on top of
the types are checked here, written from the providers' documentation:

* every tool call is answered before the next turn, and no answer comes
  without its call (chat: the tool messages right after the assistant message;
  Anthropic: ``tool_result`` blocks first in the very next user message;
  Responses: an output after its call, no other ordering);
* Anthropic: consecutive same-role messages are merged first (the API does
  that), then the first message is a user message, and no text block is
  empty except in a final assistant message (a prefill).

``requests(path_bytes, provider)`` reads a written file the way the client
that resumes it would (a Claude Code session: the lines after the last
``compact_boundary``, one message per reply; a Codex rollout: its
``response_item`` payloads from the newest ``replacement_history`` or
``compaction`` item on; Anthropic lines: from the newest ``compaction`` block
on, which the API reads as the opening of the conversation, under the beta
``BetaMessageParam`` type), independently of compact's own readers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

OPENAI, ANTHROPIC, RESPONSES = "openai", "anthropic", "responses"
ANTHROPIC_BETA = "anthropic-beta"
_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _adapter(kind: str) -> TypeAdapter[Any]:
    if kind not in _ADAPTERS:
        if kind == OPENAI:
            from openai.types.chat import ChatCompletionMessageParam as shape
        elif kind == RESPONSES:
            from openai.types.responses import ResponseInputItemParam as shape  # type: ignore[assignment]
        elif kind == ANTHROPIC:
            from anthropic.types import MessageParam as shape  # type: ignore[assignment]
        elif kind == ANTHROPIC_BETA:  # a message holding a compaction block is sent under the compact beta
            from anthropic.types.beta import BetaMessageParam as shape  # type: ignore[assignment]
        else:  # the top-level system parameter of messages.create
            from collections.abc import Iterable

            from anthropic.types import TextBlockParam

            shape = str | Iterable[TextBlockParam]  # type: ignore[assignment]
        _ADAPTERS[kind] = TypeAdapter(shape)
    return _ADAPTERS[kind]


def _drain(value: Any) -> Any:
    """Iterate every lazily validated ``Iterable`` field, so its items are validated too."""
    if isinstance(value, dict):
        return {key: _drain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_drain(item) for item in value]
    if hasattr(value, "__next__"):
        return [_drain(item) for item in value]
    return value


def type_errors(kind: str, value: Any) -> str | None:
    """None when the SDK type accepts ``value``, else the first error."""
    try:
        _drain(_adapter(kind).validate_python(value))
    except ValidationError as exc:
        return f"{exc.error_count()} errors, e.g. {str(exc).splitlines()[1:3]}"
    return None


@dataclass(frozen=True)
class Violation:
    index: int  # which message/item of the request
    rule: str
    detail: str


@dataclass
class Request:
    """What a client would send: the system prompt (Anthropic) and the messages or input items."""

    label: str
    items: list[dict[str, Any]]
    system: Any = None


def judge(request: Request, provider: str) -> list[Violation]:
    found: list[Violation] = []
    if request.system is not None:
        error = type_errors("system", request.system)
        if error:
            found.append(Violation(-1, "type", f"system: {error}"))
    for index, item in enumerate(request.items):
        kind = ANTHROPIC_BETA if provider == ANTHROPIC and _holds_compaction(item) else provider
        error = type_errors(kind, _as_codex_sends(item) if provider == RESPONSES else item)
        if error:
            found.append(Violation(index, "type", error))
    if provider == OPENAI:
        found += _chat_rules(request.items)
    elif provider == RESPONSES:
        found += _responses_rules(request.items)
    else:
        found += _anthropic_rules(request.items)
    return found


def _holds_compaction(item: dict[str, Any]) -> bool:
    content = item.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "compaction" for b in content)


def _as_codex_sends(item: dict[str, Any]) -> dict[str, Any]:
    """The two places the SDK types are stricter than the API, both what Codex sends every turn
    (``store: false``): a reasoning item with its encrypted content and no ``id``, and below."""
    if item.get("type") == "reasoning" and "id" not in item and isinstance(item.get("encrypted_content"), str):
        return {**item, "id": "rs_sent_without_id"}
    return sent_assistant_message(item)


def sent_assistant_message(item: dict[str, Any]) -> dict[str, Any]:
    """The second: an assistant output message without its id and status (Codex sends its history so)."""
    if item.get("type") != "message" or item.get("role") != "assistant" or "id" in item \
            or not isinstance(item.get("content"), list):
        return item
    parts = [{**p, "annotations": p.get("annotations", [])} if isinstance(p, dict) and p.get("type") == "output_text"
             else p for p in item["content"]]
    return {**item, "content": parts, "id": "msg_sent_without_id", "status": "completed"}


# -- cross-message rules ----------------------------------------------------------------------

def _chat_rules(items: list[dict[str, Any]]) -> Iterator[Violation]:
    waiting: dict[str, int] = {}
    for index, item in enumerate(items):
        role = item.get("role")
        if role == "tool":
            call_id = item.get("tool_call_id")
            if call_id not in waiting:
                yield Violation(index, "answer-without-call", f"tool message for {call_id!r}")
            else:
                del waiting[call_id]
            continue
        for call_id, owner in waiting.items():
            yield Violation(owner, "call-not-answered", f"call {call_id!r} has no tool message right after it")
        waiting = {}
        if role == "assistant" and item.get("content") in (None, []) and not item.get("tool_calls") \
                and not item.get("function_call"):
            yield Violation(index, "empty-assistant", "neither content nor tool_calls (the API refuses it)")
        if role == "assistant":
            waiting = {str(c.get("id")): index for c in item.get("tool_calls") or [] if isinstance(c, dict)}
    for call_id, owner in waiting.items():
        yield Violation(owner, "call-not-answered", f"call {call_id!r} is never answered")


def _responses_rules(items: list[dict[str, Any]]) -> Iterator[Violation]:
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = str(item.get("type", ""))
        call_id = item.get("id") if kind == "local_shell_call_output" else item.get("call_id")
        if kind.endswith("_call_output"):
            if call_id not in calls:
                yield Violation(index, "answer-without-call", f"{kind} for {call_id!r}")
            answered.add(str(call_id))
        elif kind.endswith("_call") and isinstance(call_id, str):
            calls.setdefault(call_id, index)
    for call_id, owner in calls.items():
        if call_id not in answered:
            yield Violation(owner, "call-not-answered", f"call {call_id!r} has no output")


def merged(items: list[dict[str, Any]]) -> list[tuple[int, str, list[Any]]]:
    """Anthropic's merge of consecutive same-role messages: (first index, role, blocks)."""
    out: list[tuple[int, str, list[Any]]] = []
    for index, item in enumerate(items):
        content = item.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if out and out[-1][1] == item.get("role"):
            out[-1][2].extend(blocks)
        else:
            out.append((index, str(item.get("role")), blocks))
    return out


def _anthropic_rules(items: list[dict[str, Any]]) -> Iterator[Violation]:
    turns = [turn for turn in merged(items) if turn[1] != "system"]
    opens_with_compaction = bool(turns and turns[0][2] and isinstance(turns[0][2][0], dict)
                                 and turns[0][2][0].get("type") == "compaction")  # it stands for what it summarized
    if turns and turns[0][1] != "user" and not opens_with_compaction:
        yield Violation(turns[0][0], "first-not-user", f"the first message is {turns[0][1]}")
    ids: set[Any] = set()
    for position, (index, role, blocks) in enumerate(turns):
        last = position == len(turns) - 1
        if not blocks and not (last and role == "assistant"):
            yield Violation(index, "empty-content", f"{role} message with no content")
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text", "")).strip() \
                    and not (last and role == "assistant"):
                yield Violation(index, "empty-text", "an empty text block")
        calls = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        for call_id in calls:  # the API's documented id pattern, and ids are unique in a request
            if not re.fullmatch(r"[a-zA-Z0-9_-]+", str(call_id)) or call_id in ids:
                yield Violation(index, "bad-call-id", f"tool_use id {call_id!r}")
            ids.add(call_id)
        following = turns[position + 1][2] if position + 1 < len(turns) else None
        if calls and following is not None:
            leading: list[Any] = []
            for block in following:
                if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                    break
                leading.append(block.get("tool_use_id"))
            answered = [b.get("tool_use_id") for b in following if isinstance(b, dict) and b.get("type") == "tool_result"]
            for call_id in calls:
                if call_id not in answered:
                    yield Violation(index, "call-not-answered", f"tool_use {call_id!r} has no tool_result next")
                elif call_id not in leading:
                    yield Violation(turns[position + 1][0], "result-not-first",
                                    f"tool_result for {call_id!r} comes after other blocks")
        elif calls and role == "assistant":
            yield Violation(index, "call-not-answered", "the last message makes tool calls nobody answered")
        if role == "user":
            before = turns[position - 1][2] if position > 0 and turns[position - 1][1] == "assistant" else []
            known = {b.get("id") for b in before if isinstance(b, dict) and b.get("type") == "tool_use"}
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") not in known:
                    yield Violation(index, "answer-without-call", f"tool_result for {block.get('tool_use_id')!r}")


# -- reading written files as the resuming client would -----------------------------------------

def lines(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in raw.splitlines() if line.strip()]


def requests(raw: bytes, written_as: str, provider: str) -> list[Request]:
    """The request(s) a client resuming this file sends to ``provider`` (its wire format)."""
    rows = lines(raw)
    if written_as == "anthropic":
        system = next((r["system"] for r in rows if "system" in r and "role" not in r), None)
        return [Request("", from_newest_compaction_block([r for r in rows if "role" in r]), system)]
    if written_as == "claude-code":
        return [Request("", claude_code_messages(rows))]
    if written_as == "codex":  # envelope payloads or the 2025 layout's bare items; null id/content not sent
        items = codex_history(rows)
        return [Request("", [{k: v for k, v in i.items() if not (k in ("content", "id") and v is None)}
                             for i in items])]
    if written_as == "dataset":
        return [Request(f"line {n}", row["messages"]) for n, row in enumerate(rows, 1) if "messages" in row]
    if written_as == "responses":
        return [Request("", rows[_newest(rows, lambda r: r.get("type") == "compaction"):])]
    return [Request("", rows)]


def _newest(rows: list[dict[str, Any]], is_record: Any) -> int:
    return max((at for at, row in enumerate(rows) if is_record(row)), default=0)


def from_newest_compaction_block(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the Messages API reads: every block before the newest compaction block that holds a summary is ignored."""
    for at in range(len(messages) - 1, -1, -1):
        content = messages[at].get("content")
        blocks = content if isinstance(content, list) else []
        for index in range(len(blocks) - 1, -1, -1):
            if isinstance(blocks[index], dict) and blocks[index].get("type") == "compaction" \
                    and isinstance(blocks[index].get("content"), str):
                return [{**messages[at], "content": blocks[index:]}, *messages[at + 1:]]
    return messages


def codex_history(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items Codex resumes with: from the newest compaction (a replacement_history replaces all before it)."""
    def replaces(row: dict[str, Any]) -> bool:
        payload = row.get("payload")
        return isinstance(payload, dict) and (row.get("type") == "compacted" and "replacement_history" in payload
                                              or row.get("type") == "response_item" and payload.get("type") == "compaction")
    start = _newest(rows, replaces)
    items: list[dict[str, Any]] = []
    for row in rows[start:]:
        if row.get("type") == "compacted" and isinstance(row.get("payload", {}).get("replacement_history"), list):
            items.extend(row["payload"]["replacement_history"])
        elif row.get("type") == "response_item":
            items.append(row["payload"])
        elif "payload" not in row and "record_type" not in row and isinstance(row.get("type"), str):
            items.append(row)
    return items


def claude_code_messages(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages Claude Code sends on --resume: after the last compact_boundary, a reply's lines joined."""
    start = 0
    for at, row in enumerate(rows):
        if row.get("type") == "system" and row.get("subtype") == "compact_boundary":
            start = at + 1
    out: list[dict[str, Any]] = []
    reply_id: Any = None
    for row in rows[start:]:
        if row.get("type") not in ("user", "assistant") or row.get("isSidechain"):
            continue
        message = row["message"]
        content = message.get("content")
        if row["type"] == "assistant" and out and out[-1]["role"] == "assistant" and message.get("id") == reply_id \
                and reply_id is not None and isinstance(content, list):
            out[-1]["content"].extend(content)
            continue
        reply_id = message.get("id") if row["type"] == "assistant" else None
        out.append({"role": message.get("role", row["type"]),
                    "content": list(content) if isinstance(content, list) else content})
    return out


# -- the shipped JSON Schemas (what `compact validate` checks at run time) come from these types ----

SCHEMA_FILES = {
    OPENAI: "provider-openai-chat-message",
    RESPONSES: "provider-responses-input-item",
    ANTHROPIC: "provider-anthropic-message",
    "system": "provider-anthropic-system",
}


def generated_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each SDK request type, as pydantic writes it (shipped in schemas/)."""
    import anthropic
    import openai

    out: dict[str, dict[str, Any]] = {}
    for kind, name in SCHEMA_FILES.items():
        schema = _adapter(kind).json_schema()
        sdk = f"anthropic {anthropic.__version__}" if kind in (ANTHROPIC, "system") else f"openai {openai.__version__}"
        out[name] = {"$comment": f"Generated from the {sdk} SDK request types by tests/sdk_oracle.py "
                                 "(pytest --update-goldens); do not edit.", **schema}
    return out
