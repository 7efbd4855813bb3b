"""OpenAI Responses items (not written yet: detection never picks it)."""

from __future__ import annotations

from typing import Any

from core.formats.base import Codec


class _Pending(Codec):
    name = "responses"
    title = "OpenAI Responses items"

    def accepts(self, data: dict[str, Any]) -> bool:
        return False

    def evidence(self, data: dict[str, Any]) -> bool:
        return False


CODEC = _Pending()
