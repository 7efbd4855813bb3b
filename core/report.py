"""The CompressionReport (SPEC §6): a JSON document, schema in schemas/report.schema.json."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.budget import Budget
from core.tokens import EncoderChoice

REPORT_VERSION = 1


def build_report(
    *,
    source: str,
    encoder: EncoderChoice,
    mode: str,
    before: dict[str, int],
    after: dict[str, int],
    budget: Budget,
    floor: dict[str, int],
    triggered: bool,
    passes: int,
    actions: list[dict[str, Any]],
    skipped: list[dict[str, str]],
    errors: Sequence[str],
    warning_appended: bool,
    over_budget: bool,
    ledger: list[dict[str, Any]],
    orphans: dict[str, Any],
    skipped_lines: list[dict[str, Any]],
    graph: dict[str, Any] | None,
    strategies_configured: list[str],
    prompt_cache: dict[str, Any],
) -> dict[str, Any]:
    window = budget.window
    return {
        "version": REPORT_VERSION,
        "input": source,
        "mode": mode,
        "encoder": {
            "requested": encoder.requested,
            "encoding": encoder.encoding,
            "backend": encoder.backend,
            "fallback": encoder.fallback_reason,
        },
        "before": {**before, "window_fraction": round(before["tokens"] / window, 4)},
        "after": {**after, "window_fraction": round(after["tokens"] / window, 4)},
        "budget": {**budget.to_dict(), "description": budget.describe(), "floor": floor},
        "triggered": triggered,
        "passes": passes,
        "strategies": strategies_configured,
        "actions": actions,
        "skipped": skipped,
        "last_error": errors[-1] if errors else None,
        "warning_appended": warning_appended,
        "over_budget": over_budget,
        "removed": ledger,
        "orphans": orphans,
        "skipped_lines": skipped_lines,
        "graph": graph,
        "prompt_cache": prompt_cache,
    }
