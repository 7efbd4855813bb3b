"""OpenAI Chat Completions messages, one per line: the canonical format (SPEC §2).

Reading and writing go through :mod:`core.transcript` (the fast path that
copies untouched lines back from the file); this codec detects the format and
renders other formats' messages as chat messages for ``--to openai``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from core.formats.base import Codec, Decoded, Losses
from core.messages import ROLES, Message

# Content blocks only Anthropic writes; a line holding one is not OpenAI chat.
ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"})
# Parts a chat model cannot take back: dropped on conversion, and counted in the report.
_NOT_CARRIED = {
    "thinking": "thinking blocks (with their signatures)",
    "redacted_thinking": "redacted thinking blocks",
    "reasoning": "reasoning items (encrypted content included)",
    "document": "document blocks",
}


class OpenAIChat(Codec):
    name = "openai"
    title = "OpenAI chat"

    def accepts(self, data: dict[str, Any]) -> bool:
        if data.get("role") not in ROLES or "type" in data:
            return False
        content = data.get("content")
        if isinstance(content, list):
            return not any(isinstance(p, dict) and p.get("type") in ANTHROPIC_BLOCKS for p in content)
        return content is None or isinstance(content, str)

    def evidence(self, data: dict[str, Any]) -> bool:
        return (
            "tool_calls" in data or "tool_call_id" in data or "tool_call_ids" in data
            or "function_call" in data or data.get("role") in ("tool", "function", "developer")
        )

    def decode(self, lines: Any, path: str) -> list[Message]:  # pragma: no cover - read by core.transcript
        raise NotImplementedError("OpenAI chat is read by core.transcript")

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[dict[str, Any] | bytes | memoryview]:
        for message in result:
            yield message.to_bytes()  # an untouched line's own bytes

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        for message in messages:
            yield to_chat(message.data, losses)


def to_chat(data: dict[str, Any], losses: Losses) -> dict[str, Any]:
    """A canonical message with the parts chat cannot carry left out (and counted)."""
    content = data.get("content")
    if not isinstance(content, list):
        return data
    kept: list[Any] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _NOT_CARRIED:
            losses.add(_NOT_CARRIED[kind])
        elif kind == "image" and isinstance(part.get("source"), dict):
            kept.append(_image_url(part["source"]))
        else:
            kept.append(part)
    out = dict(data)
    if not kept and data.get("tool_calls"):
        out["content"] = None
    elif all(isinstance(p, dict) and p.get("type") == "text" for p in kept) and data.get("role") != "tool":
        out["content"] = "\n\n".join(p["text"] for p in kept) if kept else ""
    else:
        out["content"] = kept
    return out


def _image_url(source: dict[str, Any]) -> dict[str, Any]:
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


CODEC = OpenAIChat()
