"""OpenAI Chat Completions messages, one per line: the canonical format.

The file is read by :mod:`core.io.transcript`, which keeps each message's
line bytes (or where they are in the file) so an untouched message is copied
back as it was; this codec detects the format, writes the result back, and
renders other formats' messages as chat messages for ``--to openai``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

from core.formats.base import PARENT_RESULTS, Codec, Decoded, Line, Losses, note_failed
from core.io.rawinput import STDIN
from core.io.transcript import check_message, read_transcript
from core.messages import ROLES, Message, wire_message

# Content blocks only Anthropic writes; a line holding one is not OpenAI chat.
ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"})
# Parts a chat model cannot take back: dropped on conversion, and counted in the report.
_NOT_CARRIED = {
    "thinking": "thinking blocks (with their signatures)",
    "redacted_thinking": "redacted thinking blocks",
    "reasoning": "reasoning items (encrypted content included)",
    "document": "document blocks",
    "compaction": "OpenAI's encrypted compaction summaries (readable by OpenAI only), left out",
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

    def read_input(self, path: str, name: str, raw: bytes | None, *, skip_invalid: bool,
                   max_line_bytes: int) -> Decoded:
        transcript = read_transcript(path if raw is None else STDIN, skip_invalid=skip_invalid, name=name,
                                     stdin=None if raw is None else io.BytesIO(raw), max_line_bytes=max_line_bytes)
        return Decoded(name, self.name, [], transcript.messages, transcript.skipped_lines)

    def decode(self, lines: list[Line], path: str) -> list[Message]:
        """Each valid line is a message as it stands (read_input reads a whole file the same way)."""
        messages = []
        for line in lines:
            if line.data is not None:
                check_message(line.data, path, line.number)
                messages.append(Message(data=line.data, line=line.number, source=line.source))
        return messages

    def encode(self, decoded: Decoded, result: Sequence[Message]) -> Iterator[dict[str, Any] | bytes | memoryview]:
        for message in result:
            yield message.to_bytes()  # an untouched line's own bytes

    def render(self, messages: Sequence[Message], losses: Losses) -> Iterator[dict[str, Any]]:
        for message in messages:
            chat = to_chat(message.data, losses)
            if chat is not None:
                note_failed(message, losses)
                yield chat


# The content parts each role may hold in a Chat Completions request.
PARTS_BY_ROLE = {
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
}
TEXT_ONLY = frozenset({"text"})


def to_chat(data: dict[str, Any], losses: Losses) -> dict[str, Any] | None:
    """A canonical message with the parts chat cannot carry left out (and counted); None when it cannot be sent.

    A tool result whose call is not in the transcript (a Claude Code
    sidechain's, answered in the parent session) has no tool_call_id to send.
    """
    role = data.get("role")
    if role == "tool" and data.get("tool_call_id") is None and not data.get("tool_call_ids"):
        losses.add(PARENT_RESULTS)
        return None
    content = data.get("content")
    if not isinstance(content, list):
        return wire_message(data)
    allowed = PARTS_BY_ROLE.get(str(role), TEXT_ONLY)
    kept: list[Any] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            part, kind = {"type": "text", "text": part}, "text"
        elif kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            part, kind = {"type": "text", "text": part["text"]}, "text"
        elif kind == "image" and isinstance(part.get("source"), dict):
            part, kind = _image_url(part["source"]), "image_url"
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            image = {"url": part["image_url"], **({"detail": part["detail"]} if part.get("detail") else {})}
            part, kind = {"type": "image_url", "image_url": image}, "image_url"
        if kind in _NOT_CARRIED:
            losses.add(_NOT_CARRIED[kind])
        elif kind == "image_url" and "image_url" not in allowed:
            losses.add(f"images in {role} messages (chat takes text only there), left out")
        elif kind not in allowed:
            losses.add(f"{kind or 'untyped'} content parts OpenAI chat does not take in {role} messages, left out")
        else:
            kept.append(part)
    out = dict(data)
    if not kept and data.get("tool_calls"):
        out["content"] = None
    elif not kept and role == "tool":
        out["content"] = ""
    elif all(p.get("type") == "text" for p in kept) and role != "tool":
        out["content"] = "\n\n".join(p["text"] for p in kept if isinstance(p.get("text"), str)) if kept else ""
    else:
        out["content"] = kept
    return wire_message(out)


def _image_url(source: dict[str, Any]) -> dict[str, Any]:
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


CODEC = OpenAIChat()
