"""The CompressionReport: typed here, written as JSON by ``to_dict`` (schemas/report.schema.json).

The actions and the ledger (``removed``) are typed; the other lists and mappings strategies and the
graph step fill (orphans, graph, prompt_cache) stay plain JSON data: each has its own shape, described
in the schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core.counting.tokenizers import EncoderChoice
from core.engine.budget import Budget
from core.engine.ledger import LedgerEntry

REPORT_VERSION = 1
# The closing step that puts back what earlier steps rewrote, when later ones made room (its name in ``actions``).
GIVE_BACK = "give_back"


def line_ranges(lines: list[int]) -> str:
    """2, 3, 4, 7 -> "2-4, 7"."""
    spans: list[list[int]] = []
    for line in sorted(set(lines)):
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


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
class Action:
    """One step's record in the report: which strategy or closing step, in which pass (0: a closing
    step), what it did, and the error that rolled it back (None when it did not fail)."""

    strategy: str
    pass_number: int
    messages_removed: int = 0
    messages_changed: int = 0
    messages_added: int = 0
    messages_offloaded: int = 0
    tokens_saved: int = 0
    detail: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "pass": self.pass_number, "messages_removed": self.messages_removed,
                "messages_changed": self.messages_changed, "messages_added": self.messages_added,
                "messages_offloaded": self.messages_offloaded, "tokens_saved": self.tokens_saved,
                "detail": self.detail, "error": self.error}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Action:
        fields = {key: value for key, value in data.items() if key != "pass"}
        return cls(**fields, pass_number=data["pass"])


def summary_failed(actions: Sequence[Action], calls_a_model: bool) -> bool:
    """The model summarizer failed and no later pass got a summary from it (the run is then exit 4).

    Only a model's failure counts (``calls_a_model``: MemoryConfig.summarizer_calls_a_model; the
    offline summarizer does not fail), and a summary skipped because it would not be smaller than
    its span is in the report's ``skipped``, not an error."""
    if not calls_a_model:
        return False
    summaries = [a for a in actions if a.strategy == "summarize"]
    return any(a.error for a in summaries) and not any(not a.error for a in summaries)


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
    live_part: dict[str, Any] | None = None  # a provider compaction record: core.formats.live_part

    def to_dict(self) -> dict[str, Any]:
        out = {"input": self.input, "output": self.output, "losses": self.losses}
        return out if self.live_part is None else {**out, "provider_compaction": self.live_part}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FormatReport:
        return cls(data["input"], data["output"], data["losses"], data.get("provider_compaction"))


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
    actions: list[Action]
    skipped: list[dict[str, str]]
    last_error: str | None
    warning_appended: bool
    over_budget: bool
    removed: list[LedgerEntry]  # the ledger
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
            if action.error is None:
                names.setdefault(action.strategy, None)
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
            "actions": [action.to_dict() for action in self.actions],
            "skipped": self.skipped,
            "last_error": self.last_error,
            "warning_appended": self.warning_appended,
            "over_budget": self.over_budget,
            "removed": [entry.to_dict() for entry in self.removed],
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
                  if key not in ("encoder", "before", "after", "budget", "format", "actions", "removed")}
        return cls(
            **fields,
            actions=[Action.from_dict(action) for action in data["actions"]],
            removed=[LedgerEntry.from_dict(entry) for entry in data["removed"]],
            encoder=EncoderReport(**data["encoder"]),
            before=Usage(**data["before"]),
            after=Usage(**data["after"]),
            budget=BudgetReport(**budget, floor=floor),
            format=FormatReport.from_dict(data["format"]) if data.get("format") is not None else None,
        )


# -- a conversation-per-line dataset, and a batch ------------------------------------------------

DATASET_REPORT_VERSION = 1
BATCH_REPORT_VERSION = 1


@dataclass(frozen=True)
class ConversationRow:
    """One conversation of a dataset: a row of the dataset report."""

    line: int
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    changed: bool  # False: written back byte for byte
    over_budget: bool
    strategies: list[str]
    summary_failed: bool = False  # written without the summary: the model summarizer failed

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "messages_before": self.messages_before, "messages_after": self.messages_after,
                "tokens_before": self.tokens_before, "tokens_after": self.tokens_after, "changed": self.changed,
                "over_budget": self.over_budget, "strategies": self.strategies, "summary_failed": self.summary_failed}


