"""`compact batch` (core.batch.runner, cli.batch): many inputs, a process pool, one report, resumable."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from core.batch import runner as core_batch
from core.batch.runner import (
    COMPACTED,
    FAILED,
    UP_TO_DATE,
    BatchTask,
    compact_one,
    plan_batch,
    sidecar_path,
)
from core.config import MemoryConfig
from core.io.schema_loader import validator
from tests.helpers import invoke, msg, write_messages
from tests.test_dataset import conversation, dataset_bytes

BUDGET = ["--max-tokens", "3000"]


def make_tree(root: Path, samples: Path) -> Path:
    """in/ with nested folders, a dataset, a broken file, and files a folder input must leave out."""
    tree = root / "in"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "data").mkdir()
    (tree / "broken").mkdir()
    (tree / ".hidden").mkdir()
    shutil.copy(samples / "agent_session.jsonl", tree / "a" / "session.jsonl")
    write_messages(tree / "a" / "b" / "small.jsonl", conversation(4))
    (tree / "data" / "set.jsonl").write_bytes(dataset_bytes(
        {"task_id": 0, "messages": [msg("system", "s"), msg("user", "hi")]},
        {"task_id": 1, "messages": conversation(6)},
        {"task_id": 2, "messages": conversation(2, big=50)},
    ))
    (tree / "broken" / "bad.jsonl").write_text('{"role": "user", "content": "hi"}\n{"role": "user", "content": \n')
    (tree / "notes.txt").write_text("not a transcript\n")
    (tree / ".secret.jsonl").write_text('{"role": "user", "content": "hidden"}\n')
    write_messages(tree / ".hidden" / "x.jsonl", [msg("user", "hidden")])
    return tree


def run_batch(*args: str) -> tuple[Any, dict[str, Any] | None]:
    result = invoke("batch", *args)
    report = None
    if "--report" in args:
        target = args[args.index("--report") + 1]
        text = result.stdout if target == "-" else Path(target).read_text()
        report = json.loads(text)
        errors = list(validator("batch-report").iter_errors(report))
        assert not errors, errors[0]
    return result, report


def rows_by_input(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(r["input"]).name: r for r in report["rows"]}


@pytest.fixture
def tree(tmp_path: Path, samples: Path) -> Path:
    return make_tree(tmp_path, samples)


# -- a whole batch ----------------------------------------------------------------------------------


def test_batch_over_a_folder_with_nested_folders_a_dataset_and_a_broken_file(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result, report = run_batch(str(tree), "--out", str(out), *BUDGET, "--jobs", "2", "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 1, "a failed input makes the exit code 1; the others are done"
    assert "1 of 4 inputs failed; the first: " in result.stderr and "broken" in result.stderr  # its reason, table or not

    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["a/.session.jsonl.compact.json", "a/b/.small.jsonl.compact.json", "a/b/small.jsonl",
                       "a/session.jsonl", "data/.set.jsonl.compact.json", "data/set.jsonl"]

    assert report is not None
    rows = rows_by_input(report)
    assert set(rows) == {"session.jsonl", "small.jsonl", "set.jsonl", "bad.jsonl"}
    assert [r["index"] for r in report["rows"]] == [0, 1, 2, 3]
    bad = rows["bad.jsonl"]
    assert (bad["status"], bad["error_type"]) == (FAILED, "InputError")
    assert bad["error"].startswith(f"{tree / 'broken' / 'bad.jsonl'}:2:")
    assert "malformed JSON" in bad["error"]

    session = rows["session.jsonl"]
    assert (session["status"], session["kind"], session["conversations"]) == (COMPACTED, "transcript", 1)
    assert session["tokens_after"] < 3000 < session["tokens_before"]
    assert session["strategies"] and all(v == 1 for v in session["strategies"].values())
    data = rows["set.jsonl"]
    assert (data["kind"], data["conversations"]) == ("dataset", 3)
    assert [c["line"] for c in data["conversation_rows"]] == [1, 2, 3]
    assert [c["changed"] for c in data["conversation_rows"]] == [False, True, False]

    totals = report["totals"]
    done = [r for r in report["rows"] if r["status"] != FAILED]
    assert (totals["inputs"], totals["compacted"], totals["failed"], totals["up_to_date"]) == (4, 3, 1, 0)
    assert totals["conversations"] == 5
    for key in ("messages_before", "messages_after", "tokens_before", "tokens_after"):
        assert totals[key] == sum(r[key] for r in done)
    assert report["engine"] == "pool" and report["jobs"] == 2

    assert "compact batch · 4 input(s)" in result.stdout, "the table goes to stdout"
    assert "failed: " in result.stdout and "malformed JSON" in result.stdout


def test_outputs_are_what_the_main_command_writes(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_batch(str(tree / "a"), "--out", str(out), *BUDGET, "-q")
    for name in ("session.jsonl", "b/small.jsonl"):
        single = invoke(str(tree / "a" / name), *BUDGET)
        assert single.exit_code == 0
        assert (out / name).read_bytes() == single.stdout_bytes


def test_files_and_globs_mirror_paths_below_their_common_root(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result, report = run_batch(str(tree / "a" / "session.jsonl"), str(tree / "a" / "b" / "*.jsonl"),
                               str(tree / "a" / "session.jsonl"), "--out", str(out), *BUDGET, "-q",
                               "--report", "-")
    assert result.exit_code == 0
    assert report is not None and report["totals"]["inputs"] == 2, "an input given twice is compacted once"
    assert (out / "session.jsonl").is_file() and (out / "b" / "small.jsonl").is_file()


def test_an_output_folder_inside_the_input_folder_is_not_read_back(tree: Path) -> None:
    out = tree / "compacted"
    first, _ = run_batch(str(tree / "a"), "--out", str(tree / "a" / "compacted"), *BUDGET, "-q")
    assert first.exit_code == 0
    _, report = run_batch(str(tree / "a"), "--out", str(tree / "a" / "compacted"), *BUDGET, "-q", "--report", "-")
    assert report is not None and report["totals"]["inputs"] == 2
    assert not out.exists()


# -- resuming -----------------------------------------------------------------------------------------


def test_a_rerun_skips_up_to_date_outputs_and_force_redoes_them(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [str(tree), "--out", str(out), *BUDGET, "-q", "--report", "-"]
    _, first = run_batch(*args)
    assert first is not None
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.jsonl")}

    result, second = run_batch(*args)
    assert result.exit_code == 1, "the broken input is tried again, and fails again"
    assert second is not None
    statuses = {name: r["status"] for name, r in rows_by_input(second).items()}
    assert statuses == {"session.jsonl": UP_TO_DATE, "small.jsonl": UP_TO_DATE, "set.jsonl": UP_TO_DATE,
                        "bad.jsonl": FAILED}
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.jsonl")} == stamps, "nothing was rewritten"
    for key in ("messages_before", "messages_after", "tokens_before", "tokens_after", "conversations"):
        assert second["totals"][key] == first["totals"][key], "skipped rows keep their figures"
    assert rows_by_input(second)["set.jsonl"]["conversation_rows"] == rows_by_input(first)["set.jsonl"]["conversation_rows"]

    _, forced = run_batch(*args, "--force")
    assert forced is not None
    assert {r["status"] for r in forced["rows"]} == {COMPACTED, FAILED}
    assert (out / "a" / "session.jsonl").stat().st_mtime_ns != stamps[out / "a" / "session.jsonl"]


def test_a_changed_input_setting_or_output_is_redone(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [str(tree / "a"), "--out", str(out), "-q", "--report", "-"]
    run_batch(*args, *BUDGET)

    write_messages(tree / "a" / "b" / "small.jsonl", conversation(5))
    _, report = run_batch(*args, *BUDGET)
    assert report is not None
    assert {n: r["status"] for n, r in rows_by_input(report).items()} == {
        "session.jsonl": UP_TO_DATE, "small.jsonl": COMPACTED}

    (out / "session.jsonl").write_text("edited by hand\n")
    _, report = run_batch(*args, *BUDGET)
    assert report is not None
    assert rows_by_input(report)["session.jsonl"]["status"] == COMPACTED
    assert (out / "session.jsonl").read_text() != "edited by hand\n"

    _, report = run_batch(*args, "--max-tokens", "2000")
    assert report is not None
    assert {r["status"] for r in report["rows"]} == {COMPACTED}, "other settings: every output is redone"


def test_the_sidecar_records_the_hashes_beside_the_output(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_batch(str(tree / "a"), "--out", str(out), *BUDGET, "-q")
    sidecar = json.loads(Path(sidecar_path(str(out / "session.jsonl"))).read_text())
    assert set(sidecar) == {"version", "input", "input_blake2b", "settings_blake2b", "output_blake2b", "row"}
    assert sidecar["output_blake2b"] == core_batch.file_digest(str(out / "session.jsonl"))
    assert sidecar["input_blake2b"] == core_batch.file_digest(str(tree / "a" / "session.jsonl"))


# -- failures -----------------------------------------------------------------------------------------


def test_fail_fast_stops_at_the_first_failure(tree: Path, tmp_path: Path) -> None:
    # The largest input starts first: make the broken one the largest, and run one job.
    bad = tree / "broken" / "bad.jsonl"
    bad.write_text(json.dumps(msg("user", "x" * 2_000_000)) + "\n{broken\n")
    out = tmp_path / "out"
    result, report = run_batch(str(tree), "--out", str(out), *BUDGET, "--jobs", "1", "--fail-fast",
                               "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 1
    assert report is not None
    assert [r["status"] for r in report["rows"]] == [FAILED]
    assert report["totals"]["not_run"] == 3
    assert "--fail-fast stopped the run, 3 not run" in result.stderr
    assert not out.exists() or not any(out.rglob("*.jsonl"))


def test_a_failure_late_in_a_file_leaves_no_output_and_no_temporary_file(tree: Path, tmp_path: Path) -> None:
    data = tree / "data" / "set.jsonl"
    data.write_bytes(data.read_bytes() + b'{"task_id": 9, "messages": [{"role": "robot"}]}\n')
    out = tmp_path / "out"
    result, report = run_batch(str(tree / "data"), "--out", str(out), *BUDGET, "--report", "-", "-q")
    assert result.exit_code == 1
    assert report is not None
    assert report["rows"][0]["error"].endswith("set.jsonl:4: message 1: unknown role 'robot' "
                                               "(expected one of system, developer, user, assistant, tool, function; "
                                               "--skip-invalid leaves bad lines out)")
    assert [p for p in out.rglob("*") if p.is_file()] == [], "no output, no sidecar, no temporary file"


def test_compact_one_returns_a_failed_row_instead_of_raising(tmp_path: Path) -> None:
    config = MemoryConfig().with_overrides(max_tokens=100)
    task = BatchTask(index=0, input=str(tmp_path), output=str(tmp_path / "o.jsonl"), config=config.to_dict(), settings="s")
    row = compact_one(task)
    assert (row.status, row.error_type) == (FAILED, "InputError")
    assert "is a directory" in (row.error or "")

    broken = BatchTask(index=1, input=str(tmp_path / "missing.jsonl"), output="o", config={"strategies": [{"kind": "nope"}]},
                       settings="s")
    assert compact_one(broken).status == FAILED

    weird = write_messages(tmp_path / "w.jsonl", [msg("user", "x")])
    odd = BatchTask(index=2, input=str(weird), output=str(tmp_path / "o2.jsonl"), config={"max_tokens": "ten"}, settings="s")
    row = compact_one(odd)
    assert row.status == FAILED and row.error_type == "TypeError", "any exception becomes a row, with its type"


def test_tasks_and_the_task_function_are_picklable(tree: Path, tmp_path: Path) -> None:
    tasks = plan_batch([str(tree / "a")], str(tmp_path / "out"), MemoryConfig().with_overrides(max_tokens=3000))
    assert pickle.loads(pickle.dumps(tasks)) == tasks
    assert pickle.loads(pickle.dumps(compact_one)) is compact_one
    assert BatchTask.from_dict(orjson.loads(orjson.dumps(tasks[0].to_dict()))) == tasks[0]


# -- the pool keeps at most --jobs transcripts in flight ----------------------------------------------


class RecordingPool:
    """Stands in for ProcessPoolExecutor: runs a task only when `wait` asks, and counts what is in flight."""

    in_flight: ClassVar[list[Future[Any]]] = []
    most: ClassVar[int] = 0

    def __init__(self, max_workers: int, mp_context: Any = None) -> None:
        self.max_workers = max_workers

    def submit(self, fn: Any, task: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.task = (fn, task)  # type: ignore[attr-defined]
        RecordingPool.in_flight.append(future)
        RecordingPool.most = max(RecordingPool.most, len(RecordingPool.in_flight))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def fake_wait(futures: Any, return_when: Any = None) -> tuple[set[Future[Any]], set[Future[Any]]]:
    future = RecordingPool.in_flight.pop(0)
    fn, task = future.task  # type: ignore[attr-defined]
    future.set_result(fn(task))
    return {future}, set(futures) - {future}


def test_the_pool_never_submits_more_than_jobs_tasks(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(7):
        write_messages(tree / "a" / f"extra{n}.jsonl", conversation(2, big=10))
    monkeypatch.setattr(core_batch, "ProcessPoolExecutor", RecordingPool)
    monkeypatch.setattr(core_batch, "wait", fake_wait)
    RecordingPool.in_flight, RecordingPool.most = [], 0
    tasks = plan_batch([str(tree / "a")], str(tmp_path / "out"), MemoryConfig().with_overrides(max_tokens=3000))
    seen: list[Any] = []
    rows = core_batch.run_pool(tasks, jobs=3, on_row=seen.append)
    assert len(rows) == len(tasks) == 9 and seen == rows
    assert RecordingPool.most == 3
    assert rows[0].input.endswith("session.jsonl"), "the largest input starts first"


# -- bad usage ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tree}/nowhere", "--out", "{tmp}/out"], "nowhere: no such file or directory"),
        (["{tree}/*.nothing", "--out", "{tmp}/out"], "no file matches this pattern"),
        (["{tree}/broken", "--out", "{tree}/broken"], "would overwrite an input"),
        (["{tree}/.hidden/..", "--out", "{tmp}/out", "--engine", "spark"], "unknown engine 'spark'"),
        (["{tree}/a", "--out", "{tmp}/out", "--ray-address", "auto"], "--ray-address needs --engine ray"),
        (["{tree}/a", "--out", "{tmp}/out", "--encoder", "cl100k"], "unknown encoder 'cl100k'"),
        (["{tree}/a", "--out", "{tmp}/out", "--full", "--unlimited"], "mutually exclusive"),
        (["{tree}/a", "--out", "{tmp}/out", "--unlimited", "--max-messages", "3"], "--max-messages would be ignored"),
        (["{tree}/a", "--out", "{tmp}/out", "--summarizer", "openai", "--summarizer-url", "ftp://x", "--summarizer-model",
          "m"], "summarizer URL 'ftp://x' is not an http(s) URL"),
        (["{tree}/a", "--out", "{tmp}/out", "--report", "{tree}/a/session.jsonl"], "names an input or an output"),
    ],
)
def test_bad_usage_exits_2_with_one_line(tree: Path, tmp_path: Path, args: list[str], message: str) -> None:
    filled = [a.format(tree=tree, tmp=tmp_path) for a in args]
    result = invoke("batch", *filled)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("compact: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_an_out_that_is_a_file_is_bad_usage(tree: Path) -> None:
    result = invoke("batch", str(tree / "a"), "--out", str(tree / "notes.txt"))
    assert result.exit_code == 2
    assert "notes.txt' is a file" in result.stderr


def test_a_folder_takes_every_format_compact_reads_and_lists_what_it_skipped(realdata: Path, samples: Path,
                                                                            tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copyfile(samples / "agent_session.jsonl", folder / "session.jsonl")
    shutil.copyfile(realdata / "gemini-cli" / "gemini-cli-chat-session-pomodoro-timer.json", folder / "chat.json")
    shutil.copyfile(realdata / "sharegpt" / "glaive_toolcall_en_demo.json", folder / "glaive.json")
    (folder / "package.json").write_text('{"name": "app", "version": "1.0.0"}\n')
    (folder / "notes.txt").write_text("not a transcript\n")
    out = tmp_path / "out"
    result, report = run_batch(str(folder), "--out", str(out), *BUDGET, "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert report is not None
    assert sorted(rows_by_input(report)) == ["chat.json", "glaive.json", "session.jsonl"]
    assert {row["status"] for row in report["rows"]} <= {COMPACTED, "unchanged"}
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["chat.json", "glaive.jsonl",
                                                                                    "session.jsonl"]
    skipped = {Path(entry["path"]).name: entry["reason"] for entry in report["skipped"]}
    assert sorted(skipped) == ["notes.txt", "package.json"]
    assert "not JSON" in skipped["notes.txt"] and "in any format" in skipped["package.json"]
    assert "compact batch · 3 input(s)" in result.stdout
    for name, reason in skipped.items():  # the table says what it passed over, and why
        assert f"skipped: {folder / name}: {reason}" in " ".join(result.stdout.split())


def test_a_session_still_being_written_is_compacted_and_the_line_left_out_is_said(samples: Path,
                                                                                 tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    text = (samples / "agent_session.jsonl").read_bytes().rstrip(b"\n")
    (folder / "live.jsonl").write_bytes(text[: len(text) - 40])  # the agent is writing its last line
    for table in ("--table", "--no-table"):
        result, report = run_batch(str(folder), "--out", str(tmp_path / "out"), *BUDGET, table, "--force",
                                   "--report", str(tmp_path / "r.json"))
        assert result.exit_code == 0, result.output
        assert report is not None and report["rows"][0]["skipped_lines"] == 1
        assert f"{folder / 'live.jsonl'}: 1 line(s) left out" in " ".join(result.output.split())


def test_an_empty_folder_is_bad_usage(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = invoke("batch", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "no transcript in this folder" in result.stderr


def test_the_batch_command_is_in_the_help() -> None:
    result = invoke("--help")
    assert "batch" in result.stdout
    help_text = invoke("batch", "--help").stdout
    for option in ("--out", "--jobs", "--engine", "--ray-address", "--force", "--fail-fast", "--report", "--max-tokens"):
        assert option in help_text


def test_every_option_of_batch_is_in_the_readme() -> None:
    """docs/batch.md names every option of `compact batch`."""
    import typer.main

    from cli.app import app
    from tests.conftest import ROOT

    readme = (ROOT / "docs" / "batch.md").read_text()
    command = typer.main.get_command(app).commands["batch"]  # type: ignore[attr-defined]
    options = [param for param in command.params if param.param_type_name == "option"]
    assert len(options) > 10  # the check below must not pass on an empty list
    for param in options:
        assert any(f"`{opt}" in readme for opt in param.opts), param.opts


@pytest.mark.skipif(os.name != "posix", reason="spawned workers inherit the environment the same way on POSIX")
def test_workers_use_the_callers_cache_folder(tree: Path, tmp_path: Path, isolated_cache: Path) -> None:
    run_batch(str(tree / "a"), "--out", str(tmp_path / "out"), *BUDGET, "-q", "--jobs", "2")
    assert (isolated_cache / "token-counts.sqlite").exists()


def test_a_failed_model_summary_is_exit_4_and_the_input_is_compacted_again(chat_server: Any, samples: Path,
                                                                         tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """As `compact FILE`: the output is written, but a summarizer that failed is never a silent 0."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(samples / "seed_example.jsonl", inputs / "a.jsonl")
    out = tmp_path / "out"
    config = tmp_path / "c.toml"
    config.write_text("summarizer_retries = 0\n")
    args = [str(inputs), "--out", str(out), "-j", "1", "--preset", "seed", "--max-messages", "6", "--strategy",
            "summarize", "--summarizer", "openai", "--summarizer-url", chat_server.url,
            "--summarizer-model", "test-model", "--config", str(config), "--report", str(tmp_path / "r.json"), "-q"]
    chat_server.fail(500, '{"error": "overloaded"}')
    failed = invoke("batch", *args)
    assert failed.exit_code == 4, failed.output
    assert "1 of 1 inputs" in failed.stderr and "summarizer" in failed.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    validator("batch-report").validate(report)
    assert report["rows"][0]["summary_failed"] == 1 and report["totals"]["summary_failed"] == 1
    assert (out / "a.jsonl").read_bytes() == (samples / "seed_example.jsonl").read_bytes()  # written, untouched
    # The rerun does not call that output up to date: it asks the summarizer again.
    chat_server.reply('<summary topic="vault" compressed-from-turns="1-3">The vault is in Lisbon.</summary>\n'
                      "## Preserved Kinds: technical_detail")
    again = invoke("batch", *args)
    assert again.exit_code == 0, again.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rows"][0]["status"] == "compacted" and report["totals"]["summary_failed"] == 0
    assert "Lisbon" in (out / "a.jsonl").read_text()


