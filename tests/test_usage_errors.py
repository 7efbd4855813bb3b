"""Usage errors (bad option values, unknown options, missing arguments, ...) are one line and exit 2.

Click's own form is three lines (Usage / Try / Error); the README promises
`compact: error: ...` for every error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import invoke

ROOT = Path(__file__).resolve().parent.parent
SESSION = str(ROOT / "sample_transcripts" / "agent_session.jsonl")
GRAPH = str(ROOT / "sample_transcripts" / "graph" / "valid.json")

CASES = [
    # (arguments, what the line must say)
    (["graph", "validate", "nope.json"], "file 'nope.json' does not exist"),
    (["graph", "validate", "/"], "is a directory"),
    (["graph", "validate", GRAPH, "-f", "xml"], "'xml' is not one of 'text', 'json', 'github'"),
    (["graph", "validate", GRAPH, "--format"], "option '--format' requires an argument"),
    (["graph", "render", GRAPH, "--direction", "sideways"], "'sideways' is not one of"),
    (["graph", "merge", GRAPH], "missing argument 'INCOMING'"),
    (["graph", "nope"], "no such command 'nope'"),
    (["store", "nope"], "no such command 'nope'"),
    ([SESSION, "--max-tokens", "abc"], "invalid value for '--max-tokens'"),
    ([SESSION, "--max-tokens", "0"], "greater than or equal to 1"),
    ([SESSION, "--max-fraction", "2"], "must be a number from 0 to 1, not 2.0"),
    ([SESSION, "--max-fraction", "nan"], "must be a number from 0 to 1, not nan"),
    ([SESSION, "--max-tokens"], "option '--max-tokens' requires an argument"),
    ([SESSION, "--bogus"], "no such option: --bogus"),
    ([SESSION, "extra"], "unexpected extra argument"),
    ([SESSION, "--strict=yes"], "option '--strict' does not take a value"),
    ([SESSION, "-o", "/"], "is a directory"),
    (["diff", SESSION], "missing argument 'AFTER'"),
    (["count"], "missing argument 'FILE': give a transcript's path, or - to read standard input"),
    (["validate", "--for", "openai"], "missing argument 'FILE': give a transcript's path, or - to read"),
    (["--max-tokens", "8000"], "missing argument 'FILE': give a transcript's path, or - to read standard input"),
    (["count", SESSION, "--format", "yaml"], "'yaml' is not one of 'table', 'json'"),
    (["config", "show", "extra"], "unexpected extra argument"),
    (["config", "show", "--config", "/"], "is a directory"),
    (["recall", "--limit", "x", "q"], "invalid value for '--limit'"),
    (["recall", "--limit", "9223372036854775808", "q"], "less than or equal to 1000000000000000"),  # past SQLite's
    (["batch", SESSION, "--out", "o", "--jobs", "2147483648"], "less than or equal to 4096"),  # past a C int
    (["batch", SESSION, "--out", "o", "--jobs", "99999999999999999999"], "less than or equal to 4096"),
    (["stats", SESSION, "--top", "x"], "invalid value for '--top'"),
]


@pytest.mark.parametrize(("args", "says"), CASES, ids=[" ".join(a[-3:]).replace(str(ROOT), "") for a, _ in CASES])
def test_a_usage_error_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("compact: error: "), lines[0]
    assert says in lines[0], lines[0]
    assert "--help`)" in lines[0]  # names where to look


def test_the_installed_script_prints_the_same_one_line(script_runner: object, tmp_path: Path) -> None:
    result = script_runner.run(["compact", "graph", "validate", str(tmp_path / "nope.json")])  # type: ignore[attr-defined]
    assert result.returncode == 2
    assert result.stderr == (
        f"compact: error: invalid value for 'FILE': file '{tmp_path / 'nope.json'}' does not exist "
        "(see `compact graph validate --help`)\n"
    )
