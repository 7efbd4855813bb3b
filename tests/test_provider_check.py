"""`compact validate --for PROVIDER` and core.analysis.provider_check: one tiny transcript per kind of error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.analysis.provider_check import check_transcript
from core.errors import ConfigError
from tests.helpers import (
    assistant_calls,
    call,
    invoke,
    msg,
    read_messages,
    result,
    run_core,
    write_messages,
)

U = msg("user", "Fix the bug.")
U2 = msg("user", "And the docs.")
S = msg("system", "You are a coding agent.")
A = msg("assistant", "Done.")


def calls(*ids: str, content: Any = None) -> dict[str, Any]:
    return assistant_calls(*(call(i, "read_file", path=f"{i}.py") for i in ids), content=content)


def codes(messages: list[dict[str, Any]], provider: str) -> list[tuple[int, str]]:
    return [(p.index, p.code) for p in check_transcript(messages, provider)]


# -- one fixture per error ------------------------------------------------------------

PROBLEMS = [
    # (provider, transcript, [(index, code)])
    ("openai", [U, calls("c1")], [(1, "missing-result")]),
    ("anthropic", [U, calls("c1")], [(1, "missing-result")]),
    ("responses", [U, calls("c1")], [(1, "missing-result")]),
    ("openai", [U, result("c9", "x")], [(1, "missing-call")]),
    ("responses", [U, result("c9", "x")], [(1, "missing-call")]),
    (
        "openai",
        [U, result("c1", "x"), calls("c1")],
        [(1, "result-before-call"), (2, "missing-result")],
    ),
    ("openai", [U, calls("c1"), U2, result("c1", "x")], [(1, "missing-result"), (3, "result-not-adjacent")]),
    # Parallel calls: every result before any other role.
    (
        "openai",
        [U, calls("c1", "c2"), result("c1", "x"), A, result("c2", "y")],
        [(1, "missing-result"), (4, "result-not-adjacent")],
    ),
    ("openai", [U, {"role": "tool", "content": "x"}], [(1, "missing-tool-call-id")]),
    (
        "openai",
        [U, calls("c1", "c2"), {"role": "tool", "tool_call_ids": ["c1", "c2"], "content": "x"}],
        [(2, "several-call-ids")],  # the one problem: the calls have their result, in the wrong field
    ),
    ("openai", [U, calls("c1"), {"role": "tool", "tool_call_ids": ["c1"], "content": "x"}], [(2, "call-ids-list")]),
    ("openai", [U, calls(""), result("", "x")], [(1, "empty-call-id"), (2, "missing-call")]),
    ("responses", [U, calls(""), result("", "x")], [(1, "empty-call-id")]),

    ("openai", [U, {"role": "assistant", "content": None}, U2], [(1, "empty-assistant")]),
    ("openai", [U, {"role": "assistant", "content": []}, U2], [(1, "empty-assistant")]),
    ("openai", [U, {"role": "robot", "content": "x"}], [(1, "unknown-role")]),
]


@pytest.mark.parametrize(("provider", "messages", "expected"), PROBLEMS)
def test_each_kind_of_provider_error_is_caught(
    provider: str, messages: list[dict], expected: list
) -> None:
    assert codes(messages, provider) == expected


ACCEPTED = [
    # What one provider refuses and another accepts, and shapes every provider accepts.
    ("openai", [U, calls("call.1:x"), result("call.1:x", "x")]),
    (
        "openai",
        [U, calls("c1"), result("c1", "x"), calls("c1"), result("c1", "y")],
    ),  # ids reused: paired by position
    ("openai", [S, A, U, U2, msg("system", "late"), msg("developer", "dev")]),
    ("openai", [U, msg("assistant", "")]),
    ("responses", [U, calls("c1"), U2, result("c1", "x")]),
    # What `compact --to anthropic` writes valid: results moved to the head of the next user turn,
    # ids renamed, the developer prompt as the system, late system text and same-side turns merged.
    ("anthropic", [U, calls("c1"), U2, result("c1", "x")]),
    ("anthropic", [U, calls("call.1:x"), result("call.1:x", "x")]),
    ("anthropic", [U, calls("c1"), result("c1", "x"), calls("c1"), result("c1", "y")]),
    ("anthropic", [msg("developer", "Be brief."), U]),
    ("anthropic", [S, U, A, msg("system", "CUCA context warning: ...")]),
    ("anthropic", [U, U2, A]),
    ("anthropic", [U, A, msg("assistant", "More.")]),
    ("anthropic", [U, msg("assistant", "   "), U2]),
    ("anthropic", [msg("user", [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}]), A]),
    ("responses", [U, calls("c1", "c2"), result("c1", "x"), A, result("c2", "y")]),  # no ordering rule
    ("anthropic", [S, S, U, calls("c1", "c2"), result("c2", "y"), result("c1", "x"), U2, A]),
    ("anthropic", [U, msg("assistant", "")]),  # a final assistant message may be empty (a prefill)
    ("anthropic", [U, calls("c1", content=""), result("c1", "")]),
    ("anthropic", [S, A, U]),  # an opening assistant message gets a user note of compact's own first
]


@pytest.mark.parametrize(("provider", "messages"), ACCEPTED)
def test_what_the_provider_accepts_passes(provider: str, messages: list[dict]) -> None:
    assert check_transcript(messages, provider) == []


def test_problems_carry_line_numbers_when_given_and_read_on_one_line() -> None:
    messages = [U, calls("c1")]
    [problem] = check_transcript(messages, "openai", lines=[3, 7])
    assert (problem.line, problem.index) == (7, 1)
    assert problem.format("t.jsonl") == (
        "t.jsonl:7: tool call c1 (read_file) has no result (add its result after it, "
        "or drop the call with compact --repair)"
    )
    [unplaced] = check_transcript(messages, "openai")
    assert unplaced.line is None and unplaced.format("t.jsonl").startswith("t.jsonl:message 2: ")


def test_a_content_part_that_is_not_an_object_is_named_in_the_problem() -> None:
    # It said "check its content parts () and fields": empty brackets, and no word of the bad part.
    [problem] = check_transcript([msg("user", [{"type": "text", "text": "a"}, 7])], "openai")
    assert problem.code == "invalid-shape"
    assert problem.message.endswith("content[1] is not a content part (an object with a type)")


def test_a_malformed_result_is_its_own_problem_not_a_missing_one() -> None:
    # The result is there, its content is not: "has no result" (and --repair, which would drop
    # the call) was the wrong problem and the wrong fix.
    messages = [assistant_calls(call("a", "x")), msg("tool", [1, 2], tool_call_id="a")]
    problems = check_transcript(messages, "openai")
    assert [p.code for p in problems] == ["invalid-shape"]


def test_an_unknown_provider_is_a_config_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match="did you mean 'openai'"):
        check_transcript([U], "opnai")


def test_an_unknown_role_hides_the_other_problems_of_that_message() -> None:
    assert codes([S, msg("robot", "x"), U, A], "openai") == [(1, "unknown-role")]


# -- the command ---------------------------------------------------------------------


def test_validate_prints_one_line_per_problem_and_exits_1(tmp_path: Path) -> None:
    path = write_messages(
        tmp_path / "t.jsonl", [S, U, calls("c1"), U2, result("c1", "x"), calls("c2")]
    )
    run = invoke("validate", str(path), "--for", "openai")
    assert run.exit_code == 1
    assert run.stdout.splitlines() == [
        (
            f"{path}:3: tool call c1 (read_file) has no result (add its result after it, "
            "or drop the call with compact --repair)"
        ),
        (
            f"{path}:5: tool result for c1 is not directly after its call at line 3: line 4 (user) comes between "
            "(move the tool messages right after the assistant message that made the calls)"
        ),
        (
            f"{path}:6: tool call c2 (read_file) has no result (add its result after it, "
            "or drop the call with compact --repair)"
        ),
    ]
    assert run.stderr == (
        f"compact: error: {path}: 3 problems for openai: 2 missing-result, 1 result-not-adjacent "
        "(--repair drops calls without a result and results without a call, and writes one-id tool_call_ids "
        "lists as tool_call_id; `compact validate --help` lists the checks)\n"
    )


def test_a_swe_agent_history_is_one_line_per_problem(realdata: Path) -> None:
    """SWE-agent answers each call in a one-id tool_call_ids list: one problem per tool message (not
    also a "has no result" on its call), said without parentheses inside parentheses."""
    path = realdata / "openai-chat" / "swe-agent-marshmallow-1867.jsonl"
    run = invoke("validate", str(path), "--for", "openai")
    assert run.exit_code == 1
    lines = run.stdout.splitlines()
    tools = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if json.loads(line)["role"] == "tool"]
    assert [int(line.split(":")[1]) for line in lines] == tools  # one line per tool message, nothing else
    for line in lines:
        assert "tool_call_ids list" in line and "has no result" not in line
        fix = line[line.index(" (") + 2:]
        assert "(" not in fix, line
    assert "13 problems for openai: 13 call-ids-list" in run.stderr


def test_validate_exits_0_with_a_summary_on_stderr(samples: Path) -> None:
    run = invoke("validate", str(samples / "agent_session.jsonl"), "--for", "anthropic")
    assert run.exit_code == 0 and run.stdout == ""
    assert (
        run.stderr
        == f"compact: {samples / 'agent_session.jsonl'}: 350 messages (287 in the anthropic request), no problems for anthropic\n"
    )


def test_the_summary_counts_the_transcript_and_says_when_the_request_holds_fewer(realdata: Path, tmp_path: Path) -> None:
    session = realdata / "codex-cli" / "simonw-codex-homelab-session-head.jsonl"
    run = invoke("validate", str(session), "--for", "anthropic")
    # Three user messages in a row: Anthropic takes them as one.
    assert run.stderr == f"compact: {session}: 3 messages (1 in the anthropic request), no problems for anthropic\n"
    assert "3 messages, no problems for openai" in invoke("validate", str(session), "--for", "openai").stderr
    single = tmp_path / "one.jsonl"
    single.write_text('{"role": "user", "content": "hi"}\n')
    assert invoke("validate", str(single), "--for", "openai").stderr.endswith(": 1 message, no problems for openai\n")
    assert invoke("stats", str(session)).stdout.splitlines()[1].startswith("3 messages · ")


def test_validate_exits_2_on_bad_usage_or_input(samples: Path) -> None:
    bad_json = invoke("validate", str(samples / "errors" / "bad_json.jsonl"), "--for", "openai")
    assert bad_json.exit_code == 2 and ":3:" in bad_json.stderr
    assert invoke("validate", str(samples / "short_chat.jsonl"), "--for", "gemini").exit_code == 2
    assert invoke("validate", str(samples / "short_chat.jsonl")).exit_code == 2  # --for is required


@pytest.mark.parametrize("name", ["seed_example", "short_chat", "agent_session"])
def test_every_output_of_the_main_command_on_the_samples_passes_openai(
    samples: Path, name: str
) -> None:
    path = samples / f"{name}.jsonl"
    assert invoke("validate", str(path), "--for", "openai").exit_code == 0
    total = json.loads(invoke("count", str(path), "--format", "json").stdout)["before"]["tokens"]
    runs = [["--max-tokens", str(max(1, total * k // 10))] for k in (1, 3, 5, 8, 12)]
    runs += [["--max-messages", str(n)] for n in (2, 4, 6)]
    runs += [["--full"], ["--max-tokens", str(max(1, total // 4)), "--warn-fraction", "0.0001"]]
    if name == "seed_example":
        runs.append(
            [
                "--max-messages",
                "6",
                "--context-window",
                "256",
                "--warn-fraction",
                "0.2",
                "--strategy",
                "sliding_window:keep_messages=4",
            ]
        )
    for extra in runs:
        out = invoke(str(path), *extra)
        assert out.exit_code == 0, out.stderr
        messages = read_messages(out.stdout)
        assert check_transcript(messages, "openai") == [], extra


# -- the property: compaction keeps a transcript valid for openai ----------------------

WORDS = st.sampled_from(
    ["alpha", "beta", "gamma", "def", "return", "x = 1", "path/to/file.py", "error:", "\n"]
)
TEXT = st.lists(WORDS, min_size=1, max_size=300).map(" ".join)
TOOLS = st.sampled_from(["read_file", "run_shell", "grep"])


@st.composite
def transcripts(draw: Any) -> list[dict[str, Any]]:
    """Agent-like sessions: system prompts, turns, text replies, parallel calls with results in any order,
    reused call ids, `name` on results, and now and then a shape openai refuses (the property then skips)."""
    messages: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        messages.append(
            {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(TEXT)}
        )
    next_id = 0
    for _ in range(draw(st.integers(1, 5))):
        messages.append({"role": "user", "content": draw(TEXT)})
        for _ in range(draw(st.integers(0, 4))):
            if draw(st.booleans()):
                messages.append({"role": "assistant", "content": draw(TEXT)})
                continue
            batch = []
            for _ in range(draw(st.integers(1, 3))):
                next_id += 1
                reused = draw(st.integers(0, 9)) == 0 and next_id > 1
                cid = (
                    "call_1"
                    if reused and not any(c["id"] == "call_1" for c in batch)
                    else f"call_{next_id}"
                )
                path = draw(st.sampled_from(["a.py", "b.py"]))
                batch.append(call(cid, draw(TOOLS), path=path))
            messages.append(assistant_calls(*batch, content=draw(st.one_of(st.none(), TEXT))))
            answers = [
                result(
                    c["id"], draw(TEXT), name=c["function"]["name"] if draw(st.booleans()) else None
                )
                for c in batch
            ]
            messages.extend(draw(st.permutations(answers)))
        if draw(st.integers(0, 15)) == 0:
            messages.append(msg("system", draw(TEXT)))
    if draw(st.integers(0, 20)) == 0:  # an input openai refuses: the property does not apply
        messages.insert(draw(st.integers(0, len(messages))), result("call_999", "stray"))
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": draw(TEXT)})
    return messages


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(),
    st.one_of(
        st.tuples(st.just("max_tokens"), st.floats(0.02, 1.2)),
        st.tuples(st.just("max_messages"), st.integers(1, 15)),
    ),
    st.sampled_from([None, 0.0, 0.5]),
    st.lists(st.integers(1, 40), max_size=2),
)
def test_compaction_keeps_an_openai_valid_transcript_valid(
    messages: list[dict[str, Any]],
    budget: tuple[str, float],
    warn: float | None,
    keep_lines: list[int],
) -> None:
    assume(check_transcript(messages, "openai") == [])
    settings_: dict[str, Any] = {
        "warn_fraction": warn,
        "keep": [f"line:{n}" for n in keep_lines if n <= len(messages)],
    }
    kind, amount = budget
    if kind == "max_tokens":
        total = run_core(messages, mode="unlimited").report["before"]["tokens"]
        settings_["max_tokens"] = max(1, int(total * amount))
    else:
        settings_["max_messages"] = int(amount)
    out = run_core(messages, **settings_)
    problems = check_transcript(
        [m.data for m in out.messages], "openai", lines=[m.line for m in out.messages]
    )
    assert problems == [], [p.format("out") for p in problems]


def test_a_result_with_nothing_to_send_is_checked_without_reading_it_back(tmp_path: Path) -> None:
    # One user message with no content: Anthropic gets no message at all. --check-for judged the
    # empty result by reading it back as a file, and failed with "<stdin>: the file is empty".
    source = write_messages(tmp_path / "empty.jsonl", [{"role": "user", "content": None}])
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    run = invoke(str(source), "--unlimited", "--to", "anthropic", "--check-for", "anthropic", "-o", str(out),
                 "--report", str(report))
    assert run.exit_code == 0, run.output
    assert out.read_text() == ""
    losses = json.loads(report.read_text())["format"]["losses"]
    assert losses == [{"what": "messages with nothing to send (no text, parts or calls), left out", "count": 1}]
