"""Writing compacted messages back: in the input's format, or rendered fresh in another (``--to``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from core.formats.base import Decoded, Losses
from core.formats.detection import OPENAI
from core.formats.registry import get
from core.messages import CUSTOM_CALL, Message, tool_calls


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
    if target != OPENAI:
        title = get(target).title
        result = [portable(message, losses, title) for message in result]
    if target not in FREE_FORM_CALLS:
        custom = sum(1 for m in result for c in tool_calls(m.data) if c.get("type") == CUSTOM_CALL)
        if custom:
            losses.add(CUSTOM_AS_ARGUMENT, custom)
    items = list(get(target).render(result, losses))
    return items, losses.as_list()


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
