"""Conversation-per-line datasets: detected here, compacted by core.batch.dataset_run.

Each line is one whole conversation beside any other fields: OpenAI chat
``{"messages": [...], ...}`` (tau-bench, fine-tuning sets) or ShareGPT
``{"conversations": [...], "tools"?, "system"?, ...}`` (LLaMA-Factory); a
dataset may mix the two. Every such line fits this format, but a single
ShareGPT conversation line is read as the ``sharegpt`` format (one
transcript): core.formats.detect makes a file with more than one
``conversations`` line a dataset.
"""

from __future__ import annotations

from typing import Any

from core.errors import InputError
from core.formats.base import Codec, Decoded
from core.io import rawinput

NAME = "dataset"


def is_chat_conversation(data: Any) -> bool:
    """``{"messages": [...]}`` and no ``role`` (a message with a stray field is not a conversation)."""
    return isinstance(data, dict) and isinstance(data.get("messages"), list) and "role" not in data


def is_sharegpt_conversation(data: Any) -> bool:
    """``{"conversations": [...]}`` with none of the other formats' keys."""
    return (isinstance(data, dict) and isinstance(data.get("conversations"), list)
            and not any(key in data for key in ("role", "type", "messages")))


def is_conversation(data: Any) -> bool:
    return is_chat_conversation(data) or is_sharegpt_conversation(data)


class Dataset(Codec):
    name = NAME
    title = "a conversation-per-line dataset"

    def accepts(self, data: dict[str, Any]) -> bool:
        return is_conversation(data)

    def evidence(self, data: dict[str, Any]) -> bool:
        return True

    def read_input(self, path: str, name: str, raw: bytes | None, *, skip_invalid: bool,
                   max_line_bytes: int) -> Decoded:
        return read_dataset(name, rawinput.whole(path, raw))


def read_dataset(name: str, raw: bytes) -> Decoded:
    """A dataset's lines, unread: core.batch.dataset_run compacts each line's conversation and checks the lines."""
    lines = rawinput.split_lines(raw, skip_invalid=True, path=name)
    if not lines:  # (as a transcript is refused: writing an empty dataset would hide the mistake)
        what = "is empty" if not raw.removeprefix(b"\xef\xbb\xbf") else "holds only blank lines"
        raise InputError(f"the file {what}; a dataset needs at least one conversation", path=name)
    return Decoded(name, NAME, lines, [], [])


CODEC = Dataset()
