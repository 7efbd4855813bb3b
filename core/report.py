"""The CompressionReport (SPEC §6): typed here, written as JSON by ``to_dict`` (schemas/report.schema.json).

The lists and mappings strategies and the graph step fill (actions, removed, orphans, graph,
prompt_cache) stay plain JSON data: each has its own shape, described in the schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.counting.tokenizers import EncoderChoice
from core.engine.budget import Budget

REPORT_VERSION = 1


@dataclass(frozen=True)
class EncoderReport:
    requested: str
    encoding: str
    backend: str
    fallback: str | None

    @classmethod
    def of(cls, choice: EncoderChoice) -> EncoderReport:
        return cls(choice.requested, choice.encoding, choice.backend, choice.fallback_reason)

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "encoding": self.encoding, "backend": self.backend,
                "fallback": self.fallback}


@dataclass(frozen=True)
class Usage:
    messages: int
    tokens: int
    window_fraction: float

    @classmethod
    def of(cls, messages: int, tokens: int, window: int) -> Usage:
        return cls(messages, tokens, round(tokens / window, 4))

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "tokens": self.tokens, "window_fraction": self.window_fraction}


@dataclass(frozen=True)
class Floor:
    """What no strategy may remove: pinned messages and the calls and results paired with them."""

    messages: int
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "tokens": self.tokens}


@dataclass(frozen=True)
class BudgetReport:
    trigger: str
    limit: float | None
    unit: str | None
    window: int
    window_resolved: bool
    description: str
    floor: Floor

    @classmethod
    def of(cls, budget: Budget, floor: Floor) -> BudgetReport:
        return cls(**budget.to_dict(), description=budget.describe(), floor=floor)

    def to_dict(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "limit": self.limit, "unit": self.unit, "window": self.window,
                "window_resolved": self.window_resolved, "description": self.description,
                "floor": self.floor.to_dict()}


@dataclass(frozen=True)
class FormatReport:
    """The format read and written, and what a conversion (--to) could not carry."""

    input: str
    output: str
    losses: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "losses": self.losses}


@dataclass(frozen=True)
class CompressionReport:
    input: str
    mode: str
    encoder: EncoderReport
    before: Usage
    after: Usage
    budget: BudgetReport
    triggered: bool
    passes: int
    strategies: list[str]  # the configured list, as spelled in a config file
    actions: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    last_error: str | None
    warning_appended: bool
    over_budget: bool
    removed: list[dict[str, Any]]
    orphans: dict[str, Any]
    skipped_lines: list[dict[str, Any]]
    graph: dict[str, Any] | None
    prompt_cache: dict[str, Any]
    format: FormatReport | None = None  # None when the pipeline ran without the file reader
    version: int = REPORT_VERSION

    def acted(self) -> list[str]:
        """The strategies that changed something, in the order they first acted."""
        names: dict[str, None] = {}
        for action in self.actions:
            if action["error"] is None:
                names.setdefault(action["strategy"], None)
        return list(names)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document, keys in the order the golden files and `--report` have always had."""
        data = {
            "version": self.version,
            "input": self.input,
            "mode": self.mode,
            "encoder": self.encoder.to_dict(),
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "budget": self.budget.to_dict(),
            "triggered": self.triggered,
            "passes": self.passes,
            "strategies": self.strategies,
            "actions": self.actions,
            "skipped": self.skipped,
            "last_error": self.last_error,
            "warning_appended": self.warning_appended,
            "over_budget": self.over_budget,
            "removed": self.removed,
            "orphans": self.orphans,
            "skipped_lines": self.skipped_lines,
            "graph": self.graph,
            "prompt_cache": self.prompt_cache,
        }
        if self.format is not None:
            data["format"] = self.format.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompressionReport:
        """The report ``to_dict`` wrote (the run memo stores it as JSON)."""
        budget = dict(data["budget"])
        floor = Floor(**budget.pop("floor"))
        fields = {key: value for key, value in data.items()
                  if key not in ("encoder", "before", "after", "budget", "format")}
        return cls(
            **fields,
            encoder=EncoderReport(**data["encoder"]),
            before=Usage(**data["before"]),
            after=Usage(**data["after"]),
            budget=BudgetReport(**budget, floor=floor),
            format=FormatReport(**data["format"]) if data.get("format") is not None else None,
        )
