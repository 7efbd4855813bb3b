"""Batch compaction: many transcripts, each compacted on its own, in a process pool.

This module plans, schedules and resumes; it compacts nothing itself. The unit of
work is :func:`compact_one`, a pure function of a :class:`BatchTask` (plain,
picklable data: paths, the configuration as a dict, the RunOptions). It hands the
input to :func:`core.api.compact_source` — the very function ``compact FILE`` runs,
so an output is byte for byte what ``compact FILE`` writes with the same options —
which writes the output atomically (a dataset streamed, one conversation at a time);
then it writes the hash sidecar beside it and returns a :class:`BatchRow`; it never
raises. The process pool here and the Ray engine (``core.batch.ray_engine``) both
map that one function, so both give the same bytes.

State: there is no module-level mutable state. A worker process keeps the
token encoder it loaded in core.api's per-process function cache, so each
worker loads it once; nothing is shared between processes.

Resuming: beside each output ``DIR/NAME`` a sidecar ``DIR/.NAME.compact.json``
records the blake2b of the input bytes, of the effective settings and of the
output. A rerun skips a task whose three hashes still match (unless forced).
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import multiprocessing
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import orjson

from core.api import RunOptions, compact_source, file_digest
from core.batch.dataset_run import DATASET, TRANSCRIPT
from core.config import MemoryConfig, config_from_dict
from core.engine.pipeline import BUDGET, CompactionResult
from core.errors import CompactError, ConfigError, InputError, OutputError
from core.io import jsonio
from core.io.staged import atomic_write_bytes, atomic_write_chunks, is_regular_file
from core.report import BatchReport, BatchRow, BatchTotals, summary_failed

SIDECAR_VERSION = 3  # 2: a dataset's rows say summary_failed; 3: rows say unpinned_rules
SIDECAR_SUFFIX = ".compact.json"
COMPACTED = "compacted"
UNCHANGED = "unchanged"  # read and written back, but no strategy changed anything (already within budget)
UP_TO_DATE = "up_to_date"
FAILED = "failed"
PATTERN = ".jsonl"  # a folder's file that is always taken (a broken one fails its row); others when sniffing reads them

OnRow = Callable[["BatchRow"], None]


@dataclass(frozen=True)
class BatchTask:
    """One input to compact: everything a worker needs, as plain data."""

    index: int
    input: str
    output: str
    config: dict[str, Any]  # MemoryConfig.to_dict(); rebuilt with config_from_dict in the worker
    settings: str  # blake2b of the effective settings (settings_digest)
    options: RunOptions = field(default_factory=RunOptions)  # how compact_source runs it
    force: bool = False
    size: int = 0

    @property
    def mode(self) -> str:
        return self.options.mode

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchTask:
        return cls(**{**data, "options": RunOptions.from_dict(data["options"])})


# -- planning ------------------------------------------------------------------------------


def settings_digest(config: MemoryConfig, options: RunOptions) -> str:
    """The hash of everything that decides an output besides its input: config, options, version."""
    settings = {"config": config.to_dict(), "mode": options.mode, "repair": options.repair,
                "skip_invalid": options.skip_invalid, "version": package_version()}
    given = {"formats": [options.source_format, options.target_format], "check_for": options.check_for,
             "graph": options.graph.digest() if options.graph else None}
    settings.update({key: value for key, value in given.items() if value not in (None, [None, None])})
    return hashlib.blake2b(orjson.dumps(settings, option=orjson.OPT_SORT_KEYS), digest_size=32).hexdigest()


@functools.cache
def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("compact-transcripts")
    except PackageNotFoundError:
        return "unknown"


def plan_batch(
    inputs: Sequence[str],
    out: str,
    config: MemoryConfig,
    options: RunOptions | None = None,
    *,
    force: bool = False,
    skipped: list[dict[str, str]] | None = None,
) -> list[BatchTask]:
    """The tasks for INPUT... (files, directories, globs): each output mirrors its input's relative path.

    ``skipped`` receives the files a folder held that are no transcript, each with the reason.
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError("is a file, not a folder", path=out, fix="give --out a folder (it is created if missing)")
    files = expand_inputs(inputs, out, skipped)
    # Workers never use the run memo; a `tool:` rule may pin nothing in some inputs (the batch judges all of them).
    options = dataclasses.replace(options or RunOptions(), memo_ok=False, note_unpinned_tools=True)
    settings = settings_digest(config, options)
    config_dict = config.to_dict()
    inputs_real = {os.path.realpath(path) for path, _ in files}
    tasks = []
    outputs: dict[str, str] = {}
    for index, (path, relative) in enumerate(files):
        output = os.path.join(out, _output_name(path, relative))
        if os.path.realpath(output) in inputs_real:
            raise ConfigError(
                f"the output {output} would overwrite an input", fix="choose an --out folder outside the inputs"
            )
        if output in outputs:
            raise ConfigError(f"{outputs[output]} and {path} would both be written to {output}",
                              fix="rename one of them, or compact them in two runs")
        outputs[output] = path
        tasks.append(BatchTask(
            index=index, input=path, output=output, config=config_dict, settings=settings, options=options,
            force=force, size=os.path.getsize(path),
        ))
    return tasks


