"""What a provider would be sent for a transcript: its messages or input items, each with the line it came from.

``compact validate --for P`` and ``--check-for P`` judge this, not compact's
canonical reading, so a file is judged as its client sends it:

* a file already in P's wire format is taken as it is: OpenAI chat lines for
  ``openai``; Anthropic lines (a ``{"system": ...}`` line is the top-level
  system) and Claude Code sessions for ``anthropic``; Responses items and
  Codex rollouts for ``responses``. A Claude Code session is what Claude Code
  sends on resume: the ``user``/``assistant`` lines after the last
  ``compact_boundary`` (the earlier ones are not loaded), not on a sidechain,
  the lines of one reply (one ``message.id``) joined into one message. A
  Codex rollout is its ``response_item`` payloads, a reasoning item's
  ``content: null`` left out as Codex leaves it out. With a provider
  compaction record (core.formats.live_part) the request starts at the newest
  one: an Anthropic ``compaction`` block, a Responses ``compaction`` item, a
  Codex ``replacement_history`` (its items);
* any other file is judged as ``compact --to P`` would write it;
* a conversation-per-line dataset is one request per line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.formats.anthropic import is_compaction
from core.formats.base import Decoded, Losses, live_part
from core.messages import Message, held_message, wire_message

OPENAI, ANTHROPIC, RESPONSES = "openai", "anthropic", "responses"
NATIVE = {OPENAI: ("openai",), ANTHROPIC: ("anthropic", "claude-code"), RESPONSES: ("responses", "codex")}


@dataclass
class WireRequest:
    """One request: its items (messages or input items) and the line each came from (None: unknown)."""

    items: list[dict[str, Any]]
    lines: list[int | None]
    system: Any = None  # Anthropic's top-level system parameter
    system_line: int | None = None
    label: str = ""  # "line N" for a conversation of a dataset
    indexes: list[int] = field(default_factory=list)  # for a rendered request: the canonical message of each item


def requests_for(decoded: Decoded, provider: str) -> list[WireRequest]:
    """The request(s) a client would send ``provider`` for this file."""
    from core.formats import DATASET

    if decoded.format == DATASET:
        return [_dataset_request(line, decoded.path, provider) for line in decoded.lines if line.data is not None]
    if decoded.format in NATIVE[provider]:
        return [_native(decoded, provider)]
    return [rendered(decoded.messages, provider)]


def rendered(messages: Sequence[Message], provider: str) -> WireRequest:
    """``messages`` as ``compact --to provider`` writes them, each item with its message's line."""
    from core.formats.anthropic_render import render_traced
    from core.formats.conversion import CALL_ID_LIMITS, fit_call_ids, portable
    from core.formats.openai_chat import to_chat
    from core.formats.registry import get
    from core.formats.responses import custom_call_ids, render_items

    losses = Losses()
    request = WireRequest([], [])
    if provider != OPENAI:  # what convert() does first: a refusal becomes text, other chat fields go
        title = get(provider).title
        messages = [portable(m, losses, title) for m in messages]
    messages = fit_call_ids(messages, CALL_ID_LIMITS.get(provider), losses)
    if provider == ANTHROPIC:
        traced = list(render_traced(messages, losses))
    elif provider == OPENAI:
        traced = [(i, item) for i, m in enumerate(messages) for item in [to_chat(m.data, losses)] if item is not None]
    else:
        custom = custom_call_ids(messages)
        traced = [(i, item) for i, m in enumerate(messages) for item in render_items(m.data, losses, custom)]
    for index, item in traced:
        if provider == ANTHROPIC and "role" not in item:
            request.system, request.system_line = item.get("system"), messages[index].line
            continue
        request.items.append(item)
        request.lines.append(messages[index].line)
        request.indexes.append(index)
    return request


def _native(decoded: Decoded, provider: str) -> WireRequest:
    if decoded.format == "openai":
        return WireRequest([wire_message(m.data) for m in decoded.messages], [m.line for m in decoded.messages])
    rows = [(line.number, line.data) for line in decoded.lines if line.data is not None]
    if decoded.format == "claude-code":
        return claude_code_request(rows)
    request = WireRequest([], [])
    live = live_part(decoded)
    start = live["line"] if live is not None else 0  # the provider reads from its newest compaction record on
    for number, data in rows:
        if decoded.format == "anthropic":
            if "role" not in data and "system" in data:
                request.system, request.system_line = data["system"], number
                continue
            if number < start and data.get("role") != "system":  # (a system message is the system parameter)
                continue
            item = data if number != start else _from_compaction_block(data)
        elif number < start:
            continue
        elif decoded.format == "codex":
            payload = data.get("payload")
            if data.get("type") == "compacted" and isinstance(payload, dict) \
                    and isinstance(payload.get("replacement_history"), list):
                for replaced in payload["replacement_history"]:  # what Codex resumes with
                    request.items.append(codex_sent(replaced) if isinstance(replaced, dict) else replaced)
                    request.lines.append(number)
                continue
            if data.get("type") == "response_item" and isinstance(data.get("payload"), dict):
                item = codex_sent(data["payload"])
            elif _bare_item(data):  # the 2025 layout: Responses items with no envelope
                item = codex_sent(data)
            else:
                continue
        else:
            item = data
        request.items.append(item)
        request.lines.append(number)
    return request


