"""The ledger: one typed entry for every message a run removed or rewrote (the report's ``removed``).

An entry is a value: the workspace replaces it (``dataclasses.replace``) rather than editing it, and
the report writes it with ``to_dict`` in the shape schemas/report.schema.json gives the ``removed`` list.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

LedgerAction = Literal["removed", "rewritten"]


@dataclass(frozen=True)
class LedgerEntry:
    """What happened to one message: its original line (None for one compact added), its role, the
    strategy or closing step and the pass (0: a closing step), whether it went or was rewritten, its
    tokens before and after, why, and with a store the handle that recalls its original."""

    line: int | None
    role: str
    strategy: str
    pass_number: int
    action: LedgerAction
    tokens_before: int
    tokens_after: int
    reason: str
    handle: str | None = None  # only with a store: written only then

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, keys in the order the report has always had (``handle`` only when set).

        Made once and shared (a run's report is written, drawn and memoised: each asks for it): not
        to be edited."""
        return self._json

    @cached_property
    def _json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"line": self.line, "role": self.role, "strategy": self.strategy,
                                "pass": self.pass_number, "action": self.action,
                                "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                                "reason": self.reason}
        if self.handle is not None:
            data["handle"] = self.handle
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LedgerEntry:
        """The entry ``to_dict`` wrote (a KeyError or TypeError for another shape)."""
        fields = {key: value for key, value in data.items() if key != "pass"}
        return cls(**fields, pass_number=data["pass"])
