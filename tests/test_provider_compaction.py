"""Provider-side compaction records: Anthropic's ``compaction`` block, OpenAI's ``compaction`` item, Codex's
``replacement_history`` (fixtures built from the pinned SDK types: tests/fixtures/provider_compaction/build.py).

The provider reads from the newest record on: only that live part is counted and compacted, the record is
written back exactly as it came and where it stood, and a conversion that cannot carry it says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests import sdk_oracle
from tests.conftest import ROOT
from tests.fixtures.provider_compaction import build
from tests.helpers import invoke, invoke_with_report

FIXTURES = ROOT / "tests/fixtures/provider_compaction"
ANTHROPIC = FIXTURES / "anthropic_compaction.jsonl"
ANTHROPIC_FIRST = FIXTURES / "anthropic_compaction_first.jsonl"
RESPONSES = FIXTURES / "responses_compaction.jsonl"
CODEX = FIXTURES / "codex_compaction.jsonl"
# file -> (its format, the index of the line holding the newest record, lines to keep from the head: a
# rollout's session_meta)
RECORDS = {ANTHROPIC: ("anthropic", 5, 0), RESPONSES: ("responses", 6, 0), CODEX: ("codex", 6, 1)}


def raw_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def tokens(path: Path, fmt: str) -> int:
    run = invoke("count", str(path), "--from", fmt, "--format", "json")
    assert run.exit_code == 0, run.output
    return int(json.loads(run.stdout)["before"]["tokens"])


def test_the_fixtures_are_what_the_pinned_sdk_types_build() -> None:
    assert build.built() == {name: (FIXTURES / name).read_text() for name in build.FILES}
    for path in (ANTHROPIC, ANTHROPIC_FIRST):
        for row in map(json.loads, raw_lines(path)):
            assert sdk_oracle.type_errors(sdk_oracle.ANTHROPIC_BETA, row) is None, row
    for row in map(json.loads, raw_lines(RESPONSES)):
        assert sdk_oracle.type_errors(sdk_oracle.RESPONSES, row) is None, row


@pytest.mark.parametrize("path", list(RECORDS), ids=lambda p: p.stem)
def test_only_the_part_the_provider_reads_is_counted(path: Path, tmp_path: Path) -> None:
    fmt, at, head = RECORDS[path]
    rows = raw_lines(path)
    live, dead = tmp_path / "live.jsonl", tmp_path / "dead.jsonl"
    live.write_bytes(b"".join(rows[:head] + rows[at:]))
    dead.write_bytes(b"".join(rows[:at]))
    counted = tokens(path, fmt)
    assert counted == tokens(live, fmt)
    assert tokens(dead, fmt) > 20 * counted  # the two long test logs before the record: not counted


def test_the_newest_compaction_block_is_where_counting_starts(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in raw_lines(ANTHROPIC)]
    older = {"role": "assistant", "content": [{**rows[5]["content"][0], "content": "An older summary. " * 40}]}
    failed = {**rows[5], "content": [{"type": "compaction", "content": None}, *rows[5]["content"][1:]]}
    two, no_op = tmp_path / "two.jsonl", tmp_path / "no_op.jsonl"
    two.write_text("".join(json.dumps(r) + "\n" for r in [rows[0], older, *rows[1:]]))
    no_op.write_text("".join(json.dumps(r) + "\n" for r in [*rows[:5], failed, *rows[6:]]))
    assert tokens(two, "anthropic") == tokens(ANTHROPIC, "anthropic")
    # A block whose content is null is a failed compaction, a no-op for the API: everything is read.
    assert tokens(no_op, "anthropic") > 20 * tokens(ANTHROPIC, "anthropic")


def record_of(row: dict[str, Any], fmt: str) -> Any:
    return row["content"][0] if fmt == "anthropic" else row


# The default strategies, with a budget the pinned messages alone exceed too; a summary that would fold
# the record into itself; the seed preset, which pins no summary.
COMPACTIONS = [("--max-tokens", "60"), ("--max-tokens", "20"), ("-s", "summarize:turns=1", "--max-tokens", "60"),
               ("--preset", "seed", "--max-tokens", "40")]


@pytest.mark.parametrize("args", COMPACTIONS, ids=" ".join)
@pytest.mark.parametrize("path", list(RECORDS), ids=lambda p: p.stem)
def test_compaction_keeps_the_record_as_it_came_and_where_it_stood(path: Path, args: tuple[str, ...],
                                                                   tmp_path: Path) -> None:
    fmt, at, _ = RECORDS[path]
    out = tmp_path / "out.jsonl"
    run = invoke(str(path), *args, "-o", str(out))
    assert run.exit_code in (0, 3), run.output  # (3: 20 tokens is below what must stay)
    before, after = raw_lines(path), raw_lines(out)
    assert after[:at] == before[:at]  # what the provider no longer reads: untouched, and nothing added in it
    record = record_of(json.loads(before[at]), fmt)
    assert record_of(json.loads(after[at]), fmt) == record
    if fmt != "anthropic":  # a line of its own: its very bytes
        assert after[at] == before[at]
    else:
        assert json.dumps(json.loads(after[at])["content"][0]) == json.dumps(record)
    text = out.read_text()
    assert text.count('"compaction"') == path.read_text().count('"compaction"')  # nothing moved in front of it


def test_a_record_in_its_own_reply_is_kept_when_the_api_reads_it_first(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert invoke(str(ANTHROPIC_FIRST), "--max-tokens", "20", "-o", str(out)).exit_code in (0, 3)
    assert raw_lines(out)[0] == raw_lines(ANTHROPIC_FIRST)[0]


COMPACTION_AS_TEXT = "Anthropic compaction blocks (signed, read by the Messages API only), written as their summary text"
ENCRYPTED_LEFT_OUT = "OpenAI's encrypted compaction summaries (readable by OpenAI only), left out"


@pytest.mark.parametrize(("path", "target", "lost"), [
    (ANTHROPIC, "openai", {COMPACTION_AS_TEXT: 1,
                           "lines before the newest compaction block (the API does not read them)": 5}),
    (ANTHROPIC, "claude-code", {COMPACTION_AS_TEXT: 1}),
    (RESPONSES, "anthropic", {ENCRYPTED_LEFT_OUT: 1,
                              "items before the newest compaction item (the server no longer needs them)": 6}),
    (CODEX, "openai", {ENCRYPTED_LEFT_OUT: 1, "rollout lines before the newest compaction (Codex resumes from it)": 6}),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "stem", ""))
def test_a_conversion_that_cannot_carry_the_record_lists_it_among_the_losses(
        path: Path, target: str, lost: dict[str, int], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    _, report = invoke_with_report(str(path), "--unlimited", "--to", target, "-o", str(out), tmp_path=tmp_path)
    losses = {loss["what"]: loss["count"] for loss in report["format"]["losses"]}
    assert {what: losses.get(what) for what in lost} == lost
    if path == ANTHROPIC:  # the summary is still there, as text
        assert build.SUMMARY in out.read_text()


def test_the_codex_record_carries_to_responses_in_its_order(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert invoke(str(CODEX), "--unlimited", "--to", "responses", "-o", str(out)).exit_code == 0
    items = [json.loads(line) for line in raw_lines(out)]
    assert [i["type"] for i in items[:2]] == ["message", "compaction"]  # the user messages, then the item
    assert items[1]["encrypted_content"] == build.ENCRYPTED


@pytest.mark.parametrize("budget", [None, 60, 2000], ids=str)
@pytest.mark.parametrize("path", [*RECORDS, ANTHROPIC_FIRST], ids=lambda p: p.stem)
def test_every_output_passes_the_provider_oracle(path: Path, budget: int | None) -> None:
    from tests.test_provider_oracle import WIRE, outputs

    found = []
    for target, (fmt, raw, _) in outputs(path, budget).items():
        for request in sdk_oracle.requests(raw, fmt, WIRE[fmt]):
            found += [(target, v.rule, v.detail[:200]) for v in sdk_oracle.judge(request, WIRE[fmt])]
    assert found == []


def test_stats_and_the_table_say_where_the_live_part_starts(tmp_path: Path) -> None:
    live = {"record": "Anthropic compaction block", "line": 6, "lines_before": 5}
    stats = invoke("stats", str(ANTHROPIC), "--format", "json")
    assert json.loads(stats.stdout)["provider_compaction"] == live
    line = "provider compaction: Anthropic compaction block on line 6"
    assert line in " ".join(invoke("stats", str(ANTHROPIC)).stdout.split())
    assert line in " ".join(invoke("count", str(ANTHROPIC)).stdout.split())
    _, report = invoke_with_report(str(CODEX), "--max-tokens", "60", tmp_path=tmp_path)
    assert report["format"]["provider_compaction"] == {"record": "Codex replacement history", "line": 7,
                                                       "lines_before": 6}
    from core.io.schema_loader import validator

    validator("report").validate(report)
    plain = invoke("stats", str(ROOT / "tests/fixtures/formats/responses_items.jsonl"), "--format", "json")
    assert json.loads(plain.stdout)["provider_compaction"] is None


@pytest.mark.parametrize("path", [*RECORDS, ANTHROPIC_FIRST], ids=lambda p: p.stem)
def test_validate_reads_the_record_as_the_oracle_does(path: Path) -> None:
    from tests.test_provider_oracle import WIRE, outputs, verdicts

    provider = "anthropic" if path in (ANTHROPIC, ANTHROPIC_FIRST) else "responses"
    assert invoke("validate", str(path), "--for", provider).exit_code == 0
    for budget in (None, 60):
        for target, (fmt, raw, _) in outputs(path, budget).items():
            oracle, runtime = verdicts(raw, fmt, WIRE[fmt])
            assert oracle == runtime, (budget, target)


def test_validate_names_a_malformed_compaction_block(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in raw_lines(ANTHROPIC_FIRST)]
    rows[0]["content"][0]["summary"] = rows[0]["content"][0].pop("content")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = invoke("validate", str(bad), "--from", "anthropic", "--for", "anthropic")
    said = run.stdout + run.stderr
    assert run.exit_code == 1 and f"{bad}:1: " in said and "a compaction block holds content" in said


def with_turns_after_the_block(turns: int, tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    """The Anthropic fixture with ``turns`` more turns after its block: a live part long enough to summarize."""
    rows = [json.loads(line) for line in raw_lines(ANTHROPIC)]
    for n in range(4, 4 + turns):
        rows += [{"role": "assistant", "content": [{"type": "text", "text": f"Step {n}: " + "checking the ledger. " * 30}]},
                 {"role": "user", "content": f"Continue with step {n + 1}."}]
    source = tmp_path / "long.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows, source


@pytest.mark.parametrize(("turns", "budget"), [(4, 150), (4, 200), (4, 300), (6, 400)])
def test_a_later_summary_leaves_the_record_in_place_and_does_not_repeat_it(turns: int, budget: int,
                                                                          tmp_path: Path) -> None:
    # The record stays where it is, read by the provider: compact's summary beside it is of the
    # summarized lines only (a copy of the record's text, cut to fit, was what it said before).
    rows, source = with_turns_after_the_block(turns, tmp_path)
    out = tmp_path / "out.jsonl"
    assert invoke(str(source), "--max-tokens", str(budget), "-o", str(out)).exit_code == 0
    written = [json.loads(line) for line in raw_lines(out)]
    assert written[5]["content"] == [rows[5]["content"][0]]  # the block, alone now: its reply was summarized
    [at] = [n for n, r in enumerate(written) if str(r["content"]).startswith("CUCA summary")]
    summary = written[at]["content"]
    assert at > 5 and "Continue with step" in summary
    assert not any(words in summary for words in ("The user asked", "round_half_even", "120 billing tests")), summary


def test_a_rollout_that_records_the_compaction_item_itself_is_read_from_it(tmp_path: Path) -> None:
    """Server-side compaction (context_management) streams the item: Codex records it as a response_item."""
    rows = [json.loads(line) for line in raw_lines(CODEX)]
    window = rows[6]["payload"]["replacement_history"]
    streamed = [*rows[:6], *({**rows[6], "type": "response_item", "payload": item} for item in window), *rows[8:]]
    path, live = tmp_path / "rollout.jsonl", tmp_path / "live.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in streamed))
    live.write_text("".join(json.dumps(r) + "\n" for r in [rows[0], *streamed[7:]]))
    assert tokens(path, "codex") == tokens(live, "codex") < tokens(CODEX, "codex")  # (its user message is before it)
    out = tmp_path / "out.jsonl"
    assert invoke(str(path), "--max-tokens", "20", "-o", str(out)).exit_code in (0, 3)
    assert raw_lines(out)[:8] == raw_lines(path)[:8]


def test_the_system_prompt_before_the_block_is_still_sent_and_counted(tmp_path: Path) -> None:
    system = "You are a careful billing engineer. " * 20
    rows = raw_lines(ANTHROPIC)
    for shape in ({"system": system}, {"role": "system", "content": system}):
        path = tmp_path / "with_system.jsonl"
        path.write_bytes(json.dumps(shape).encode() + b"\n" + b"".join(rows))
        assert tokens(path, "anthropic") > tokens(ANTHROPIC, "anthropic") + 100
        run = invoke("validate", str(path), "--for", "anthropic")
        assert run.exit_code == 0, run.output


def test_a_summary_is_not_credited_with_the_record_it_leaves_in_place(tmp_path: Path) -> None:
    # The record stays (it is pinned, never folded): a summary beside it replaces only its span, so one
    # larger than that span is skipped and the window meets the budget instead.
    _, report = invoke_with_report(str(ANTHROPIC), "--max-tokens", "60", "--dry-run", tmp_path=tmp_path)
    assert [s["strategy"] for s in report["skipped"]] == ["summarize"]
    assert "would not be smaller than what it replaces" in report["skipped"][0]["reason"]
    assert all(action["tokens_saved"] > 0 for action in report["actions"])
    assert not report["over_budget"] and report["after"]["tokens"] < 60


def test_a_system_line_before_the_block_is_read_and_not_among_the_lines_before(tmp_path: Path) -> None:
    path, out = tmp_path / "with_system.jsonl", tmp_path / "out.jsonl"
    path.write_bytes(b'{"system": "You are a billing bot."}\n' + ANTHROPIC.read_bytes())
    run, report = invoke_with_report(str(path), "--to", "openai", "-o", str(out), "--table", tmp_path=tmp_path)
    from core.io.schema_loader import validator

    validator("report").validate(report)
    assert report["format"]["provider_compaction"] == {"record": "Anthropic compaction block", "line": 7,
                                                       "lines_before": 5}
    assert all(loss["count"] > 0 for loss in report["format"]["losses"]), report["format"]["losses"]
    # (the table: on stderr with -o; a figure -1, not the "-1" of pytest's tmp path, pytest-13/)
    assert "not messages" not in run.output and not re.search(r"(?<!\w)-1(?!\d)", run.output), run.output
    for said in (run.output, invoke("count", str(path)).stdout, invoke("stats", str(path)).stdout):
        assert "the 5 lines before it" in " ".join(said.split())


def test_the_live_part_line_says_no_lines_before_a_first_record_and_one_line_in_the_singular(tmp_path: Path) -> None:
    first = " ".join(invoke("count", str(ANTHROPIC_FIRST)).stdout.split())
    assert "provider compaction: Anthropic compaction block on line 1; counted from there on" in first
    assert "lines before it" not in first and "the 0" not in first
    one = tmp_path / "one.jsonl"
    rows = raw_lines(ANTHROPIC)
    one.write_bytes(b"".join(rows[4:]))  # a tool result whose call is gone, then the block
    said = " ".join(invoke("stats", str(one)).stdout.split())
    assert "the line before it is kept as it is and not counted" in said


@pytest.mark.parametrize("budget", [200, 300])
def test_a_summary_over_its_room_takes_a_longer_span_rather_than_leave_the_run_over_budget(budget: int,
                                                                                          tmp_path: Path) -> None:
    # The record and the task are pinned: the summary (its header, its smallest digest) came out over
    # its room, the span chosen for the room was too short, and sliding_window then cut far below the budget.
    _, source = with_turns_after_the_block(4, tmp_path)
    _, report = invoke_with_report(str(source), "--max-tokens", str(budget), "--dry-run", tmp_path=tmp_path)
    assert [a["strategy"] for a in report["actions"]] == ["clamp_oversized_messages", "summarize"]
    assert 0.85 * budget < report["after"]["tokens"] < budget
