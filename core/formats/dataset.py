"""Conversation-per-line datasets (`{"messages": [...], ...}` on each line): detected here, compacted by core.dataset."""

from __future__ import annotations

from typing import Any

from core.formats.base import Codec

NAME = "dataset"


class Dataset(Codec):
    name = NAME
    title = "a conversation-per-line dataset"

    def accepts(self, data: dict[str, Any]) -> bool:
        return isinstance(data.get("messages"), list) and "role" not in data

    def evidence(self, data: dict[str, Any]) -> bool:
        return True


CODEC = Dataset()