@dataclass(frozen=True)
class Counts:
    messages: int
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "tokens": self.tokens}


@dataclass(frozen=True)
class DatasetReport:
    """What compacting a conversation-per-line dataset did: the sums and a row per conversation."""

    input: str
    mode: str
    encoder: EncoderReport
    rows: list[ConversationRow]
    skipped_lines: list[dict[str, Any]]
    version: int = DATASET_REPORT_VERSION

    @property
    def conversations(self) -> int:
        return len(self.rows)

    @property
    def changed(self) -> int:
        return sum(1 for r in self.rows if r.changed)

    @property
    def over_budget(self) -> int:
        return sum(1 for r in self.rows if r.over_budget)

    @property
    def summary_failed(self) -> int:
        return sum(1 for r in self.rows if r.summary_failed)

    @property
    def before(self) -> Counts:
        return Counts(sum(r.messages_before for r in self.rows), sum(r.tokens_before for r in self.rows))

    @property
    def after(self) -> Counts:
        return Counts(sum(r.messages_after for r in self.rows), sum(r.tokens_after for r in self.rows))

    @property
    def strategies(self) -> dict[str, int]:
        """Each strategy and the conversations it changed, in the order they first acted."""
        counts: dict[str, int] = {}
        for row in self.rows:
            for name in row.strategies:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (schemas/batch-report.schema.json#/$defs/dataset_report)."""
        return {
            "version": self.version, "kind": "dataset", "input": self.input, "mode": self.mode,
            "encoder": self.encoder.to_dict(), "conversations": self.conversations, "changed": self.changed,
            "over_budget": self.over_budget, "summary_failed": self.summary_failed,
            "before": self.before.to_dict(), "after": self.after.to_dict(),
            "strategies": self.strategies, "skipped_lines": list(self.skipped_lines),
            "rows": [row.to_dict() for row in self.rows],
        }


@dataclass(frozen=True)
class BatchRow:
    """What happened to one input of a batch: a row of the batch report."""

    index: int
    input: str
    output: str
    status: str  # compacted | unchanged | up_to_date | failed
    kind: str | None = None  # transcript | dataset (None when it failed before reading)
    conversations: int = 0
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    strategies: dict[str, int] = field(default_factory=dict)  # conversations each strategy acted on
    over_budget: int = 0  # conversations still over budget
    summary_failed: int = 0  # conversations written without the summary: the summarizer failed
    skipped_lines: int = 0
    error: str | None = None
    error_type: str | None = None
    seconds: float = 0.0
    conversation_rows: list[dict[str, Any]] | None = None  # datasets: ConversationRow.to_dict() of each
    # `tool:` keep rules that pinned nothing in this input (in any of a dataset's conversations), each with why
    unpinned_rules: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchRow:
        return cls(**data)


@dataclass(frozen=True)
class BatchTotals:
    """The sums of a batch: statuses over every input, figures over the inputs not failed."""

    inputs: int
    compacted: int
    unchanged: int
    up_to_date: int
    failed: int
    not_run: int
    conversations: int
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    over_budget: int
    summary_failed: int
    strategies: dict[str, int]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BatchReport:
    """The batch report (schemas/batch-report.schema.json): a row per input and the totals."""

    engine: str
    jobs: int | None
    out: str
    mode: str
    settings_blake2b: str | None
    config: dict[str, Any]
    totals: BatchTotals
    rows: list[BatchRow]
    skipped: list[dict[str, str]] = field(default_factory=list)  # a folder's files that are no transcript: path, reason
    version: int = BATCH_REPORT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "kind": "batch", "engine": self.engine, "jobs": self.jobs, "out": self.out,
                "mode": self.mode, "settings_blake2b": self.settings_blake2b, "config": self.config,
                "totals": self.totals.to_dict(), "rows": [row.to_dict() for row in self.rows],
                "skipped": list(self.skipped)}
