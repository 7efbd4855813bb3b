"""The installed `compact` script, run as a user runs it (pytest-console-scripts)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.script_launch_mode("subprocess")


def test_pipes_stdin_to_stdout(script_runner, samples: Path) -> None:
    with open(samples / "agent_session.jsonl", encoding="utf-8") as stdin:
        result = script_runner.run(["compact", "-", "--max-tokens", "8000"], stdin=stdin)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines and all("role" in m for m in lines)
    assert result.stderr == ""  # no table when stderr is not a terminal


def test_long_session_to_8000_tokens_with_a_valid_report(script_runner, samples: Path, tmp_path: Path) -> None:
    from core.io.schema_loader import validator

    report_path = tmp_path / "r.json"
    out = tmp_path / "out.jsonl"
    result = script_runner.run(
        ["compact", str(samples / "agent_session.jsonl"), "--max-tokens", "8000", "-o", str(out),
         "--report", str(report_path), "--table"]
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    validator("report").validate(report)
    assert report["after"]["tokens"] < 8000 and report["over_budget"] is False
    assert "budget: under 8,000 tokens — reached" in result.stderr
    count = script_runner.run(["compact", "count", str(out), "--format", "json"])
    assert json.loads(count.stdout)["before"]["tokens"] == report["after"]["tokens"]


def test_strict_exits_3_when_pinned_messages_exceed_the_budget(script_runner, samples: Path) -> None:
    result = script_runner.run(["compact", str(samples / "agent_session.jsonl"), "--max-tokens", "5", "--strict", "-o", "/dev/null"])
    assert result.returncode == 3


def test_bad_input_is_one_line_on_stderr(script_runner, samples: Path) -> None:
    result = script_runner.run(["compact", str(samples / "errors" / "bad_json.jsonl")])
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_version_and_help(script_runner) -> None:
    assert script_runner.run(["compact", "--version"]).stdout.startswith("compact ")
    help_text = script_runner.run(["compact", "--help"]).stdout
    for command in ("run", "count", "config", "graph"):
        assert command in help_text


def test_every_command_has_help_and_is_in_the_readme(script_runner) -> None:
    readme = (ROOT / "README.md").read_text()  # the command table, whatever page holds the details
    for command in (["run"], ["count"], ["config", "show"], ["graph", "validate"], ["graph", "merge"],
                    ["graph", "import"], ["graph", "render"], ["recall"], ["store", "stats"], ["stats"], ["diff"], ["validate"], ["batch"]):
        result = script_runner.run(["compact", *command, "--help"])
        assert result.returncode == 0 and "Usage:" in result.stdout
        assert f"compact {' '.join(command)}" in readme, command


def test_the_wheel_holds_the_packages_and_the_schemas(tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for schema in ("message", "config", "report", "graph-snapshot"):
        assert f"schemas/{schema}.schema.json" in names
    for module in ("cli/app.py", "core/engine/pipeline.py", "core/strategies/sliding_window.py", "core/graph/__init__.py", "core/formats/claude_code.py",
                   "core/py.typed", "schemas/__init__.py"):
        assert module in names, module
    assert not any(name.startswith("tests/") for name in names)


def test_the_progress_bar_goes_to_a_terminal_stderr_never_to_stdout(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from generate import generate  # type: ignore[import-not-found]

    source = tmp_path / "long.jsonl"
    source.write_bytes(b"".join(generate(4000, seed=3, size_scale=0.3)))
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(["compact", str(source), "--max-tokens", "8000", "--no-cache"], stdout=subprocess.PIPE,
                               stderr=follower, env=env)
    os.close(follower)
    terminal = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        terminal += chunk
    stdout, _ = process.communicate(timeout=120)
    os.close(leader)
    assert process.returncode == 0
    assert b"counting tokens" in terminal  # the bar was drawn on the terminal
    assert b"counting tokens" not in stdout
    assert all(line.startswith(b"{") for line in stdout.splitlines())


def test_starting_the_cli_loads_no_engine() -> None:
    """`compact --help` (and a usage error) answer without importing the engine, tokenizers or formats."""
    import subprocess
    import sys

    code = ("import sys, cli.app; print(sorted(m for m in sys.modules if m.startswith("
            "('core.api', 'core.engine', 'core.strategies', 'core.summarizers', 'core.counting', 'core.formats'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_library_names_load_on_first_use() -> None:
    import subprocess
    import sys

    code = ("import core; from core import RunOptions, compact, compact_source, read_transcript, Message; "
            "print(RunOptions.__module__, compact.__module__, 'core.api' in dir(core) or 'compact_source' in dir(core))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["core.api", "core.engine.pipeline", "True"]
    missing = subprocess.run([sys.executable, "-c", "import core; core.nope"], capture_output=True, text=True)
    assert "AttributeError: module 'core' has no attribute 'nope'" in missing.stderr
