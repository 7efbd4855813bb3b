"""The typed CompressionReport: to_dict is the shipped schema's document, and from_dict reads it back."""

from __future__ import annotations

import json

import pytest

from core.api import compact_file
from core.config import MemoryConfig
from core.engine.ledger import LedgerEntry
from core.engine.pipeline import UNLIMITED
from core.io.schema_loader import validator
from core.report import CompressionReport
from tests.conftest import ROOT

CASES = {
    "budget": ("sample_transcripts/agent_session.jsonl", {"max_tokens": 8000}),
    "floor": ("sample_transcripts/agent_session.jsonl", {"max_tokens": 100}),
    "orphans": ("sample_transcripts/errors/orphan_result.jsonl", {}),
}


def compression(name: str, **settings: object) -> CompressionReport:
    path, overrides = CASES[name]
    config = MemoryConfig().with_overrides(**{**overrides, **settings})
    mode = UNLIMITED if name == "orphans" else "budget"
    result = compact_file(str(ROOT / path), config, mode=mode, use_cache=False)
    assert result.compression is not None
    return result.compression


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_report_round_trips_through_json_and_the_schema(name: str) -> None:
    report = compression(name)
    document = json.loads(json.dumps(report.to_dict()))
    validator("report").validate(document)
    assert CompressionReport.from_dict(document) == report
    assert CompressionReport.from_dict(document).to_dict() == document


def test_the_document_keeps_its_key_order_and_the_format_section_comes_last() -> None:
    document = compression("budget").to_dict()
    schema = validator("report").schema
    assert list(document) == list(schema["properties"])  # the order the golden files were written in
    assert document["format"] == {"input": "openai", "output": "openai", "losses": []}


def test_typed_fields_agree_with_the_document() -> None:
    report = compression("floor")
    document = report.to_dict()
    assert document["before"] == {"messages": report.before.messages, "tokens": report.before.tokens,
                                   "window_fraction": report.before.window_fraction}
    assert document["over_budget"] is report.over_budget is True
    assert report.acted() == list(dict.fromkeys(a["strategy"] for a in document["actions"] if a["error"] is None))


@pytest.mark.parametrize("handle", [None, "off_0123456789abcdef"])
def test_a_ledger_entry_round_trips_and_writes_its_handle_only_when_it_has_one(handle: str | None) -> None:
    entry = LedgerEntry(4, "tool", "clear_tool_results", 1, "rewritten", 120, 9, "cleared", handle)
    document = json.loads(json.dumps(entry.to_dict()))
    assert list(document) == ["line", "role", "strategy", "pass", "action", "tokens_before", "tokens_after",
                              "reason", *(["handle"] if handle else [])]
    assert LedgerEntry.from_dict(document) == entry
