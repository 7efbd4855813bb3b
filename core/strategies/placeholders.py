"""The short texts strategies leave behind; all start with one prefix so a rerun recognises them."""

from __future__ import annotations

from core.messages import PLACEHOLDER_PREFIX, Message

PREFIX = PLACEHOLDER_PREFIX


def is_placeholder(message: Message) -> bool:
    content = message.data.get("content")
    return isinstance(content, str) and content.startswith(PREFIX)


def cleared(tokens: int) -> str:
    return f"{PREFIX} tool result cleared, {tokens:,} tokens]"


def superseded(tool_name: str, path: str, line: int | None) -> str:
    where = f" at line {line}" if line is not None else ""
    return f"{PREFIX} superseded by a newer {tool_name} of {path}{where}]"


def cut(tokens: int) -> str:
    return f"\n[… compact: {tokens:,} tokens cut …]\n"


def with_content(message: Message, text: str) -> dict[str, object]:
    data = dict(message.data)
    data["content"] = text
    return data
