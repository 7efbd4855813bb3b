"""The vocabulary of OpenAI Responses items (core.formats.responses): what each item is, and content and calls
converted between items and canonical messages."""

from __future__ import annotations

import re
from typing import Any

from core.formats.base import Losses
from core.io import jsonio
from core.messages import CUSTOM_CALL

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text")
CONTENT_PARTS = frozenset({*TEXT_PARTS, "refusal", "input_image", "input_file", "input_audio"})
INPUT_PARTS = frozenset({"input_text", "input_image", "input_file"})
# Keys other formats put on their lines: a line holding one is not a bare Responses item.
FOREIGN_KEYS = frozenset({
    "payload", "message", "uuid", "parentUuid", "sessionId", "timestamp",
    "tool_calls", "tool_call_id", "messages", "conversations",
})
_ITEM_TYPE = re.compile(r"^[a-z][a-z0-9_]*$")

# A 1x1 transparent PNG: what a cleared computer_call_output holds (its output must be a screenshot).
BLANK_SCREENSHOT = {
    "type": "computer_screenshot",
    "image_url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
}
COMPACTION = "compaction"  # OpenAI's encrypted summary of earlier turns (the /responses/compact endpoint)

# What an item is to the reader.
MESSAGE, REASONING, CALL, OUTPUT, HOSTED, OTHER = "message", "reasoning", "call", "output", "hosted", "other"


def item_kind(item: dict[str, Any]) -> str:
    kind = item.get("type", MESSAGE if "role" in item else None)
    if kind == MESSAGE or kind == REASONING:
        return str(kind)
    if isinstance(kind, str):
        if kind.endswith("_call_output"):
            return OUTPUT
        if kind.endswith("_call"):
            return CALL if "call_id" in item else HOSTED
    return OTHER


def _content_fits(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in CONTENT_PARTS for p in content)


def accepts_item(data: dict[str, Any]) -> bool:
    """Could this line be a Responses item (known or not)?"""
    if not FOREIGN_KEYS.isdisjoint(data):
        return False
    kind = data.get("type")
    if kind is None or kind == MESSAGE:
        return data.get("role") in MESSAGE_ROLES and _content_fits(data.get("content"))
    return isinstance(kind, str) and _ITEM_TYPE.match(kind) is not None


# Item types of the Responses API that are neither messages nor calls: known, passed through unread.
KNOWN_OTHER_ITEMS = frozenset({
    "item_reference", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "compaction",
})


def knows_item(data: dict[str, Any]) -> bool:
    """Is this line a Responses item the API defines (and not merely one with a plausible ``type``)?"""
    return accepts_item(data) and (item_kind(data) != OTHER or data.get("type") in KNOWN_OTHER_ITEMS)


def shows_item(data: dict[str, Any]) -> bool:
    """Does this line show the file holds Responses items (a typed message, a call, an output, reasoning)?"""
    if not accepts_item(data) or "type" not in data:
        return False
    return item_kind(data) != OTHER


# --- content -----------------------------------------------------------------------------------

def _is_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str)


def is_item_part(part: Any) -> bool:
    """A content part that is a whole item kept verbatim (reasoning, a hosted tool call)."""
    return isinstance(part, dict) and isinstance(part.get("type"), str) and (
        part["type"] == REASONING or part["type"].endswith("_call"))


def canonical_parts(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, dict):  # a computer_call_output screenshot
        return [content]
    return [{"type": "text", "text": p["text"]} if _is_text(p) else p for p in content]


def canonical_content(parts: list[Any]) -> Any:
    """Canonical parts as a message's content: one text part reads as a string, none as None."""
    if not parts:
        return None
    if len(parts) == 1 and isinstance(parts[0], dict) and parts[0].get("type") == "text":
        return parts[0]["text"]
    return parts


def as_parts(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else [content]


def native_content(content: Any, original: Any, text_type: str, losses: Losses | None = None) -> Any:
    """Canonical content written as Responses content, keeping the original parts' other fields.

    ``text_type`` is the part type text becomes (``input_text``, ``output_text``), or
    ``output`` for a call's output (``input_text`` parts, or a plain string).
    """
    if isinstance(content, str) and (isinstance(original, str) or text_type == "output"):
        return content  # the short form, or a call output (always allowed to be a string)
    before = original if isinstance(original, list) else []
    kind = "input_text" if text_type == "output" else text_type
    out: list[Any] = []
    for i, part in enumerate(as_parts(content)):
        if isinstance(part, dict) and part.get("type") == "text":
            base = before[i] if i < len(before) and _is_text(before[i]) else {"type": kind}
            out.append({**base, "text": part.get("text", "")})
        else:
            converted = _native_part(part, losses)
            if converted is not None:
                out.append(converted)
    if isinstance(original, dict) and out == [original]:
        return original
    return out


NOT_CARRIED = {
    "thinking": "thinking blocks (with their signatures)",
    "redacted_thinking": "redacted thinking blocks",
    "document": "document blocks",
}


def _native_part(part: Any, losses: Losses | None) -> Any:
    if not isinstance(part, dict):
        return {"type": "input_text", "text": str(part)}
    kind = part.get("type")
    if kind == "image_url":
        url = part.get("image_url")
        detail = url.get("detail", "auto") if isinstance(url, dict) else "auto"
        return {"type": "input_image", "image_url": url.get("url", "") if isinstance(url, dict) else str(url),
                "detail": detail}
    if kind == "image" and isinstance(part.get("source"), dict):
        source = part["source"]
        url = (f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
               if source.get("type") == "base64" else str(source.get("url", "")))
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if kind in NOT_CARRIED:
        if losses is not None:
            losses.add(NOT_CARRIED[kind])
        return None
    if losses is not None and kind not in INPUT_PARTS:  # written fresh: only what an input message takes
        losses.add(f"{kind or 'untyped'} content parts a Responses input message does not take, left out")
        return None
    return part


# --- calls ---------------------------------------------------------------------------------------

def canonical_call(item: dict[str, Any]) -> dict[str, Any]:
    kind = str(item.get("type", "function_call"))
    name = item["name"] if isinstance(item.get("name"), str) else kind.removesuffix("_call")
    if isinstance(item.get("arguments"), str):
        arguments = item["arguments"]
    elif isinstance(item.get("input"), str):  # custom_tool_call: free-form input
        arguments = item["input"]
    else:
        payload = item.get("arguments", item.get("action", item.get("input")))
        arguments = "" if payload is None else jsonio.dumps(payload).decode()
    return {"id": item["call_id"], "type": CUSTOM_CALL if kind == "custom_tool_call" else "function",
            "function": {"name": name, "arguments": arguments}}


def with_call(item: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    name, arguments = function.get("name"), function.get("arguments")
    out = dict(item)
    if isinstance(name, str) and "name" in item:
        out["name"] = name
    if isinstance(arguments, str):
        if isinstance(item.get("arguments"), str):
            out["arguments"] = arguments
        elif isinstance(item.get("input"), str):
            out["input"] = arguments
    return out
