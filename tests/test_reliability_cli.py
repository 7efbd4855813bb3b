"""The process around a run: stdout that cannot be written, Ctrl-C at any moment, an interrupted batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

AGENT = SAMPLES / "agent_session.jsonl"


def _ctrl_c_reaches_it() -> None:
    # A shell without job control starts background commands with SIGINT ignored, and children
    # inherit that: give the child the usual disposition, as a terminal's foreground job has.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_stdout_on_a_full_disk_is_one_line_and_exit_2() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    for args in ([str(AGENT), "--unlimited"], ["count", str(AGENT), "--format", "json"]):
        with open("/dev/full", "wb") as full:
            process = subprocess.run(["compact", *args], stdout=full, stderr=subprocess.PIPE, timeout=60)
        assert process.returncode == 2, process.stderr
        assert process.stderr.decode().splitlines() == [
            ("compact: error: cannot write the output: No space left on device"
            " (free some space, or send the output elsewhere)")]


def test_a_reader_that_stops_early_ends_the_run_quietly() -> None:
    process = subprocess.Popen(["compact", str(AGENT), "--unlimited", "--no-cache"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(10)
    process.stdout.close()  # like `| head -c 10`
    stderr = process.stderr.read()
    process.stderr.close()
    process.wait(timeout=60)
    assert b"Traceback" not in stderr and b"Exception ignored" not in stderr, stderr


def test_ctrl_c_at_any_moment_is_one_line_or_a_clean_finish(tmp_path: Path) -> None:
    """From start-up imports to shutdown: exit 130 with the line, or a finished run; never a traceback."""
    outcomes = set()
    out = tmp_path / "out.jsonl"
    for step in range(24):
        out.unlink(missing_ok=True)
        process = subprocess.Popen(["compact", str(AGENT), "--max-tokens", "3000", "--no-cache", "-o", "out.jsonl"],
                                   cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   preexec_fn=_ctrl_c_reaches_it)
        time.sleep(0.08 + step * 0.025)  # past Python's own start-up (about 60 ms), into ours and beyond
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        text = stderr.decode()
        assert "Traceback" not in text, text
        if process.returncode == 130:  # (past the rename, the line says what is in place)
            written = "compact: error: interrupted; the outputs were already written\n"
            assert text in ("compact: error: interrupted; nothing was written\n", written)
            assert out.exists() == (text == written), text
        else:
            assert process.returncode == 0 and text == "", (process.returncode, text)
        outcomes.add(process.returncode)
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert 130 in outcomes


def test_an_interrupted_batch_counts_the_outputs_its_workers_finished(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for number in range(12):
        (inputs / f"t{number:02d}.jsonl").write_bytes(AGENT.read_bytes())
    out = tmp_path / "out"
    process = subprocess.Popen(["compact", "batch", str(inputs), "--out", str(out), "--max-tokens", "3000",
                                "-j", "2", "--no-cache", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=_ctrl_c_reaches_it)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(out.glob(".*.compact.json"))) < 2:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole group, workers included
    _, stderr = process.communicate(timeout=60)
    whole = len(list(out.glob(".*.compact.json")))
    text = stderr.decode()
    assert process.returncode == 130, text
    assert "Traceback" not in text
    assert f"interrupted after {whole} of 12 inputs" in text, (whole, text)
    assert whole >= 2


_CTRL_C_INSIDE_TYPER_PARSING = """
import os, signal, sys, time
from pathlib import Path
import pydantic

original = pydantic.TypeAdapter.__init__

def interrupted_init(self, annotation, *args, **kwargs):
    # typer builds a pydantic TypeAdapter while it parses a command's options; pydantic-core
    # calls back into Python from Rust, and a KeyboardInterrupt raised there is printed as
    # "Exception ignored" and dropped. Ctrl-C lands here, and is dropped the same way.
    if annotation is Path:  # the command's FILE argument
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            sys.stderr.write("Exception ignored in: 'Path'\\n")
    original(self, annotation, *args, **kwargs)

