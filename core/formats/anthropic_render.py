"""Canonical messages written fresh as Anthropic Messages API lines (``--to anthropic``, core.formats.anthropic).

Only what the Messages API takes is written: the block types a request may
carry, tool results answering a call in the transcript, roles alternating
(messages of one role in a row are merged); what cannot be carried is counted
in the losses.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from core.formats.anthropic import (
    CARRIED,
    COMPACT_PREFIXES,
    first_text,
    image_block,
    to_blocks,
    use_block,
)
from core.formats.base import EMPTY_LEFT_OUT, PARENT_RESULTS, Losses, says_nothing
from core.messages import FAILED, Message, is_summary, result_ids, tool_calls

# Block types a request may carry, and the ones a tool_result's content may hold.
SENDABLE = frozenset({
    "text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use", "tool_result",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result",
    "container_upload", "mcp_tool_use", "mcp_tool_result",
})
RESULT_SENDABLE = frozenset({"text", "image", "document", "search_result"})
TEXT_ONLY = frozenset({"text"})


def render_traced(messages: Sequence[Message], losses: Losses) -> Iterator[tuple[int, dict[str, Any]]]:
    """``messages`` as Anthropic lines, each with the index of the message it starts from.

    The Messages API takes user and assistant turns: consecutive messages of
    one side are merged into one (tool results, then the text after them),
    blocks it cannot take are left out and counted in ``losses`` (reasoning
    items, thinking without its signature, unknown blocks), a message left
    with nothing to send is not written, and a conversation that opens with
    the assistant gets a one-line user turn of compact's own first.
    """
    out: list[tuple[int, dict[str, Any]]] = []
    first = True
    ids = CallIds(losses)
    for index, message in enumerate(messages):
        data = ids.apply(message.data)
        role = data.get("role")
        extra_keys = [k for k in data if k not in CARRIED]
        if extra_keys:
            losses.add("message fields Anthropic Messages has no place for (" + ", ".join(sorted(extra_keys)) + ")")
        if role == "tool":
            if not result_ids(data):
                losses.add(PARENT_RESULTS)
            else:
                _append(out, index, "user", [render_result(Message(data, extra=message.extra), losses)])
        elif role in ("system", "developer"):
            own = is_summary(message) or first_text(data.get("content")).startswith(COMPACT_PREFIXES)
            content = data.get("content")
            if first and not own:
                system = sendable_blocks(content, losses, only=TEXT_ONLY)
                out.append((index, {"system": content if isinstance(content, str) else system}))
            else:
                if not own:
                    losses.add("system messages after the first (written as user text)")
                _append(out, index, "user", sendable_blocks(data.get("content"), losses), keep=data.get("content"))
        elif role in ("assistant", "user") and says_nothing(data):
            losses.add(EMPTY_LEFT_OUT)
        elif role == "assistant":
            _append(out, index, "assistant", render_assistant(data, losses), keep=data.get("content"))
        elif role == "user":
            _append(out, index, "user", sendable_blocks(data.get("content"), losses), keep=data.get("content"))
        else:
            losses.add(f"{role or 'role-less'} messages")
        first = False
    _open_with_user(out, losses)
    yield from out


OPENING_NOTE = "CUCA note: the conversation opens with the assistant's message below."
OPENING_ADDED = "a user turn added before the opening assistant message (Anthropic wants a user message first)"


def _open_with_user(out: list[tuple[int, dict[str, Any]]], losses: Losses) -> None:
    """The API refuses a first message that is not the user's: put a short note of compact's own before it."""
    at = next((i for i, (_, item) in enumerate(out) if "role" in item), None)
    if at is not None and out[at][1]["role"] == "assistant":
        out.insert(at, (out[at][0], {"role": "user", "content": OPENING_NOTE}))
        losses.add(OPENING_ADDED)


class CallIds:
    """tool_use ids as the API wants them: ``[a-zA-Z0-9_-]+`` and unique (a reused id is renamed, its result too)."""

    def __init__(self, losses: Losses) -> None:
        self.losses = losses
        self.used: set[str] = set()
        self.current: dict[str, str] = {}

    def apply(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("role") == "assistant" and tool_calls(data):
            calls = [self._call(dict(c)) for c in tool_calls(data)]
            return {**data, "tool_calls": calls}
        if data.get("role") == "tool" and isinstance(data.get("tool_call_id"), str):
            return {**data, "tool_call_id": self.current.get(data["tool_call_id"], data["tool_call_id"])}
        if data.get("role") == "tool" and isinstance(data.get("tool_call_ids"), list):
            return {**data, "tool_call_ids": [self.current.get(str(i), i) for i in data["tool_call_ids"]]}
        return data

    def _call(self, call: dict[str, Any]) -> dict[str, Any]:
        original = str(call.get("id") or "")
        new = re.sub(r"[^a-zA-Z0-9_-]", "_", original) or "call"
        base, n = new, 1
        while new in self.used:
            n += 1
            new = f"{base}_{n}"
        if new != original:
            self.losses.add("tool call ids renamed (reused, or with characters Anthropic refuses)")
        self.used.add(new)
        self.current[original] = new
        call["id"] = new
        return call


def _append(out: list[tuple[int, dict[str, Any]]], index: int, role: str, blocks: list[Any], keep: Any = None) -> None:
    """Add a message, or merge it into the previous one of the same side (tool results stay first)."""
    if isinstance(blocks, str):  # render_assistant's plain text
        blocks, keep = [{"type": "text", "text": blocks}], blocks
    if not blocks:
        return
    if out and out[-1][1].get("role") == role:
        previous = out[-1][1]
        merged = to_blocks(previous["content"]) if isinstance(previous["content"], str) else previous["content"]
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            at = next((i for i, b in enumerate(merged) if not (isinstance(b, dict) and b.get("type") == "tool_result")),
                      len(merged))
            merged[at:at] = results
            blocks = [b for b in blocks if b not in results]
        previous["content"] = merged + blocks
        return
    single_text = isinstance(keep, str) and len(blocks) == 1 and blocks[0].get("type") == "text"
    out.append((index, {"role": role, "content": keep if single_text else blocks}))


def sendable_blocks(content: Any, losses: Losses, *, only: frozenset[str] = SENDABLE) -> list[Any]:
    """Canonical content as blocks the API takes; what it cannot take is left out and counted."""
    blocks: list[Any] = []
    for block in to_blocks(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "reasoning":
            losses.add("reasoning items (encrypted content included), left out")
        elif kind == "compaction":
            losses.add("OpenAI's encrypted compaction summaries (readable by OpenAI only), left out")
        elif kind == "thinking" and not (isinstance(block.get("signature"), str) and isinstance(block.get("thinking"), str)):
            losses.add("thinking blocks without an Anthropic signature, left out")
        elif kind == "text" and not str(block.get("text", "")).strip():
            continue  # the API refuses an empty text block; it carried nothing
        elif kind in ("image_url", "input_image"):
            blocks.append(image_block({"image_url": block.get("image_url")}))
        elif kind not in only:
            losses.add(f"{kind or 'untyped'} content parts Anthropic Messages does not take, left out")
        else:
            blocks.append(block)
    return blocks


def render_result(message: Message, losses: Losses) -> dict[str, Any]:
    """A canonical tool message as a ``tool_result`` block (content the block cannot hold left out)."""
    content = message.data.get("content")
    ids = result_ids(message.data)
    if len(ids) > 1:
        losses.add("tool results answering several calls (tied to the first)")
    tool_use_id = ids[0] if ids else message.extra.get("native_id") or ""
    if content is None or isinstance(content, str):
        body: Any = content or ""
    else:
        body = sendable_blocks(content, losses, only=RESULT_SENDABLE)
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": body}
    return {**block, "is_error": True} if message.extra.get(FAILED) else block


def render_assistant(data: dict[str, Any], losses: Losses | None = None) -> Any:
    calls = tool_calls(data)
    content = data.get("content")
    if not calls and isinstance(content, str) and content.strip():
        return content
    return sendable_blocks(content, losses if losses is not None else Losses()) + [use_block(c) for c in calls]
