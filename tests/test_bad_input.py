"""The bad-input corpus: every kind of bad input is one line on stderr, a documented exit code, no traceback,
and nothing written.

Static inputs live in tests/badinput/ (one small file per kind); inputs that cannot
be files in a repository (a directory, a FIFO, a device, an unreadable file, a
pipe that never ends a line) are made by the test. Each case runs the installed
`compact` in an empty folder with `-o out.jsonl --report report.json` where the
command writes, and checks: the exit code; exactly one stderr line, starting
`compact: error: `, holding the expected words and, where the problem has one,
`FILE:LINE`; no `Traceback`; stdout empty; no file left in the folder.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SAMPLES

BAD = ROOT / "tests" / "badinput"
SHORT = str(SAMPLES / "short_chat.jsonl")
WRITES = ("-o", "out.jsonl", "--report", "report.json")


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    says: str  # words the error line must hold
    at: str | None = None  # the FILE:LINE the error must name
    code: int = 2
    writes: bool = True  # add -o/--report (a command that writes)
    stdin: bytes | None = None


def bad(name: str) -> str:
    return str(BAD / name)


def transcript(name: str, says: str, line: int | None = None) -> Case:
    return Case((bad(name),), says, None if line is None else f"{bad(name)}:{line}")


def config(name: str, says: str, line: int | None = None) -> Case:
    return Case((SHORT, "-c", bad(name)), says, None if line is None else f"{bad(name)}:{line}")


def flags(*args: str, says: str, code: int = 2) -> Case:
    return Case((SHORT, *args), says, code=code)


CASES: dict[str, Case] = {
    # -- malformed JSON and values that are not messages
    "truncated object": transcript("truncated_object.jsonl", "malformed JSON: unexpected end of data", 1),
    "trailing garbage": transcript("trailing_garbage.jsonl", "unexpected content after document", 1),
    "bad third line": transcript("bad_third_line.jsonl", "malformed JSON", 3),
    "single quotes": transcript("single_quotes.jsonl", "expected a string key", 1),
    "a string line": transcript("string_line.jsonl", "a string, not a message object", 2),
    "a number line": transcript("number_line.jsonl", "a number, not a message object", 2),
    "a null line": transcript("null_line.jsonl", "null, not a message object", 2),
    "an array line": transcript("nested_array_line.jsonl", "an array, not a message object", 2),
    "NaN": transcript("nan_literal.jsonl", "malformed JSON", 1),
    "Infinity": transcript("infinity_literal.jsonl", "malformed JSON", 1),
    "5000-digit integer": transcript("integer_5000_digits.jsonl", "malformed JSON", 1),
    "nested 2000 deep": transcript("nested_2000_deep.jsonl", "depth limit exceeded", 1),
    "CRLF, second line cut": transcript("crlf_malformed.jsonl", "unexpected end of data", 2),
    # -- fields of the wrong type
    "unknown role": transcript("unknown_role.jsonl", "unknown role 'robot'", 1),
    "role is a number": transcript("role_is_number.jsonl", "unknown role 5", 1),
    "no role": transcript("missing_role.jsonl", "not a message in any format", 1),
    "content is a number": transcript("content_is_number.jsonl", "invalid message: $.content", 1),
    "content is an object": transcript("content_is_object.jsonl", "invalid message: $.content", 1),
    "tool_calls not a list": transcript("tool_calls_not_list.jsonl", "invalid message: $.tool_calls", 1),
    "tool call without function": transcript("tool_call_without_function.jsonl", "'function' is a required property", 1),
    "no format fits": transcript("no_format_fits.jsonl", "not a message in any format", 1),
    "messages is not a list": transcript("whole_conversation_line.jsonl", "not a message in any format", 1),
    "two formats in one file": transcript("two_formats.jsonl", "a file holds one format", 3),
    "ShareGPT call not JSON": transcript("sharegpt_bad_function_call.jsonl", "function_call value is not JSON", 1),
    "ShareGPT call nested 5000 deep": transcript("sharegpt_deep_function_call.jsonl", "function_call value is not JSON", 1),
    # -- JSON array files
    "array with a number": transcript("array_with_number.json", "element 2 of this JSON array is a number"),
    "empty array": transcript("array_empty.json", "the JSON array is empty"),
    "array cut short": transcript("array_truncated.json", "malformed JSON array", 2),
    # -- encodings and binary data
    "invalid UTF-8": transcript("invalid_utf8.jsonl", "invalid UTF-8 (byte 0xe9)", 1),
    "Latin-1 second line": transcript("latin1_second_line.jsonl", "invalid UTF-8", 2),
    "UTF-16 with BOM": transcript("utf16_with_bom.jsonl", "binary data", 1),
    "NUL in a line": transcript("nul_in_line.jsonl", "binary data, not a JSONL transcript (a NUL byte", 1),
    "gzip file": transcript("gzip_file.jsonl", "binary data", 1),
    # -- empty inputs
    "empty file": transcript("empty.jsonl", "the file is empty"),
    "BOM only": transcript("bom_only.jsonl", "the file is empty"),
    "blank lines only": transcript("blank_lines_only.jsonl", "only blank lines"),
    "/dev/null": Case(("/dev/null",), "the file is empty", "/dev/null"),  # (read once, like stdin, but named)
    "count /dev/null": Case(("count", "/dev/null"), "the file is empty", "/dev/null", writes=False),
    "empty stdin": Case(("-",), "the file is empty", "<stdin>", stdin=b""),
    "missing file": Case(("no-such-file.jsonl",), "no such file"),
    "empty dataset": Case((bad("empty.jsonl"), "--from", "dataset"), "the file is empty; a dataset needs"),
    "dataset of blank lines": Case((bad("blank_lines_only.jsonl"), "--from", "dataset"), "only blank lines; a dataset"),
    "empty dataset on stdin": Case(("-", "--from", "dataset"), "the file is empty; a dataset needs", stdin=b""),
    # -- devices and endless lines
    "/dev/zero": Case(("/dev/zero",), "binary data", "/dev/zero:1"),
    "/dev/urandom": Case(("/dev/urandom",), "binary data"),
    "a line longer than --max-line-bytes": Case(("-", "--max-line-bytes", "1048576"), "a line longer than 1,048,576 bytes",
                                                "<stdin>:1", stdin=b'{"role": "user", "content": "' + b"a" * (2 << 20)),
    "--max-line-bytes below 1 MiB": flags("--max-line-bytes", "5", says="max_line_bytes 5 is out of range"),
    # -- absurd flags
    "--max-tokens beyond 64 bits": flags("--max-tokens", "10000000000000000000000", says="max_tokens 10000000000000000000000 is too large"),
    "--max-messages beyond 64 bits": flags("--max-messages", "10" * 12, says="max_messages"),
    "--context-window beyond 64 bits": flags("--context-window", "9" * 30, says="context_window_tokens"),
    "--max-tokens 0": flags("--max-tokens", "0", says="invalid value for '--max-tokens'"),
    "--max-tokens not a number": flags("--max-tokens", "lots", says="invalid value for '--max-tokens'"),
    "--max-fraction 2": flags("--max-fraction", "2", says="invalid value for '--max-fraction'"),
    "--warn-fraction -1": flags("--warn-fraction", "-1", says="invalid value for '--warn-fraction'"),
    "--summary-prompt missing, extractive summarizer": flags("--summary-prompt", "no-such-prompt.txt",
                                                             says="cannot read the summary prompt: No such file"),
    "unknown option": flags("--max-tokenz", "5", says="no such option: --max-tokenz"),
    "both token budgets": flags("--max-tokens", "5", "--max-fraction", "0.5", says="mutually exclusive"),
    "a budget --unlimited would ignore": flags("--unlimited", "--max-tokens", "5",
                                               says="--unlimited compacts nothing, so --max-tokens would be ignored"),
    "unknown strategy": flags("-s", "slidin_window", says="did you mean"),
    "strategy parameter beyond 64 bits": flags("-s", "clamp_oversized_messages:max_part_tokens=99999999999999999999999",
                                               says="is greater than the maximum of 1000000000000000"),
    "strategy parameter not a number": flags("-s", "sliding_window:keep_messages=many", says="keep_messages must be int"),
    "strategy parameter unknown": flags("-s", "sliding_window:keep=3", says="has no parameter 'keep'"),
    "strategy parameter twice": flags("-s", "sliding_window:keep_messages=1,keep_messages=2", says="keep_messages is given twice"),
    "keep rule unknown kind": flags("-k", "colour:red", says="invalid keep rule 'colour:red'"),
    "keep rule bad regex": flags("-k", "match:(", says="invalid regular expression"),
    "keep rule unknown role": flags("-k", "role:asistant", says="unknown role 'asistant' in keep rule 'role:asistant' (did you mean role:assistant?"),
    "keep rule too slow": Case((bad("catastrophic_backtracking.jsonl"), "-k", "match:^(a|aa)+$", "--max-messages", "1"),
                               "keep rule 'match:^(a|aa)+$' took over 1 s on the message at line 1"),
    "keep rule bad line range": flags("-k", "line:a-b", says="invalid line range"),
    "unknown encoder": flags("--encoder", "no_such_encoding", says="no_such_encoding"),
    "unknown --from": flags("--from", "telegram", says="telegram"),
    "unknown --check-for": flags("--check-for", "gemini", says="unknown provider 'gemini'"),
    "--in-place with -o": Case((SHORT, "--in-place", "-o", "x.jsonl"), "mutually exclusive", writes=False),
    "--in-place on stdin": Case(("-", "--in-place"), "--in-place needs a file", writes=False, stdin=b"{}\n"),
    "-o names the input": Case((SHORT, "-o", SHORT), "names the input file", writes=False),
    "--api-key-env holds a key": flags("--api-key-env", "sk-abc 123", says="must be the NAME of an environment variable"),
    "openai summarizer without a URL": flags("--summarizer", "openai", says="needs a server and a model"),
    "summarizer URL not http": flags("--summarizer", "openai", "--summarizer-url", "ftp://x/v1", "--summarizer-model", "m",
                                     "--max-tokens", "50", says="is not an http(s) URL"),
    # -- configs
    "config missing": Case((SHORT, "-c", "no-such.toml"), "no such config file"),
    "config malformed TOML": config("config_malformed.toml", "malformed TOML: Invalid value", 1),
    "config malformed JSON": config("config_malformed.json", "malformed JSON", 2),
    "config unknown key": config("config_unknown_key.toml", "did you mean 'max_tokens'"),
    "config both budgets": config("config_both_budgets.toml", "mutually exclusive"),
    "config integer beyond 64 bits": config("config_huge_int.toml", "greater than the maximum"),
    "config 1e26": config("config_huge_float.json", "greater than the maximum"),
    "config wrong type": config("config_wrong_type.toml", "is not of type 'integer'"),
    "config unknown strategy": config("config_unknown_strategy.toml", "'shrink_everything' is not one of"),
    "config strategy parameter beyond 64 bits": config("config_strategy_param_huge.toml", "greater than the maximum"),
    "config TOML arrays 20k deep": config("config_deep_arrays.toml", "nested too deeply"),
    "config JSON arrays 20k deep": config("config_deep_arrays.json", "depth limit exceeded", 1),
    "config not a table": config("config_not_a_table.json", "must be a table/object"),
    "config store_timeout 0": config("config_store_timeout_zero.toml", "store_timeout"),
    "config unknown at-cap policy": config("config_bad_at_cap.toml", "'drop' is not one of"),
    # -- hostile graph snapshots
    "graph missing": flags("--graph", "no-such-graph.json", says="no-such-graph.json"),
    "graph malformed": flags("--graph", bad("graph_malformed.json"), says="malformed JSON"),
    "graph 20k deep": flags("--graph", bad("graph_deep.json"), says="depth limit exceeded"),
    "graph duplicate ids": flags("--graph", bad("graph_duplicate_ids.json"), says="duplicate node id 'a'"),
    "graph dangling edge": flags("--graph", bad("graph_dangling_edge.json"), says="to 'zz' is not a node id"),
    "graph NaN weight": flags("--graph", bad("graph_nan_weight.json"), says="non-finite weight NaN"),
    "graph not an object": flags("--graph", bad("graph_not_object.json"), says="expected an object"),
    "graph wrong types": flags("--graph", bad("graph_wrong_types.json"), says="expected a string, found a number"),
    "graph validate 20k deep": Case(("graph", "validate", bad("graph_deep.json")), "failed validation", code=1, writes=False),
    # -- stores that are not stores, and other commands
    "store is a folder": flags("--store", str(BAD), says="is a folder, not a store file"),
    "store is not SQLite": flags("--store", bad("two_formats.jsonl"), "--max-tokens", "20", says="not a SQLite database"),
    "store folder missing": flags("--store", "no/such/folder/s.sqlite", says="the store's folder does not exist"),
    "store folder is a file": flags("--store", f"{SHORT}/s.sqlite", says=f"{SHORT} is a file, not a folder"),
    "recall without a store": Case(("recall", "vault"), "no store given", writes=False),
    "recall a malformed handle": Case(("recall", "--id", "xyz", "--store", bad("two_formats.jsonl")), "not a SQLite database",
                                      writes=False),
    "diff of a missing file": Case(("diff", SHORT, "no-such.jsonl"), "no such file", writes=False),
    "validate for an unknown provider": Case(("validate", SHORT, "--for", "gemini"), "gemini", writes=False),
    "count a binary file": Case(("count", bad("gzip_file.jsonl")), "binary data", f"{bad('gzip_file.jsonl')}:1",
                                writes=False),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-input")


def run_case(case: Case, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    args = ["compact", *case.args, *(WRITES if case.writes else ())]
    return subprocess.run(args, cwd=cwd, input=case.stdin if case.stdin is not None else b"",
                          capture_output=True, timeout=60, env={**os.environ, "COLUMNS": "200"})


def check(process: subprocess.CompletedProcess[bytes], case: Case, cwd: Path) -> str:
    stderr = process.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert process.returncode == case.code, stderr
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("compact: error: ")]
    assert len(errors) == 1, stderr
    if case.code == 2:
        assert lines == errors, stderr  # the error line, and nothing else
    assert case.says in errors[0], errors[0]
    if case.at is not None:
        assert errors[0].startswith(f"compact: error: {case.at}:") or f" {case.at}:" in errors[0], errors[0]
    if case.code == 2:
        assert process.stdout == b""
    assert sorted(p.name for p in cwd.iterdir()) == [], "something was written"
    return errors[0]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_and_nothing_written(case: Case, folder: Path) -> None:
    check(run_case(case, folder), case, folder)


def test_the_corpus_covers_at_least_sixty_kinds() -> None:
    assert len(CASES) + len(MADE) >= 60
    on_disk = {p.name for p in BAD.iterdir()}
    used = {Path(a).name for case in CASES.values() for a in case.args if a.startswith(str(BAD))}
    assert on_disk - used == set(TOLERATED), "a file in tests/badinput/ that no case uses"


# -- inputs that cannot live in a repository ---------------------------------------------------


def _directory(tmp: Path) -> Case:
    (tmp / "a-folder").mkdir()
    return Case((str(tmp / "a-folder"),), "is a directory")


def _fifo_store(tmp: Path) -> Case:
    os.mkfifo(tmp / "store.fifo")
    return Case((SHORT, "--store", str(tmp / "store.fifo"), "--max-tokens", "20"), "store.fifo")


def _unreadable(tmp: Path) -> Case:
    path = tmp / "secret.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n')
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as root: a mode-0 file is still readable")
    return Case((str(path),), "permission denied")


def _report_names_the_input(tmp: Path) -> Case:
    path = tmp / "t.jsonl"
    path.write_bytes(Path(SHORT).read_bytes())
    return Case((str(path), "--report", str(path), "-o", str(tmp / "out.jsonl")), "--report names the input file",
                writes=False)


MADE = {"a directory": _directory, "a FIFO as the store": _fifo_store, "an unreadable file": _unreadable,
        "--report names the input": _report_names_the_input}


@pytest.mark.parametrize("make", MADE.values(), ids=MADE.keys())
def test_made_bad_inputs(make, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    case = make(inputs)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = sorted(p.name for p in inputs.iterdir())
    check(run_case(case, cwd), case, cwd)
    assert sorted(p.name for p in inputs.iterdir()) == before


# -- wrong types compact tolerates: passed through untouched, byte for byte ----------------------

TOLERATED = ("content_part_not_object.jsonl", "name_is_number.jsonl", "tool_call_id_number.jsonl",
             "tool_call_name_not_string.jsonl")


@pytest.mark.parametrize("name", TOLERATED)
def test_tolerated_oddities_pass_through_unchanged(name: str) -> None:
    process = subprocess.run(["compact", bad(name), "--unlimited"], capture_output=True, timeout=60)
    assert process.returncode == 0, process.stderr
    assert process.stdout == (BAD / name).read_bytes()


HOSTILE = ROOT / "tests" / "fixtures" / "hostile"  # fields of a shape no reader foresaw (found by fuzzing)


@pytest.mark.parametrize("path", sorted(HOSTILE.iterdir()), ids=lambda p: p.name)
def test_a_field_of_an_unforeseen_shape_is_one_line_naming_the_line(path: Path, tmp_path: Path) -> None:
    """A list where a string was expected, a missing text, an integer past 64 bits: one error line
    naming the file and the line (exit 2), never a traceback, and nothing written."""
    out = tmp_path / "out.jsonl"
    run = subprocess.run(["compact", str(path), "--max-tokens", "50", "-o", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    if run.returncode == 0:  # read as something valid after all (the tolerant reading): then it is written whole
        assert out.exists()
        return
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith(f"compact: error: {path}:"), run.stderr
    assert not out.exists()


def test_a_line_of_an_unforeseen_shape_is_left_out_under_skip_invalid(tmp_path: Path) -> None:
    source = HOSTILE / "fco_output_number.jsonl"  # a function_call_output whose output is a number, on line 3
    report = tmp_path / "r.json"
    run = subprocess.run(["compact", str(source), "--unlimited", "--skip-invalid", "--report", str(report)],
                         capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = source.read_bytes().splitlines(keepends=True)
    assert run.stdout == b"".join(lines[:2] + lines[3:])
    skipped = json.loads(report.read_text())["skipped_lines"]
    assert [s["line"] for s in skipped] == [3] and "TypeError" in skipped[0]["error"]


@pytest.mark.parametrize(("name", "command", "code"), [
    ("anthropic_duplicate_tool_use_id.jsonl", ["validate", "{}", "--for", "openai"], 1),  # named, not a crash
    ("anthropic_system_block_without_text.jsonl", ["{}", "--unlimited", "--to", "openai"], 0),
    ("first_line_type_is_list.jsonl", ["count", "{}"], 2),
])
def test_checks_and_conversions_of_odd_lines_answer_without_a_traceback(name: str, command: list[str], code: int) -> None:
    args = [str(HOSTILE / name) if part == "{}" else part for part in command]
    run = subprocess.run(["compact", *args], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in run.stderr
    assert run.returncode == code, run.stderr


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999/v1", "http://user:pw@[::1/v1?key=sk-x"])
def test_a_summarizer_url_that_cannot_be_parsed_is_refused_up_front(url: str) -> None:
    run = subprocess.run(["compact", str(SAMPLES / "short_chat.jsonl"), "--max-tokens", "50", "--summarizer", "openai",
                          "--summarizer-url", url, "--summarizer-model", "m"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "is not a valid URL" in lines[0] and "Traceback" not in run.stderr
    assert "pw" not in run.stderr and "sk-x" not in run.stderr


# -- A live session file: the agent is still writing its last line.

CLAUDE_CODE = "claude-code/claude-reliability-coverage-test-fix.jsonl"
CODEX = "codex-cli/codex-0.47.0-cli-rollout-2025-10-21-envelope-pomodoro.jsonl"


def cut_last_line(text: bytes) -> bytes:
    """The file as a reader sees it while the agent writes its last line: that line cut in half, no newline."""
    body = text.rstrip(b"\n")
    start = body.rfind(b"\n") + 1
    return body[: start + (len(body) - start) // 2]


def every_line_is_json(output: bytes) -> int:
    lines = output.splitlines()
    for line in lines:
        json.loads(line)  # what `jq` needs
    return len(lines)


@pytest.mark.parametrize("name", [CLAUDE_CODE, CODEX, "openai-chat/tau-bench-airline-task3.jsonl"])
def test_a_last_line_cut_mid_json_is_left_out_with_a_warning(name: str, realdata: Path, tmp_path: Path) -> None:
    whole = (realdata / name).read_bytes()
    source = tmp_path / Path(name).name
    source.write_bytes(cut_last_line(whole))
    last = whole.rstrip(b"\n").count(b"\n") + 1
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    run = subprocess.run(["compact", str(source), "--max-tokens", "3000", "-o", str(out), "--report", str(report)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if f"{source}:{last}" in line]
    assert len(warnings) == 1 and warnings[0].startswith("compact: warning:") and "cut off" in warnings[0], run.stderr
    assert every_line_is_json(out.read_bytes()) > 0
    skipped = json.loads(report.read_text())["skipped_lines"]
    assert [(s["line"], s.get("truncated")) for s in skipped] == [(last, True)]


def test_a_cut_last_line_on_stdin_is_left_out_too(tmp_path: Path) -> None:
    whole = (SAMPLES / "short_chat.jsonl").read_bytes()
    run = subprocess.run(["compact", "-", "--unlimited"], input=cut_last_line(whole), capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == whole[: whole.rstrip(b"\n").rfind(b"\n") + 1]  # the lines before it, as they were
    assert b"<stdin>:" in run.stderr and b"cut off" in run.stderr


@pytest.mark.parametrize(("damage", "at"), [
    (lambda text: text.replace(b"\n", b"\n{\"role\": \n", 1), 2),  # a bad line in the middle
    (lambda text: cut_last_line(text) + b"\n", -1),  # a cut last line that has its newline: not being written
])
def test_any_other_bad_line_is_an_error_that_names_skip_invalid(damage: Any, at: int, tmp_path: Path) -> None:
    source = tmp_path / "t.jsonl"
    source.write_bytes(damage((SAMPLES / "short_chat.jsonl").read_bytes()))
    at = at if at > 0 else source.read_bytes().count(b"\n")
    run = subprocess.run(["compact", str(source), "--unlimited"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and f"{source}:{at}:" in lines[0] and "--skip-invalid" in lines[0], run.stderr


@pytest.mark.parametrize("name", [CLAUDE_CODE, "openai-chat/tau-bench-airline-task3.jsonl"])
def test_skip_invalid_leaves_a_bad_line_out_of_the_output(name: str, realdata: Path, tmp_path: Path) -> None:
    lines = (realdata / name).read_bytes().splitlines(keepends=True)
    lines[5] = lines[5][: len(lines[5]) // 2] + b"\n"  # line 6 cut, in the middle of the file
    source = tmp_path / Path(name).name
    source.write_bytes(b"".join(lines))
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    run = subprocess.run(["compact", str(source), "--unlimited", "--skip-invalid", "-o", str(out),
                          "--report", str(report)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert every_line_is_json(out.read_bytes()) == len(lines) - 1
    assert [s["line"] for s in json.loads(report.read_text())["skipped_lines"]] == [6]
    assert f"{source}:6" in run.stderr or "line 6" in run.stderr


def test_in_place_refuses_a_file_still_being_written(tmp_path: Path) -> None:
    source = tmp_path / "live.jsonl"
    source.write_bytes(cut_last_line((SAMPLES / "agent_session.jsonl").read_bytes()))
    before = source.read_bytes()
    run = subprocess.run(["compact", str(source), "--in-place", "--max-tokens", "500"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"compact: error: {source}:") and "still being written" in lines[0]
    assert source.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["live.jsonl"]


@pytest.mark.parametrize("command", [["stats", "{}"], ["diff", "{}", "{}"], ["validate", "{}", "--for", "openai"],
                                     ["count", "{}"]])
def test_every_command_reading_a_live_session_says_it_left_the_cut_line_out(command: list[str],
                                                                            tmp_path: Path) -> None:
    source = tmp_path / "live.jsonl"
    source.write_bytes(cut_last_line((SAMPLES / "agent_session.jsonl").read_bytes()))
    last = source.read_bytes().count(b"\n") + 1
    run = subprocess.run(["compact", *[str(source) if part == "{}" else part for part in command]],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode in (0, 1), run.stderr  # (validate: 1 when the provider would refuse the rest)
    assert f"{source}:{last}: the last line is cut off mid-JSON" in " ".join((run.stdout + run.stderr).split())
