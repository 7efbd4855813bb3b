"""Invariants of compaction over generated transcripts (Hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.messages import call_ids, result_ids
from tests.helpers import run_core

WORDS = st.sampled_from(["alpha", "beta", "gamma", "def", "return", "x = 1", "path/to/file.py", "error:", "\n"])
TEXT = st.lists(WORDS, min_size=1, max_size=400).map(" ".join)
TOOLS = st.sampled_from(["read_file", "run_shell", "grep", "write_file"])


@st.composite
def transcripts(draw: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(TEXT)})
    next_id = 0
    for _ in range(draw(st.integers(1, 6))):
        messages.append({"role": "user", "content": draw(TEXT)})
        for _ in range(draw(st.integers(0, 4))):
            if draw(st.booleans()):
                messages.append({"role": "assistant", "content": draw(TEXT)})
                continue
            calls = []
            for _ in range(draw(st.integers(1, 3))):  # parallel calls
                next_id += 1
                path = draw(st.sampled_from(["a.py", "b.py", "c.py"]))
                calls.append({"id": f"call_{next_id}", "type": "function",
                              "function": {"name": draw(TOOLS), "arguments": f'{{"path": "{path}"}}'}})
            content = draw(st.one_of(st.none(), TEXT))
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            results = [{"role": "tool", "tool_call_id": c["id"], "content": draw(TEXT)} for c in calls]
            messages.extend(draw(st.permutations(results)))
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": draw(TEXT)})
    return messages


def orphans(messages: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    calls = {cid for m in messages for cid in call_ids(m)}
    results = {rid for m in messages for rid in result_ids(m)}
    return results - calls, calls - results


def pinned_lines(messages: list[dict[str, Any]]) -> set[int]:
    lines = set()
    system = next((i for i, m in enumerate(messages, 1) if m["role"] == "system"), None)
    # The newest user message that carries a request (an empty one pins nothing).
    users = [i for i, m in enumerate(messages, 1)
             if m["role"] == "user" and isinstance(m["content"], str) and m["content"].strip()]
    if system:
        lines.add(system)
    if users:
        lines.add(users[-1])
    return lines


PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(transcripts(), st.floats(0.05, 1.2), st.lists(st.integers(1, 40), max_size=3))
def test_compaction_invariants(messages: list[dict[str, Any]], fraction: float, keep_lines: list[int]) -> None:
    total = run_core(messages, mode="unlimited").report["before"]["tokens"]
    budget = max(1, int(total * fraction))
    keep = [f"line:{n}" for n in keep_lines if n <= len(messages)]
    out = run_core(messages, max_tokens=budget, keep=keep)
    report = out.report
    lines = [m.line for m in out.messages if m.line is not None]
    by_line = {m.line: m for m in out.messages if m.line is not None}

    # Order kept; nothing invented but compact's own record of what it removed.
    assert lines == sorted(lines)
    assert set(lines) <= set(range(1, len(messages) + 1))
    for added in (m for m in out.messages if m.line is None):
        assert added.data["content"].startswith(("[compact:", "CUCA summary:"))
    # A summary or trace written by the run survives it.
    if any(a["messages_added"] for a in report["actions"]):
        assert any(m.line is None for m in out.messages)
    # Pinned and kept messages survive, byte for byte (unless the pins alone exceed the budget:
    # then the last resort cuts the middle of the newest request and of the system prompt).
    last_resort = {e["line"] for e in report["removed"] if e["strategy"] == "clamp_pinned"}
    for line in pinned_lines(messages) | {int(k[5:]) for k in keep}:
        assert line in by_line
        assert by_line[line].data == messages[line - 1] or line in last_resort
    # No orphan in either direction (the input had none).
    assert orphans([m.data for m in out.messages]) == (set(), set())
    # Every removed or rewritten message is in the ledger.
    removed = set(range(1, len(messages) + 1)) - set(lines)
    ledger = {(e["line"], e["action"]) for e in report["removed"]}
    assert removed <= {line for line, action in ledger if action == "removed"}
    rewritten = {m.line for m in out.messages if m.line is not None and m.data != messages[m.line - 1]}
    assert rewritten <= {line for line, action in ledger if action == "rewritten"}
    # Under budget whenever the floor (pinned messages and their pairs) fits.
    if report["budget"]["floor"]["tokens"] < budget:
        assert report["over_budget"] is False
        assert report["after"]["tokens"] < budget
    # A second run with the same budget (and the same messages pinned) changes nothing.
    new_line = {m.line: i for i, m in enumerate(out.messages, start=1) if m.line is not None}
    keep_again = [f"line:{new_line[int(k[5:])]}" for k in keep]
    again = run_core([m.data for m in out.messages], max_tokens=budget, keep=keep_again)
    assert [m.data for m in again.messages] == [m.data for m in out.messages]


@PROPERTY_SETTINGS
@given(transcripts(), st.integers(1, 12))
def test_message_budget_invariants(messages: list[dict[str, Any]], max_messages: int) -> None:
    out = run_core(messages, max_messages=max_messages)
    assert orphans([m.data for m in out.messages]) == (set(), set())
    if out.report["budget"]["floor"]["messages"] <= max_messages:
        assert len(out.messages) <= max_messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(1, 12), st.integers(1, 3))
@example([{"role": "system", "content": "alpha"}, {"role": "user", "content": "\n"}, {"role": "user", "content": "alpha"}],
         2, 1)  # (an older turn of one blank request: a placeholder would not make fewer messages)
def test_offload_placeholders_keep_a_message_budget(messages: list[dict[str, Any]], max_messages: int,
                                                    turns: int) -> None:
    """Offload alone, a few turns a pass: over `--max-messages` (the pinned messages fitting it), only
    the current turn, which offload never moves, and one placeholder are left besides the pins;
    each placeholder names the input's turns of what it stands for."""
    import re
    import tempfile
    from pathlib import Path

    from core.engine.seams import Seams
    from core.store import OffloadStore

    with tempfile.TemporaryDirectory() as folder, OffloadStore.open(Path(folder) / "s.db", create=True) as store:
        out = run_core(messages, max_messages=max_messages, strategies=[f"offload:turns={turns}"],
                       seams=Seams(store=store))
    starts = [i for i, m in enumerate(messages, 1) if m["role"] == "user" and str(m["content"]).strip()]  # turns
    if starts and len(out.messages) > max_messages and out.report["budget"]["floor"]["messages"] <= max_messages:
        pins = {next((i for i, m in enumerate(messages, 1) if m["role"] == "system"), None), starts[0]}
        # Besides the pins and the current turn, one message is left: the placeholder, or the one
        # message an older turn held when a placeholder would not have made fewer (a blank request).
        left = [m for m in out.messages if m.line is None or (m.line < starts[-1] and m.line not in pins)]
        assert len(left) <= 1, [m.data for m in out.messages]
    turn_of_line = {line: sum(1 for s in starts if s <= line) for line in range(1, len(messages) + 1)}
    for message in out.messages:
        said = re.match(r"\[compact: turns? ([\d, -]+) offloaded \(\d+ messages?, lines? (\d+)(?:-(\d+))?\)",
                        str(message.data.get("content")))
        if said:
            first, last = int(said.group(2)), int(said.group(3) or said.group(2))
            numbers = re.findall(r"\d+", said.group(1))
            assert int(numbers[0]) == turn_of_line[first] and int(numbers[-1]) == turn_of_line[last]