pydantic.TypeAdapter.__init__ = interrupted_init
from cli.app import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_the_options_are_parsed_leaves_at_once(tmp_path: Path) -> None:
    """Ctrl-C inside typer's option parsing (pydantic code that drops a KeyboardInterrupt) still stops the run."""
    for args in ([str(AGENT), "--max-tokens", "3000", "--no-cache", "-o", "out.jsonl"],
                 ["graph", "validate", str(SAMPLES / "graph" / "valid.json")]):
        process = subprocess.run([sys.executable, "-c", _CTRL_C_INSIDE_TYPER_PARSING, *args], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=60, preexec_fn=_ctrl_c_reaches_it)
        assert (process.returncode, process.stderr) == (130, "compact: error: interrupted; nothing was written\n")
        assert list(tmp_path.iterdir()) == []


def test_ctrl_c_after_the_outputs_are_in_place_says_they_were_written(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the table is drawn, once -o and --report were replaced, said "nothing was written"."""
    import cli.commands
    from tests.helpers import invoke

    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    out.write_text("OLD\n")
    report.write_text("OLD\n")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.commands, "_show", interrupted)
    result = invoke(str(AGENT), "--max-tokens", "3000", "--no-cache", "-o", str(out), "--report", str(report))
    assert (result.exit_code, result.stderr) == (130, "compact: error: interrupted; the outputs were already written\n")
    assert json.loads(report.read_text())["after"]["tokens"] < 3000
    assert out.read_text().count("\n") == json.loads(report.read_text())["after"]["messages"]


def test_ctrl_c_after_a_dry_run_wrote_its_report_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cli.render
    from tests.helpers import invoke

    def interrupted(*args: object, **kwargs: object) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.render, "plan_lines", interrupted)
    report = tmp_path / "r.json"
    result = invoke(str(AGENT), "--max-tokens", "3000", "--no-cache", "--dry-run", "--report", str(report))
    assert (result.exit_code, result.stderr) == (130, "compact: error: interrupted; the outputs were already written\n")
    assert json.loads(report.read_text())["after"]["tokens"] < 3000


_CTRL_C_BETWEEN_TWO_RENAMES = """
import os, signal, sys
import core.io.staged

original = os.replace
calls = []

def replace_then_interrupt(source, target):
    # Ctrl-C right after the first of the run's renames (the report), before the transcript's.
    original(source, target)
    calls.append(target)
    if len(calls) == 1:
        os.kill(os.getpid(), signal.SIGINT)

core.io.staged.os.replace = replace_then_interrupt
from cli.app import main
main(sys.argv[1:])
"""


def test_ctrl_c_between_two_renames_waits_until_every_output_is_in_place(tmp_path: Path) -> None:
    """Without holding Ctrl-C back, the report was renamed into place and the transcript never was,
    and the line said nothing was written."""
    (tmp_path / "out.jsonl").write_text("OLD\n")
    (tmp_path / "r.json").write_text("OLD\n")
    process = subprocess.run([sys.executable, "-c", _CTRL_C_BETWEEN_TWO_RENAMES, str(AGENT), "--max-tokens", "3000",
                              "--no-cache", "-o", "out.jsonl", "--report", "r.json"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60, preexec_fn=_ctrl_c_reaches_it)
    assert (process.returncode, process.stderr) == (130, "compact: error: interrupted; the outputs were already written\n")
    report = json.loads((tmp_path / "r.json").read_text())
    assert (tmp_path / "out.jsonl").read_text().count("\n") == report["after"]["messages"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "r.json"]


def test_ctrl_c_after_a_batch_wrote_its_outputs_does_not_say_nothing_was(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import cli.batch
    from tests.helpers import invoke

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.batch, "print_batch", interrupted)
    result = invoke("batch", str(AGENT), "--out", str(tmp_path / "out"), "--max-tokens", "3000", "--table")
    assert (result.exit_code, result.stderr) == (
        130, "compact: error: interrupted; the inputs done before it are written (a rerun skips them)\n")
    assert (tmp_path / "out" / AGENT.name).exists()
