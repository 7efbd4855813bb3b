"""Codex CLI rollouts of the 2025 layout (issue 13): a header, record_type lines and bare Responses items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core import formats
from tests.helpers import check_bad_line, invoke, invoke_with_report

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
ROLLOUT = FIXTURES / "codex_2025_layout.jsonl"  # hand-made: parallel calls, reasoning, state lines, two turns
UPSTREAM = "codex-cli-2025-layout/upstream-legacy-rollout-minimal.jsonl"
THIRD_PARTY = "codex-cli-2025-layout/legacy-layout-thirdparty-synthetic.jsonl"


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def not_items(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if "type" not in line]


def assert_paired(lines: list[dict[str, Any]]) -> None:
    calls = [line["call_id"] for line in lines if line.get("type") == "function_call"]
    outputs = [line["call_id"] for line in lines if line.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs)


def test_the_upstream_and_third_party_samples_are_read_as_codex(realdata: Path) -> None:
    minimal = formats.read(str(realdata / UPSTREAM))
    assert minimal.format == "codex"
    assert [m.data for m in minimal.messages] == [{"role": "user", "content": "hello"}]
    sample = formats.read(str(realdata / THIRD_PARTY))
    assert [m.data["role"] for m in sample.messages] == ["user", "assistant", "tool"]
    reply = sample.messages[1].data
    assert reply["content"][0]["type"] == "reasoning"  # kept verbatim, encrypted content and all
    assert reply["content"][1] == {"type": "text", "text": "I'll create a README file for you."}
    assert reply["tool_calls"][0]["id"] == "call_001"


def test_pseudo_user_messages_read_as_system_and_items_pair_by_call_id() -> None:
    decoded = formats.read(str(ROLLOUT))
    roles = [m.data["role"] for m in decoded.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant", "user",
                     "assistant", "tool", "assistant"]
    assert [c["id"] for c in decoded.messages[4].data["tool_calls"]] == ["call_Ef56Gh78", "call_Ij90Kl12"]


def test_compaction_keeps_the_layout_the_pairs_and_the_lines_that_are_not_items(tmp_path: Path) -> None:
    original = lines_of(ROLLOUT.read_text())
    for budget in ("4000", "1200"):
        out, report = invoke_with_report(str(ROLLOUT), "--max-tokens", budget, tmp_path=tmp_path)
        assert report["format"]["input"] == "codex"
        assert report["after"]["tokens"] < int(budget) < report["before"]["tokens"]
        written = lines_of(out.stdout)
        assert written[0] == original[0]  # the header stays first
        assert all("payload" not in line and "timestamp" not in line for line in written[1:])  # still bare items
        assert_paired(written)
        assert not_items(written) == not_items(original)
        again = tmp_path / "again.jsonl"
        again.write_text(out.stdout)
        assert formats.read(str(again)).format == "codex"


def test_a_cleared_output_keeps_the_items_fields(tmp_path: Path) -> None:
    out, _ = invoke_with_report(str(ROLLOUT), "--full", "-s", "clear_tool_results:keep_pairs=1", tmp_path=tmp_path)
    written = {line["call_id"]: line for line in lines_of(out.stdout) if line.get("type") == "function_call_output"}
    assert written["call_Ab12Cd34"]["output"].startswith("[compact: tool result")
    assert written["call_Mn34Op56"]["output"].startswith("Success.")  # the newest pair is kept


def test_a_summary_is_a_bare_system_message_item(tmp_path: Path) -> None:
    out, _ = invoke_with_report(str(ROLLOUT), "--max-tokens", "3000", "--summarizer", "extractive",
                                "-s", "summarize:turns=1", tmp_path=tmp_path)
    written = lines_of(out.stdout)
    summaries = [line for line in written if line.get("role") == "system"]
    assert len(summaries) == 1
    assert summaries[0]["type"] == "message" and summaries[0]["content"][0]["text"].startswith("CUCA summary:")
    assert "timestamp" not in summaries[0] and "payload" not in summaries[0]
    assert_paired(written)


def test_unlimited_round_trip_and_conversion_to_the_envelope_layout(tmp_path: Path) -> None:
    same, _ = invoke_with_report(str(ROLLOUT), "--unlimited", tmp_path=tmp_path)
    assert same.stdout_bytes == ROLLOUT.read_bytes()
    converted, report = invoke_with_report(str(ROLLOUT), "--unlimited", "--to", "openai", tmp_path=tmp_path)
    # the header and the six state lines have no place in chat
    assert {"what": "Codex CLI rollout lines that are not messages", "count": 7} in report["format"]["losses"]
    chat = tmp_path / "chat.jsonl"
    chat.write_text(converted.stdout)
    back, _ = invoke_with_report(str(chat), "--unlimited", "--to", "codex", tmp_path=tmp_path)
    written = lines_of(back.stdout)
    assert written[0]["type"] == "session_meta"  # --to codex writes today's envelope layout
    assert all(line["type"] == "response_item" for line in written[1:])


def test_to_codex_writes_a_2025_rollout_in_the_layout_codex_resumes_today(tmp_path: Path) -> None:
    """Codex 0.171 resumes no 2025-layout rollout: asking for codex by name writes the envelope layout,
    compacted or not, and says what of the old header it could not carry. Without --to the layout stays."""
    kept, _ = invoke_with_report(str(ROLLOUT), "--max-tokens", "300", tmp_path=tmp_path)
    assert "type" not in lines_of(kept.stdout)[0]  # (the header: written back as it was)
    for budget in (["--unlimited"], ["--max-tokens", "300"]):
        upgraded, report = invoke_with_report(str(ROLLOUT), *budget, "--to", "codex", tmp_path=tmp_path)
        assert upgraded.exit_code == 0, upgraded.stderr
        written = lines_of(upgraded.stdout)
        assert written[0]["type"] == "session_meta" and written[0]["payload"]["id"]
        assert all(line["type"] == "response_item" for line in written[1:])
        assert report["format"]["input"] == report["format"]["output"] == "codex"
        assert {"what": "Codex CLI rollout lines that are not messages", "count": 7} in report["format"]["losses"]
        assert_paired([line["payload"] for line in written[1:]])
    envelope = tmp_path / "envelope.jsonl"
    envelope.write_text(upgraded.stdout)
    again, _ = invoke_with_report(str(envelope), "--unlimited", "--to", "codex", tmp_path=tmp_path)
    assert again.stdout == upgraded.stdout  # an envelope rollout is written back, not rendered anew


def test_a_file_mixing_the_two_layouts_is_refused_naming_the_line(tmp_path: Path) -> None:
    envelope = {"timestamp": "2025-11-03T09:00:00.000Z", "type": "response_item",
                "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(ROLLOUT.read_text() + json.dumps(envelope) + "\n")
    result = invoke(str(mixed), "--unlimited")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert f"{mixed}:23: this line is a Codex CLI rollout line (envelope layout)" in result.stderr


def test_a_bad_line_is_named_or_kept(tmp_path: Path) -> None:
    lines = ROLLOUT.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:7], '{"type":"function_call_output","output":"lost"}', *lines[7:]]) + "\n")
    failed, _, _ = check_bad_line(broken, 8, tmp_path, "--max-tokens", "4000")
    assert "needs the call_id of its call" in failed.stderr