def _output_name(path: str, relative: str) -> str:
    """A JSON-array input (``glaive.json``) is written back as JSONL, so its output is named ``glaive.jsonl``."""
    if relative.endswith(PATTERN) or not _is_json_array(path):
        return relative
    return relative.removesuffix(".json") + PATTERN


def _is_json_array(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False  # the worker reports the unreadable file
    return head.removeprefix(jsonio.UTF8_BOM).lstrip()[:1] == b"["


def expand_inputs(inputs: Sequence[str], out: str, skipped: list[dict[str, str]] | None = None) -> list[tuple[str, str]]:
    """(path, output path relative to --out) for every input file, in order, each once.

    A directory contributes every file under it that ``compact FILE`` reads:
    each ``*.jsonl``, and any other whose format sniffing finds (a Gemini CLI
    saved chat, a ShareGPT array); hidden names and the --out folder are left
    out, and the other files go to ``skipped`` with the reason. A glob gives its
    matches. Outputs are relative to the common root of the inputs: a directory
    counts as itself, a file as its folder.
    """
    skipped = [] if skipped is None else skipped
    found: list[tuple[str, str]] = []  # (file, its root)
    for given in inputs:
        if glob.has_magic(given):
            matches = sorted(glob.glob(given, recursive=True))
            if not matches:
                raise InputError("no file matches this pattern", path=given, fix="check the pattern (quote it so the shell leaves it alone)")
            for match in matches:
                found.extend(_expand_one(match, out, skipped))
        elif not os.path.exists(given):
            raise InputError("no such file or directory", path=given, fix="check the path")
        else:
            passed_over = len(skipped)
            entries = _expand_one(given, out, skipped)
            if not entries and os.path.isdir(given):
                raise _no_transcript_in(given, skipped[passed_over:])
            found.extend(entries)
    unique: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path, root in found:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            unique.append((path, root))
    if not unique:
        raise InputError("no transcript to compact", fix="give transcript files, folders holding them, or globs")
    common = os.path.commonpath([os.path.abspath(root) for _, root in unique])
    return [(path, os.path.relpath(os.path.abspath(path), common)) for path, _ in unique]


def _expand_one(path: str, out: str, skipped: list[dict[str, str]]) -> list[tuple[str, str]]:
    if not os.path.isdir(path):
        return [(path, os.path.dirname(os.path.abspath(path)))]
    out_real = os.path.realpath(out)
    files: list[str] = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.realpath(os.path.join(folder, d)) != out_real)
        for name in sorted(n for n in names if not n.startswith(".")):
            file = os.path.join(folder, name)
            reason = None if name.endswith(PATTERN) else why_not_a_transcript(file)
            if reason is None:
                files.append(file)
            else:
                skipped.append({"path": file, "reason": reason})
    return [(f, path) for f in files]


def why_not_a_transcript(path: str) -> str | None:
    """Why ``compact FILE`` would not read this file as a transcript, or None when it would (its format
    sniffed as ``compact FILE`` sniffs it). A file that cannot be JSON is passed over without being read."""
    from core.formats import sniff

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file"
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if head.removeprefix(jsonio.UTF8_BOM).lstrip()[:1] not in (b"{", b"["):
        return "not JSON or JSONL"
    try:
        sniff(path)
    except InputError as exc:
        return exc.what if exc.line is None else f"line {exc.line}: {exc.what}"
    return None


def _no_transcript_in(folder: str, skipped: list[dict[str, str]]) -> InputError:
    if not skipped:
        return InputError("no transcript in this folder", path=folder, fix="give transcript files, or globs")
    first = skipped[0]
    return InputError(f"no transcript in this folder: {len(skipped):,} file(s) passed over, the first "
                      f"{first['path']} ({first['reason']})", path=folder,
                      fix="give a file by name to see why compact cannot read it")


# -- one task ------------------------------------------------------------------------------


def compact_one(task: BatchTask) -> BatchRow:
    """Compact one input into its output (atomically) and say how it went; never raises."""
    started = time.perf_counter()
    try:
        return _compact_one(task, started)
    except CompactError as exc:
        return failed_row(task, str(exc), type(exc).__name__, started)
    except Exception as exc:  # noqa: BLE001 - one bad transcript must not stop the others
        return failed_row(task, f"{task.input}: {type(exc).__name__}: {exc}", type(exc).__name__, started)


