"""What every strategy module declares: its name, parameters, seam and apply function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.engine.workspace import Workspace

# A strategy acts on the workspace and returns a short sentence saying what it did.
ApplyFn = Callable[..., str]


@dataclass(frozen=True)
class Param:
    name: str
    type: type
    default: Any
    help: str


@dataclass(frozen=True)
class StrategyInfo:
    name: str
    alias: str
    summary: str
    params: tuple[Param, ...]
    apply: ApplyFn
    # The extension seam the strategy needs ("store", "summarizer"); None when it needs none.
    needs: str | None = None
    # It keeps only the newest messages that fit (a sliding window): strategies before it leave
    # alone what it removes anyway (fit.must_go_before).
    cuts_to_newest: bool = False

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def run(self, workspace: Workspace, params: dict[str, Any]) -> str:
        return self.apply(workspace, **{**self.defaults(), **params})
