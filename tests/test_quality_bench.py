"""The metric functions of bench/quality.py: what counts as a needle, retention, the baselines, facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.messages import Message
from tests.helpers import assistant_calls, call, load_bench, msg, result


@pytest.fixture(scope="module")
def quality():
    return load_bench("quality.py", "quality_bench")


def messages(*datas: dict) -> list[Message]:
    return [Message(data, line=i + 1) for i, data in enumerate(datas)]


def test_needles_are_the_kinds_the_issue_names(quality) -> None:
    text = (
        "See src/core/engine/budget.py and https://example.com/docs/x. The commit a1b2c3d4e fixed it;\n"
        "KeyError: 'session_token' not found\n"
        "Call `load_config()` then MemoryConfig.max_tokens, port 8080, TokenCounter, it's 'fine tuned'."
    )
    found = quality.extract_needles(text)
    assert found["src/core/engine/budget.py"] == "path"
    assert found["https://example.com/docs/x"] == "url"
    assert found["a1b2c3d4e"] == "hex_id"
    assert found["KeyError: 'session_token' not found"] == "error_line"
    assert found["KeyError"] == "exception"
    assert found["8080"] == "number"
    assert found["MemoryConfig.max_tokens"] == "dotted"
    assert found["session_token"] == "snake"  # the first kind that finds it
    assert found["TokenCounter"] == "camel"
    assert found["load_config()"] == "quoted"
    assert found["fine tuned"] == "quoted"
    assert not any(
        n.startswith("s 'fine") or n == "port" for n in found
    )  # apostrophes and short words


def test_a_needle_occurs_as_a_whole_token_only(quality) -> None:
    assert quality.occurs("abc1234", "id abc1234.")
    assert not quality.occurs("abc1234", "id abc12345")
    assert not quality.occurs("4471", "x14471")
    assert quality.occurs("src/a.py", "open(src/a.py)")


def test_needles_come_from_what_the_agent_writes_and_must_be_in_the_prefix(quality) -> None:
    continuation = messages(
        assistant_calls(
            call("c1", "Read", file_path="src/core/engine/budget.py"),
            content="Now fix parse_budget twice.",
        ),
        msg("tool", "unrelated_tool_output_name in src/other/file.py", tool_call_id="c1"),
        msg("assistant", "parse_budget again, and new_identifier_here"),
    )
    prefix_text = "def parse_budget(): ... see src/core/engine/budget.py; file_path is a key"
    needles = quality.needles_for(continuation, prefix_text)
    assert needles == {"parse_budget": ("snake", 2), "src/core/engine/budget.py": ("path", 1)}
    weighted, unweighted, lost = quality.retention(needles, "only parse_budget survived")
    assert weighted == pytest.approx(2 / 3)
    assert unweighted == pytest.approx(1 / 2)
    assert lost == {"path": ["src/core/engine/budget.py"]}


def test_human_requests_leave_out_harness_text_and_meta_lines(quality) -> None:
    human, reminder, meta, tool = messages(
        msg("user", "please port this"),
        msg("user", "<system-reminder>x</system-reminder>"),
        msg("user", "Stop hook feedback: tests fail"),
        msg("tool", "ok", tool_call_id="c"),
    )
    assert quality.is_human_request(human, {})
    assert not quality.is_human_request(reminder, {})
    assert not quality.is_human_request(meta, {})
    assert not quality.is_human_request(tool, {})
    assert not quality.is_human_request(human, {1: {"isMeta": True}})


def test_newest_that_fit_keeps_the_system_message_and_whole_call_groups(quality) -> None:
    prefix = messages(
        msg("system", "you are an agent"),
        msg("user", "task " * 50),
        assistant_calls(call("c1", "Read", file_path="a.py"), call("c2", "Read", file_path="b.py")),
        result("c1", "x " * 300),
        result("c2", "y " * 10),
        msg("user", "go on"),
    )
    tokens = quality.count(prefix)
    budget = tokens[0] + tokens[-1] + tokens[4] + 5  # the newest result fits, its group does not
    kept = quality.newest_that_fit(prefix, budget)
    assert [m.data for m in kept] == [prefix[0].data, prefix[-1].data]
    kept = quality.newest_that_fit(prefix, sum(tokens) - tokens[1])
    assert [m.data for m in kept] == [m.data for m in prefix if m is not prefix[1]]
    cleared = quality.clear_then_newest(prefix, 10_000, keep_results=1)
    assert cleared[3].data["content"] == quality.CLEARED and cleared[4].data["content"] == "y " * 10


def test_the_ceiling_keeps_what_the_continuation_uses_whole_groups_and_the_pins(quality) -> None:
    prefix = messages(
        msg("system", "you are an agent"),
        msg("user", "filler " * 200),
        assistant_calls(call("c1", "Read", file_path="src/app/cache_store.py")),
        result("c1", "def evict_oldest_entry(): ..."),
        msg("assistant", "more filler " * 200),
        msg("user", "go on"),
    )
    needles = {"src/app/cache_store.py": ("path", 1), "evict_oldest_entry": ("snake", 3)}
    tokens = quality.count(prefix)
    kept = quality.ceiling(prefix, tokens[0] + tokens[2] + tokens[3] + tokens[5] + 2, needles)
    assert [m.data for m in kept] == [prefix[i].data for i in (0, 2, 3, 5)]  # the call with its result
    assert quality.ceiling(prefix, tokens[0] + tokens[5] + tokens[3], needles) == [prefix[0], prefix[5]]


def test_facts_are_planted_and_asked_in_a_chat_file(quality, tmp_path: Path) -> None:
    lines = [
        msg("system", "You are a coding agent working on a repository."),
        msg("user", "Please fix the failing test in the parser module today."),
        assistant_calls(
            call("c1", "read_file", path="parser.py"),
            content="Let me read the parser module first.",
        ),
        result("c1", "def parse():\n    return 1\n" * 5),
        msg("assistant", "The parser returns a constant; I will change it now."),
        msg("user", "Thanks, now also update the changelog entry please."),
    ] * 6
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    session = quality.Session("s", "test", path)
    cuts, _notes = quality.find_cuts(session, (0.5,))
    assert [c.index for c in cuts] == [19]
    cut = cuts[0]
    cut.prefix = quality.formats.read(str(path)).messages[:20]
    planted_lines, where = quality.plant(cut, asked=2)
    assert sum(1 for w in where if w >= 0) == 5
    planted = tmp_path / "p.jsonl"
    planted.write_bytes(b"\n".join(planted_lines) + b"\n")
    text = [quality.countable_text(m.data) for m in quality.formats.read(str(planted)).messages]
    for key, value, sentence in quality.FACTS:
        assert any(sentence in t for t in text)
    assert "what is the feature flag for the new cache?" in text[-1]


def test_the_bench_runs_end_to_end_and_is_deterministic(quality, tmp_path: Path) -> None:
    def run(name: str) -> dict:
        out = tmp_path / f"{name}.json"
        quality.main(
            [
                "--realdata",
                str(tmp_path / "none"),
                "--seeds",
                "0",
                "--generated-messages",
                "120",
                "--budgets",
                "4000",
                "--json",
                str(out),
            ]
        )
        rows = json.loads(out.read_text())["rows"]
        return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]

    first = run("a")
    assert first and {r["method"] for r in first} >= {
        "compact",
        "newest-that-fit",
        "clear-3-then-newest",
    }
    assert all(r["tokens"] <= 4000 for r in first)
    assert first == run("b")


def test_a_session_driven_by_one_prompt_is_cut_where_an_agent_auto_compacts(
    quality, tmp_path: Path
) -> None:
    # One request, then the agent works alone: no human request after the middle, so the cut is
    # where an agent compacts on its own: after a result that answers every open call, before
    # the assistant goes on.
    lines = [msg("system", "You are a coding agent."), msg("user", "Port the parser module to Rust please.")]
    for i in range(10):
        lines.append(
            assistant_calls(
                call(f"a{i}", "read_file", path=f"src/mod{i}.py"),
                call(f"b{i}", "read_file", path=f"src/other{i}.py"),
                content=f"Reading module {i} and its neighbour now.",
            )
        )
        lines.append(result(f"a{i}", f"def f{i}():\n    return {i}\n" * 4))
        lines.append(result(f"b{i}", f"def g{i}():\n    return {i}\n" * 4))
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cuts, notes = quality.find_cuts(quality.Session("s", "test", path), (0.5, 0.75))
    # 32 messages: 50% is message 16, the second result of a pair: the cut. 75% is message 24,
    # the first result of a pair, whose call's partner is still open: the cut is message 25.
    assert [(c.index, c.kind) for c in cuts] == [(16, "auto"), (25, "auto")]
    assert notes == []
    cut = cuts[0]
    assert cut.continuation[0].role == "assistant"
    cut.prefix = quality.formats.read(str(path)).messages[:17]
    planted_lines, where = quality.plant(cut, asked=None)
    planted = tmp_path / "p.jsonl"
    planted.write_bytes(b"\n".join(planted_lines) + b"\n")
    text = [quality.countable_text(m.data) for m in quality.formats.read(str(planted)).messages]
    # Facts are planted as for any cut, but no question is put into a tool result.
    assert sum(1 for w in where if w >= 0) == 5
    assert not any("before you go on" in t for t in text)


def test_a_call_interrupted_before_its_result_does_not_stop_later_auto_cuts(quality) -> None:
    lines = [msg("user", "Port the parser."), assistant_calls(call("lost", "read_file", path="a.py")),
             msg("user", "[Request interrupted by user]"), msg("assistant", "Stopping that read.")]
    for i in range(10):
        lines += [assistant_calls(call(f"c{i}", "read_file", path=f"src/m{i}.py")), result(f"c{i}", f"x = {i}")]
    lines.append(msg("assistant", "Done."))
    assert quality.auto_compaction_point(messages(*lines), 10) == 11