def failed_row(task: BatchTask, error: str, error_type: str, started: float | None = None) -> BatchRow:
    seconds = time.perf_counter() - started if started is not None else 0.0
    return BatchRow(index=task.index, input=task.input, output=task.output, status=FAILED,
                    error=" ".join(error.split()), error_type=error_type, seconds=round(seconds, 4))


def sidecar_path(output: str) -> str:
    folder, name = os.path.split(output)
    return os.path.join(folder, f".{name}{SIDECAR_SUFFIX}")


def _compact_one(task: BatchTask, started: float) -> BatchRow:
    input_hash = file_digest(task.input)
    if not task.force:
        row = _up_to_date(task, input_hash, started)
        if row is not None:
            return row
    config = config_from_dict(task.config)
    if task.options.dry_run:  # what a run would do: nothing written (the store a throwaway copy)
        result = compact_source(task.input, config, task.options)
        return dataclasses.replace(_row_of(task, result, config.summarizer_calls_a_model),
                                   seconds=round(time.perf_counter() - started, 4))
    folder = os.path.dirname(task.output) or "."
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the output folder: {exc.strerror or exc}", path=folder,
                          fix="check --out names a folder you can write") from None

    def write(chunks: Iterable[bytes | memoryview]) -> None:
        atomic_write_chunks(task.output, chunks, follow=False)

    result = compact_source(task.input, config, task.options, write=write)
    row = dataclasses.replace(_row_of(task, result, config.summarizer_calls_a_model),
                              seconds=round(time.perf_counter() - started, 4))
    sidecar = {"version": SIDECAR_VERSION, "input": task.input, "input_blake2b": input_hash,
               "settings_blake2b": task.settings, "output_blake2b": file_digest(task.output), "row": row.to_dict()}
    atomic_write_bytes(sidecar_path(task.output), orjson.dumps(sidecar) + b"\n", follow=False)
    return row


def _row_of(task: BatchTask, result: CompactionResult, calls_a_model: bool) -> BatchRow:
    """The batch row of a transcript's or a dataset's result (``calls_a_model``: the summarizer in use does)."""
    from core.api import DatasetResult

    where: dict[str, Any] = {"index": task.index, "input": task.input, "output": task.output}
    if isinstance(result, DatasetResult) and result.dataset is not None:
        data = result.dataset
        return BatchRow(
            **where, status=COMPACTED if data.changed else UNCHANGED, kind=DATASET, conversations=data.conversations,
            messages_before=data.before.messages, messages_after=data.after.messages,
            tokens_before=data.before.tokens, tokens_after=data.after.tokens, strategies=data.strategies,
            over_budget=data.over_budget, summary_failed=int(data.summary_failed > 0), skipped_lines=len(data.skipped_lines),
            conversation_rows=[row.to_dict() for row in data.rows], unpinned_rules=result.unpinned_rules,
        )
    report = result.compression
    if report is None:  # (compact always reports)
        raise AssertionError("compact returned no report")
    changed = bool(report.acted()) or report.warning_appended or report.after != report.before
    return BatchRow(
        **where, status=COMPACTED if changed else UNCHANGED, kind=TRANSCRIPT, conversations=1,
        messages_before=report.before.messages, messages_after=report.after.messages,
        tokens_before=report.before.tokens, tokens_after=report.after.tokens,
        strategies={name: 1 for name in report.acted()}, over_budget=int(report.over_budget),
        summary_failed=int(summary_failed(report.actions, calls_a_model)), skipped_lines=len(report.skipped_lines),
        unpinned_rules=result.unpinned_rules,
    )


def unpinned_rules(rows: Iterable[BatchRow]) -> dict[str, list[tuple[str, str]]]:
    """Each `tool:` keep rule that pinned nothing in some input read: (input, why) for each such input."""
    found: dict[str, list[tuple[str, str]]] = {}
    for row in sorted(rows, key=lambda r: r.index):
        for rule, why in row.unpinned_rules.items():
            found.setdefault(rule, []).append((row.input, why))
    return found


def finished_since(tasks: Sequence[BatchTask], since: float) -> set[int]:
    """Indexes of the tasks whose output was written whole at or after ``since`` (a time.time()).

    The sidecar is written after its output, so a fresh sidecar means a whole
    output; an interrupted batch counts these even when the worker's result
    never reached the parent.
    """
    finished = set()
    for task in tasks:
        try:
            info = os.lstat(sidecar_path(task.output))
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_mtime >= since:
            finished.add(task.index)
    return finished


