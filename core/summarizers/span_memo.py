"""What a step remembers of each message between the summaries it composes of overlapping spans.

A run may compose one span's summary several times (to fit, to keep its newest exchange, to top
up). Reading a message again is the cost, and hashing its contents would cost as much, so the
memo holds each message by the object itself: a value is found again only for the very same
object (never for another that took its place in memory), and ``renewed`` leaves it holding one
span's messages only, so a long session's memo does not grow with every span it tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")


class SpanMemo(Generic[Value]):
    """A value per message object, for the spans of one step."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[Mapping[str, Any], Value]] = {}

    def get(self, message: Mapping[str, Any]) -> Value | None:
        held = self._held.get(id(message))
        return held[1] if held is not None and held[0] is message else None

    def put(self, message: Mapping[str, Any], value: Value) -> None:
        self._held[id(message)] = (message, value)

    def renewed(self) -> SpanMemo[Value]:
        """What it held, as a memo to read from; it is left empty, to hold the next span's values."""
        earlier: SpanMemo[Value] = SpanMemo()
        earlier._held, self._held = self._held, {}
        return earlier