def test_a_dataset_with_a_failed_model_summary_is_exit_4_in_batch(chat_server: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset input counts as failed by the summarizer when any of its conversations is."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "set.jsonl").write_bytes(dataset_bytes({"messages": conversation(6)}, {"messages": conversation(5)}))
    config = tmp_path / "c.toml"
    config.write_text("summarizer_retries = 0\n")
    args = [str(inputs), "--out", str(tmp_path / "out"), "-j", "1", "--preset", "seed", "--max-messages", "6",
            "--strategy", "summarize", "--summarizer", "openai", "--summarizer-url", chat_server.url,
            "--summarizer-model", "test-model", "--config", str(config), "--report", str(tmp_path / "r.json"), "-q"]
    chat_server.fail(500, '{"error": "overloaded"}')  # the first conversation's request; the second's is answered
    failed = invoke("batch", *args)
    assert failed.exit_code == 4, failed.output
    report = json.loads((tmp_path / "r.json").read_text())
    validator("batch-report").validate(report)
    assert report["rows"][0]["summary_failed"] == 1 and report["totals"]["summary_failed"] == 1
    assert [c["summary_failed"] for c in report["rows"][0]["conversation_rows"]] == [True, False]
    assert invoke("batch", *args).exit_code == 0  # not up to date: compacted again, and now summarized


def test_a_summary_that_does_not_pay_off_is_not_a_failed_summarizer(samples: Path, tmp_path: Path) -> None:
    """The offline summary of a tiny span is larger than the span: summarize skips it, as `compact FILE`
    does, and that is exit 0 with nothing to retry, not the exit 4 of a model summarizer that failed."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(samples / "seed_example.jsonl", inputs / "a.jsonl")
    args = [str(inputs), "--out", str(tmp_path / "out"), "--max-tokens", "50", "--report", str(tmp_path / "r.json"), "-q"]
    single = invoke(str(inputs / "a.jsonl"), "--max-tokens", "50", "--report", str(tmp_path / "one.json"))
    assert single.exit_code == 0
    skipped = json.loads((tmp_path / "one.json").read_text())["skipped"]
    assert [s["strategy"] for s in skipped] == ["summarize"] and "would not be smaller" in skipped[0]["reason"]
    result = invoke("batch", *args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rows"][0]["summary_failed"] == 0 and report["totals"]["summary_failed"] == 0
    assert json.loads((tmp_path / "r.json").read_text())["rows"][0]["status"] == "compacted"
    again = invoke("batch", *args)
    assert json.loads((tmp_path / "r.json").read_text())["rows"][0]["status"] == "up_to_date", again.output


def test_an_output_folder_that_cannot_be_made_is_a_clear_reason(tmp_path: Path, samples: Path) -> None:
    # out/a is a file, so out/a/ cannot hold a/short_chat.jsonl's output: said in words, not as
    # "FileExistsError: [Errno 17]".
    (tmp_path / "in" / "a").mkdir(parents=True)
    (tmp_path / "in" / "a" / "short_chat.jsonl").write_bytes((samples / "short_chat.jsonl").read_bytes())
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a").write_text("")
    result = invoke("batch", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--no-table")
    assert result.exit_code == 1
    assert f"{tmp_path / 'out' / 'a'}: cannot create the output folder: File exists" in result.stderr
    assert "Errno" not in result.stderr


@pytest.mark.parametrize(("columns", "listed"), [(80, False), (160, True)])
def test_on_a_narrow_terminal_the_rows_leave_the_strategies_to_the_totals(
        columns: int, listed: bool, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns a strategies column folded every row into six lines of cut names."""
    monkeypatch.setenv("COLUMNS", str(columns))
    result, _ = run_batch(str(tree / "a"), "--out", str(tmp_path / "out"), *BUDGET)
    assert result.exit_code == 0, result.stderr
    table = [line for line in result.stdout.splitlines() if "│" in line or "┃" in line]
    assert max(len(line) for line in table) <= columns
    header = next(line for line in table if "┃" in line)
    assert ("strategies" in header) is listed
    session = next(line for line in table if line.startswith("session.jsonl"))
    assert session.split("│")[1].strip() == "compacted"  # one line a row
    assert "clear_tool_results" in " ".join(result.stdout.split())  # the totals name every strategy