def _from_compaction_block(data: dict[str, Any]) -> dict[str, Any]:
    """The message holding the newest compaction block, as the API reads it: from that block on."""
    content = data.get("content")
    blocks = content if isinstance(content, list) else []
    at = max((i for i, block in enumerate(blocks) if is_compaction(block)), default=0)
    return {**data, "content": blocks[at:]} if at else data


def _bare_item(data: dict[str, Any]) -> bool:
    """A line of a 2025-layout rollout that is a Responses item (not the header, not a state line)."""
    return isinstance(data.get("type"), str) and "payload" not in data and "record_type" not in data


def codex_sent(item: dict[str, Any]) -> dict[str, Any]:
    """A rollout's Responses item as Codex sends it: a null ``id`` (the 2025 layout writes them) and a
    reasoning item's null ``content`` are not sent."""
    if item.get("id", "") is None or (item.get("type") == "reasoning" and "content" in item and item["content"] is None):
        return {k: v for k, v in item.items() if not (k in ("id", "content") and v is None)}
    return item


def live_start(rows: Sequence[tuple[int, dict[str, Any]]]) -> int:
    """Where Claude Code's loaded history starts: after the last compact_boundary line (0 when none)."""
    start = 0
    for at, (_, data) in enumerate(rows):
        if data.get("type") == "system" and data.get("subtype") == "compact_boundary":
            start = at + 1
    return start


def claude_code_request(rows: Sequence[tuple[int, dict[str, Any]]]) -> WireRequest:
    request = WireRequest([], [])
    reply_id: Any = None
    for number, data in rows[live_start(rows):]:
        if data.get("type") not in ("user", "assistant") or data.get("isSidechain") is True:
            continue
        message: dict[str, Any] = data["message"] if isinstance(data.get("message"), dict) else {}
        content = message.get("content")
        same_reply = (data["type"] == "assistant" and reply_id is not None and message.get("id") == reply_id
                      and request.items and isinstance(content, list)
                      and isinstance(request.items[-1]["content"], list))
        if same_reply:
            request.items[-1]["content"].extend(content)
            continue
        reply_id = message.get("id") if data["type"] == "assistant" else None
        request.items.append({"role": message.get("role", data["type"]),
                              "content": list(content) if isinstance(content, list) else content})
        request.lines.append(number)
    return request


def _dataset_request(line: Any, path: str, provider: str) -> WireRequest:
    from core.formats import sharegpt
    from core.formats.base import Line, number

    data = line.data
    if isinstance(data.get("messages"), list):
        if provider == OPENAI:
            request = WireRequest(list(data["messages"]), [line.number] * len(data["messages"]))
        else:  # rendered from the messages as compact reads them (a custom call's input as its arguments)
            request = rendered([Message(data=held_message(m) if isinstance(m, dict) else {"role": None}, line=line.number)
                                for m in data["messages"]], provider)
    else:
        decoded = number(sharegpt.CODEC.decode([Line(line.number, data, line.source)], path))
        request = rendered(decoded, provider)
    request.label = f"line {line.number}"
    return request


@dataclass
class Verdict:
    """The problems of one request (a dataset has one per conversation)."""

    label: str
    items: int
    problems: list[Any]


def validate(decoded: Decoded, provider: str) -> list[Verdict]:
    """Each request's problems for ``provider`` (:func:`core.analysis.provider_check.check_request`)."""
    from core.analysis.provider_check import check_provider, check_request

    check_provider(provider)
    return [Verdict(r.label, len(r.items), check_request(r, provider)) for r in requests_for(decoded, provider)]


def validate_bytes(raw: bytes, written_as: str, provider: str) -> list[Verdict]:
    """:func:`validate` on a transcript compact is about to write (``--check-for``): lines of the result."""
    import io

    from core import formats

    if not raw.strip():  # every message left out (nothing the target could send, in the report): no request
        return [Verdict("", 0, [])]
    return validate(formats.read("-", source_format=written_as, stdin=io.BytesIO(raw)), provider)
