"""Writing compacted messages back: in the input's format, or rendered fresh in another (``--to``)."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from core.formats.anthropic import is_compaction
from core.formats.base import Decoded, Losses
from core.formats.detection import OPENAI
from core.formats.registry import get
from core.formats.responses import is_compaction_item
from core.messages import CUSTOM_CALL, Message, result_ids, tool_calls


def write(decoded: Decoded, result: Sequence[Message]) -> Iterator[bytes]:
    """The output bytes: ``result`` written back in the input's format."""
    codec = get(decoded.format)
    return codec.serialise(codec.encode(decoded, result))


def convert(decoded: Decoded, result: Sequence[Message], target: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``result`` rendered fresh in ``target``'s format, and what that could not carry (for the report).

    Rendered once, up front: the report, which names the losses, is staged
    before the transcript is written.
    """
    losses = Losses()
    for what, dropped in get(decoded.format).unread(decoded):
        if dropped:
            losses.add(what, dropped)
    result = [as_summary_text(message, losses) for message in result]
    if target not in CARRIES_COMPACTION_ITEMS:
        result = [kept for kept in (without_compaction_items(m, losses) for m in result) if kept is not None]
    if target != OPENAI:
        title = get(target).title
        result = [portable(message, losses, title) for message in result]
    result = fit_call_ids(result, CALL_ID_LIMITS.get(target), losses)
    if target not in FREE_FORM_CALLS:
        custom = sum(1 for m in result for c in tool_calls(m.data) if c.get("type") == CUSTOM_CALL)
        if custom:
            losses.add(CUSTOM_AS_ARGUMENT, custom)
    items = list(get(target).render(result, losses))
    return items, losses.as_list()


def reads_no_message(items: Sequence[Any], target: str) -> bool:
    """True when compact would read no message back from ``items`` rendered in ``target`` (a Codex exec
    stream prints no user or system message: a session of only those converts to an empty stream)."""
    from core.errors import CompactError
    from core.formats.decoding import UNFORESEEN
    from core.io.rawinput import Line

    if not all(isinstance(item, dict) for item in items):
        return False
    try:  # a copy: a reader may normalise what it reads in place
        probe = orjson.loads(orjson.dumps(items))
    except TypeError:  # a lone surrogate orjson refuses (the writer escapes it as JSON.stringify does)
        probe = copy.deepcopy(items)
    try:
        return not get(target).decode([Line(n, item, b"") for n, item in enumerate(probe, 1)], "<converted>")
    except (CompactError, *UNFORESEEN):
        return False  # (the reader's own complaint is not this check's to make)


# Only the Messages API reads its compaction block (and checks its signature): elsewhere its summary is text.
COMPACTION_AS_TEXT = "Anthropic compaction blocks (signed, read by the Messages API only), written as their summary text"


def as_summary_text(message: Message, losses: Losses) -> Message:
    """A summary holding Anthropic compaction blocks, written fresh: their summaries as its text."""
    content = message.data.get("content")
    if not isinstance(content, list) or not any(is_compaction(p) for p in content):
        return message
    blocks = [p for p in content if is_compaction(p)]
    losses.add(COMPACTION_AS_TEXT, len(blocks))
    parts = [{"type": "text", "text": p["content"]} if p in blocks else p for p in content]
    text = parts[0]["text"] if len(parts) == 1 else parts
    return Message({**message.data, "content": text}, message.line, None, 0, message.extra)


# OpenAI's compaction item is encrypted for OpenAI: only a Responses input carries it.
CARRIES_COMPACTION_ITEMS = frozenset({"responses", "codex"})
COMPACTION_ITEMS_LEFT_OUT = "OpenAI's encrypted compaction summaries (readable by OpenAI only), left out"


def without_compaction_items(message: Message, losses: Losses) -> Message | None:
    """A message less its OpenAI compaction items (None when nothing else was in it), counted as lost."""
    content = message.data.get("content")
    if not isinstance(content, list) or not any(is_compaction_item(p) for p in content):
        return message
    rest = [p for p in content if not is_compaction_item(p)]
    losses.add(COMPACTION_ITEMS_LEFT_OUT, len(content) - len(rest))
    if not rest and not tool_calls(message.data):
        return None
    return Message({**message.data, "content": rest}, message.line, None, 0, message.extra)


# The targets that have custom (free-form) tool calls; the others get an ordinary call whose one
# argument is the text.
FREE_FORM_CALLS = frozenset({OPENAI, "responses", "codex"})
CUSTOM_AS_ARGUMENT = "custom (free-form) tool calls, written as ordinary calls with the text as their one argument, input"
REFUSAL_AS_TEXT = "refusals (written as assistant text: the format has no refusal field)"
NAMES_LEFT_OUT = "participant names (the format has no field for them), left out"


# What every target carries of a chat message (a tool message's name is its tool's); the legacy
# function_call each target reports itself.
_CARRIED = frozenset({"role", "content", "tool_calls", "tool_call_id", "tool_call_ids", "function_call"})


def portable(message: Message, losses: Losses, title: str) -> Message:
    """A chat message with only the fields other formats have: a refusal is what the assistant
    said, so it becomes its text; a participant's ``name`` and any other field (SWE-agent's
    ``thought``, ``action``) are left out, and counted."""
    data = message.data
    refusal = data.get("refusal")
    tool = data.get("role") in ("tool", "function")
    named = not tool and _holds(data.get("name"))
    content = data.get("content")
    refusals = [p for p in content if isinstance(p, dict) and p.get("type") == "refusal"] if isinstance(content, list) else []
    others = sorted(k for k in data if k not in _CARRIED and k not in ("refusal", "name") and _holds(data[k]))
    if not refusals and all(k in _CARRIED or (k == "name" and tool) for k in data):
        return message
    out = {k: v for k, v in data.items() if k in _CARRIED or (k == "name" and tool)}
    if others:
        losses.add(f"message fields {title} has no place for ({', '.join(others)})")
    if refusals:  # a refusal part: the same words, as a text part every format takes (an empty one goes)
        said = [p for p in refusals if _holds(p.get("refusal"))]
        if said:
            losses.add(REFUSAL_AS_TEXT, len(said))
        out["content"] = [{"type": "text", "text": str(p["refusal"])} if p in said else p
                          for p in data["content"] if p not in refusals or p in said]
    if named:
        losses.add(NAMES_LEFT_OUT)
    if isinstance(refusal, str) and refusal.strip():
        losses.add(REFUSAL_AS_TEXT)
        content = out.get("content")
        if isinstance(content, list):
            out["content"] = [*content, {"type": "text", "text": refusal}]
        else:
            out["content"] = f"{content}\n\n{refusal}" if isinstance(content, str) and content.strip() else refusal
    return Message(out, message.line, None, 0, message.extra)


def _holds(value: Any) -> bool:
    """Whether a field says anything: null, "", [] and {} (OpenAI's empty ``annotations``) do not."""
    return value is not None and value != "" and value != [] and value != {}


# The longest tool call id each target's API takes: Chat Completions refuses an id over 40 characters
# ("string too long. Expected a string with maximum length 40"), Responses a call_id over 64 (Codex
# sends its rollout's call_ids to it). core.analysis.provider_check judges ids by the same table. Gemini CLI names a call
# "<tool>-<ms>-<hex>" (44 characters for run_shell_command); pi keeps a Responses call as
# "<call_id>|<item id>" (about 80).
CALL_ID_LIMITS = {OPENAI: 40, "responses": 64, "codex": 64}
IDS_SHORTENED = "tool call ids longer than the API takes, shortened (their results name them so too)"


def fit_call_ids(messages: Sequence[Message], limit: int | None, losses: Losses) -> list[Message]:
    """``messages`` with every call id over ``limit`` characters shortened, in its call and its results alike.

    A shortened id keeps its head, readable, and ends in a hash of the whole id, so two long ids
    sharing a head stay apart; an id already in the transcript is never taken.
    """
    if limit is None:
        return list(messages)
    ids = {str(c.get("id")) for m in messages for c in tool_calls(m.data) if c.get("id") is not None}
    ids.update(i for m in messages for i in result_ids(m.data))
    long = sorted(i for i in ids if len(i) > limit)
    if not long:
        return list(messages)
    taken = {i for i in ids if len(i) <= limit}
    short: dict[str, str] = {}
    for original in long:
        salt = 0
        while True:
            digest = hashlib.sha256(f"{original}\0{salt}".encode()).hexdigest()[:10]
            new = f"{original[:limit - len(digest) - 1]}_{digest}"
            if new not in taken:
                break
            salt += 1
        taken.add(new)
        short[original] = new
    out = []
    for message in messages:
        data = message.data
        calls = tool_calls(data)
        if any(str(c.get("id")) in short for c in calls):
            data = {**data, "tool_calls": [{**c, "id": short[str(c.get("id"))]}
                                           if isinstance(c, dict) and str(c.get("id")) in short else c
                                           for c in data["tool_calls"]]}
            losses.add(IDS_SHORTENED, sum(1 for c in calls if str(c.get("id")) in short))
        if data.get("role") == "tool" and isinstance(data.get("tool_call_id"), str) and data["tool_call_id"] in short:
            data = {**data, "tool_call_id": short[data["tool_call_id"]]}
        elif data.get("role") == "tool" and isinstance(data.get("tool_call_ids"), list) \
                and any(str(i) in short for i in data["tool_call_ids"]):
            data = {**data, "tool_call_ids": [short.get(str(i), i) for i in data["tool_call_ids"]]}
        out.append(message if data is message.data else message.rewritten(data))
    return out
