"""The budget a run compacts to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MESSAGES = "max_messages"
TOKENS = "max_tokens"
FRACTION = "max_fraction"
UNLIMITED = "unlimited"  # no budget: the trigger, and the mode of a run that compacts nothing



@dataclass(frozen=True)
class Budget:
    """Which trigger is in force and its limit.

    Over budget: more than ``max_messages`` messages, or tokens reaching the
    token limit (``max_tokens``, or ``max_fraction`` of the window).
    """

    trigger: str
    limit: float | None
    window: int
    window_resolved: bool

    @classmethod
    def resolve(
        cls,
        *,
        max_messages: int | None,
        max_tokens: int | None,
        max_fraction: float | None,
        window: int,
        window_resolved: bool,
    ) -> Budget:
        # max_messages wins when combined with a token budget: a count the caller set is a hard cap.
        if max_messages is not None:
            return cls(MESSAGES, max_messages, window, window_resolved)
        if max_tokens is not None:
            return cls(TOKENS, max_tokens, window, window_resolved)
        if max_fraction is not None:
            return cls(FRACTION, max_fraction * window, window, window_resolved)
        return cls(UNLIMITED, None, window, window_resolved)

    @property
    def unlimited(self) -> bool:
        return self.trigger == UNLIMITED

    @property
    def token_limit(self) -> float | None:
        """The limit when it counts tokens (``max_tokens`` or ``max_fraction``); None for a message budget."""
        return self.limit if self.trigger in (TOKENS, FRACTION) else None

    def over(self, messages: int, tokens: int) -> bool:
        if self.limit is None:
            return False
        if self.trigger == MESSAGES:
            return messages > self.limit
        return tokens >= self.limit

    def describe(self) -> str:
        if self.limit is None:
            return UNLIMITED
        if self.trigger == MESSAGES:
            return f"at most {int(self.limit):,} messages"
        if self.trigger == FRACTION:
            return f"under {self.limit / self.window:.0%} of the window ({int(self.limit):,} tokens)"
        return f"under {int(self.limit):,} tokens"

    def to_dict(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "limit": None if self.limit is None else (int(self.limit) if self.trigger != FRACTION else self.limit),
            "unit": "messages" if self.trigger == MESSAGES else ("tokens" if self.limit is not None else None),
            "window": self.window,
            "window_resolved": self.window_resolved,
        }