def _up_to_date(task: BatchTask, input_hash: str, started: float) -> BatchRow | None:
    if not (is_regular_file(sidecar_path(task.output)) and is_regular_file(task.output)):
        return None  # never read through a symlink or from a FIFO planted in the output folder
    try:
        with open(sidecar_path(task.output), "rb") as handle:
            sidecar = orjson.loads(handle.read())
        if (sidecar.get("version") != SIDECAR_VERSION or sidecar.get("input_blake2b") != input_hash
                or sidecar.get("settings_blake2b") != task.settings
                or file_digest(task.output) != sidecar.get("output_blake2b")):
            return None
        recorded = BatchRow.from_dict(sidecar["row"])
    except (OSError, ValueError, TypeError, KeyError, CompactError):
        return None  # no sidecar, an unreadable one, or no output: compact again
    if recorded.summary_failed:
        return None  # written without its summary: ask the summarizer again
    return dataclasses.replace(recorded, index=task.index, input=task.input, output=task.output, status=UP_TO_DATE,
                               seconds=round(time.perf_counter() - started, 4))


# -- the process pool ----------------------------------------------------------------------


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_pool(
    tasks: Sequence[BatchTask], *, jobs: int, fail_fast: bool = False, on_row: OnRow | None = None
) -> list[BatchRow]:
    """Run ``compact_one`` over ``tasks`` in ``jobs`` processes; the rows in the order they finished.

    At most ``jobs`` tasks are submitted at a time (a sliding window), so at
    most ``jobs`` transcripts are in memory. Largest inputs go first, so the
    last ones to finish are short. With ``fail_fast`` nothing new starts after
    the first failure (the running ones finish). A worker that dies (killed,
    out of memory) fails the tasks it was running; the others go on.
    """
    queue = sorted(tasks, key=lambda t: (-t.size, t.index))
    queue.reverse()  # pop() from the end: largest first
    rows: list[BatchRow] = []
    running: dict[Future[BatchRow], BatchTask] = {}
    # spawn: workers start clean (no inherited threads, locks or state) and import what they need.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context)
    stop = False
    try:
        while True:
            while not stop and queue and len(running) < jobs:
                task = queue.pop()
                running[pool.submit(compact_one, task)] = task
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            broken = False
            for future in sorted(done, key=lambda f: running[f].index):
                task = running.pop(future)
                try:
                    row = future.result()
                except BrokenProcessPool:
                    broken = True
                    row = failed_row(task, f"{task.input}: the worker process died (killed, or out of memory)",
                                     "BrokenProcessPool")
                rows.append(row)
                if on_row is not None:
                    on_row(row)
                if fail_fast and row.status == FAILED:
                    stop = True
            if broken and not stop:
                pool.shutdown(wait=False, cancel_futures=True)
                pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return rows


# -- the report ----------------------------------------------------------------------------


def batch_report(
    tasks: Sequence[BatchTask],
    rows: Iterable[BatchRow],
    *,
    config: MemoryConfig,
    out: str,
    engine: str,
    jobs: int | None,
    seconds: float,
    skipped: Sequence[dict[str, str]] = (),
) -> BatchReport:
    """The aggregated report (schemas/batch-report.schema.json): a row per input, the totals, and the
    files the folders held that are no transcript (``skipped``, from :func:`plan_batch`)."""
    ordered = sorted(rows, key=lambda r: r.index)
    done = [r for r in ordered if r.status != FAILED]
    strategies: dict[str, int] = {}
    for row in done:
        for name, count in row.strategies.items():
            strategies[name] = strategies.get(name, 0) + count
    statuses = [r.status for r in ordered]
    totals = BatchTotals(
        inputs=len(tasks), compacted=statuses.count(COMPACTED), unchanged=statuses.count(UNCHANGED),
        up_to_date=statuses.count(UP_TO_DATE), failed=statuses.count(FAILED), not_run=len(tasks) - len(ordered),
        conversations=sum(r.conversations for r in done),
        messages_before=sum(r.messages_before for r in done), messages_after=sum(r.messages_after for r in done),
        tokens_before=sum(r.tokens_before for r in done), tokens_after=sum(r.tokens_after for r in done),
        over_budget=sum(r.over_budget for r in done), summary_failed=sum(r.summary_failed for r in done),
        strategies=strategies, seconds=round(seconds, 3),
    )
    first = tasks[0] if tasks else None
    return BatchReport(engine=engine, jobs=jobs, out=out, mode=first.mode if first else BUDGET,
                       settings_blake2b=first.settings if first else None, config=config.effective_dict(),
                       totals=totals, rows=ordered, skipped=list(skipped))
