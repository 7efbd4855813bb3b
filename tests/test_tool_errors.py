"""A failed tool call stays failed: its error flag survives compaction and conversion.

A model reads "this call failed" from the flag as well as from the text (Anthropic's
``is_error``, pi's ``isError``, Gemini CLI's ``status``); a conversion that turned a failure
into a success would mislead the next turn. Targets with no field for the flag say so in the
report instead of dropping it silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import formats
from tests.helpers import invoke

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
# Each fixture holds exactly one failed tool result.
SOURCES = ["anthropic_all_blocks.jsonl", "claude_code_session.jsonl", "pi_no_compaction.jsonl", "gemini_chat.json",
           "gemini_stream.jsonl"]
CARRY = ["anthropic", "claude-code", "pi", "gemini-chat", "gemini-stream"]
NO_FIELD = ["openai", "responses", "codex", "sharegpt"]
LOSS = "tool results marked as failed (the format has no field for it; the error text is kept)"


def failed_results(path: Path) -> list[str]:
    """The ids of the tool calls whose results the file marks as failed, read back by compact."""
    decoded = formats.read(str(path))
    return [str(m.data.get("tool_call_id")) for m in decoded.messages if m.role == "tool" and m.extra.get("failed")]


@pytest.mark.parametrize("source", SOURCES)
def test_each_format_reads_its_failed_result(source: str) -> None:
    assert len(failed_results(FIXTURES / source)) == 1


@pytest.mark.parametrize("target", CARRY)
@pytest.mark.parametrize("source", SOURCES)
def test_a_failed_result_stays_failed_in_every_format_with_a_field_for_it(source: str, target: str,
                                                                        tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    outcome = invoke(str(FIXTURES / source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report))
    assert outcome.exit_code == 0, outcome.output
    assert len(failed_results(out)) == 1
    losses = [loss["what"] for loss in json.loads(report.read_text())["format"]["losses"]]
    assert LOSS not in losses


def test_the_native_fields_say_failed(tmp_path: Path) -> None:
    source = str(FIXTURES / "anthropic_all_blocks.jsonl")
    written = {}
    for target in ("anthropic", "pi", "gemini-stream", "gemini-chat"):
        out = tmp_path / target
        assert invoke(source, "--unlimited", "--to", target, "-o", str(out)).exit_code == 0
        written[target] = out.read_text()
    anthropic = [json.loads(line) for line in written["anthropic"].splitlines()]
    flags = [b.get("is_error") for m in anthropic if isinstance(m.get("content"), list)
             for b in m["content"] if b.get("type") == "tool_result"]
    assert flags == [None, True, None]  # a success carries no flag, as the API writes it
    pi = [json.loads(line)["message"] for line in written["pi"].splitlines() if '"toolResult"' in line]
    assert [m["isError"] for m in pi] == [False, True, False]
    stream = [json.loads(line) for line in written["gemini-stream"].splitlines()]
    results = [e for e in stream if e["type"] == "tool_result"]
    assert [e["status"] for e in results] == ["success", "error", "success"]
    assert results[1]["error"]["message"].startswith("1 failed: test_add") and "output" not in results[1]
    chat = json.loads(written["gemini-chat"])
    calls = [c for m in chat["messages"] for c in m.get("toolCalls", [])]
    assert [c["status"] for c in calls] == ["success", "error", "success"]
    assert "error" in calls[1]["result"][0]["functionResponse"]["response"]


@pytest.mark.parametrize("target", NO_FIELD)
def test_a_format_without_the_field_reports_the_flag_as_a_loss(target: str, tmp_path: Path) -> None:
    out, report = tmp_path / "out", tmp_path / "r.json"
    outcome = invoke(str(FIXTURES / "anthropic_all_blocks.jsonl"), "--unlimited", "--to", target, "-o", str(out),
                     "--report", str(report))
    assert outcome.exit_code == 0, outcome.output
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(LOSS) == 1
    assert "1 failed: test_add" in out.read_text()


def test_a_compacted_failed_result_keeps_its_flag_in_its_own_format(tmp_path: Path) -> None:
    # A rewrite (the result cleared to a placeholder) keeps the block's is_error.
    source = FIXTURES / "claude_code_session.jsonl"
    failed = failed_results(source)
    out = tmp_path / "out.jsonl"
    assert invoke(str(source), "-s", "clear_tool_results:keep_pairs=0", "--unlimited", "-o", str(out)).exit_code == 0
    assert failed_results(out) == failed


def test_a_failed_call_in_words_of_its_own_is_summarized_as_failed(tmp_path: Path) -> None:
    # Gemini CLI's edit tool fails with prose no error pattern matches; only the flag says it failed.
    refusal = "A secondary check by an LLM determined that no changes were necessary to fulfill the instruction."
    lines = [{"role": "user", "content": "Make the reset button also redraw the progress bar in src/timer.js."}]
    for turn in range(8):
        lines += [
            {"role": "assistant", "content": [
                {"type": "text", "text": f"Step {turn}: editing the timer."},
                {"type": "tool_use", "id": f"toolu_{turn}", "name": "Edit",
                 "input": {"file_path": "src/timer.js", "old_string": f"reset{turn}()", "new_string": f"reset{turn}(); draw()"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn}", "is_error": turn == 2,
                                          "content": refusal if turn == 2 else "The file src/timer.js has been updated."}]},
            {"role": "user", "content": f"Go on with part {turn + 1} " + "of the plan, " * 60},
            {"role": "assistant", "content": "Continuing " + "with the plan " * 60}]
    lines.append({"role": "user", "content": "Now run the tests."})
    source = tmp_path / "session.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    # (at 900 tokens the newest request, 120 tokens of filler, leaves the line 29 tokens: a budget edge)
    assert invoke(str(source), "--max-tokens", "1000", "-o", str(out)).exit_code == 0
    assert f"- changing src/timer.js failed: {refusal}" in out.read_text()


def test_the_model_summarizer_is_told_which_results_failed() -> None:
    from core.summarizers.base import SummaryRequest
    from core.summarizers.prompt import user_prompt

    span = ({"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "replace", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "no changes were necessary"},
            {"role": "tool", "tool_call_id": "c2", "content": "body"})
    prompt = user_prompt(SummaryRequest(span, 1, 1, failed=(1,)))
    assert "[tool, failed] no changes were necessary" in prompt and "[tool] body" in prompt


@pytest.mark.parametrize("target", ["openai", "responses", "codex"])
def test_a_failed_result_left_out_is_counted_once_as_left_out(target: str, tmp_path: Path) -> None:
    # A sidechain's result answered in the parent session has no call to name: it is left out,
    # and its failed flag is no second loss ("the error text is kept" would be false).
    lines = [json.loads(line) for line in (FIXTURES / "claude_code_sidechain.jsonl").read_text().splitlines()]
    for line in lines:
        content = line.get("message", {}).get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result":
                block["is_error"] = True
    source = tmp_path / "side.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    decoded = formats.read(str(source)).messages
    written = sum(1 for m in decoded if m.role == "tool" and m.extra.get("failed") and "tool_call_id" in m.data)
    left_out = sum(1 for m in decoded if m.role == "tool" and m.extra.get("failed") and "tool_call_id" not in m.data)
    assert left_out == 1
    report = tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(tmp_path / "o"), "--report", str(report)
                  ).exit_code == 0
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get(LOSS, 0) == written
    assert losses["tool results whose call is not in the transcript (a parent session's), left out"] == left_out


def test_a_reused_call_id_takes_the_failure_of_its_own_result_only() -> None:
    # tau-bench and hand-edited logs reuse ids: the flag belongs to a result, not to an id.
    from core.counting.counter import MessageCounter
    from core.summarizers.base import SummaryRequest
    from core.summarizers.extractive import ExtractiveSummarizer
    from tests.helpers import shared_counter

    def edit(text: str) -> list[dict[str, object]]:
        return [{"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function", "function": {
                    "name": "Edit", "arguments": json.dumps({"file_path": "src/timer.js", "old_string": "a",
                                                             "new_string": "b"})}}]},
                {"role": "tool", "tool_call_id": "t1", "content": text}]

    span = (*edit("String to replace not found in file."), *edit("The file src/timer.js has been updated."))
    summary = ExtractiveSummarizer().summarize(SummaryRequest(span, 1, 1, failed=(1,)),
                                               MessageCounter(shared_counter()[0])).text
    assert "failed: The file src/timer.js has been updated." not in summary
