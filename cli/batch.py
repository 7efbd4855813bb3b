"""`compact batch INPUT... --out DIR`: compact many transcripts, each on its own."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.help import BATCH, OUTPUT
from cli.options import RunFlags, SettingsFlags, takes
from core.errors import EXIT_CHECK_FAILED, EXIT_OVER_BUDGET, EXIT_SUMMARIZER_FAILED, ConfigError

BATCH_HELP = """Compact many transcripts, each on its own, into a folder that mirrors the inputs.

INPUT is a transcript file, a folder (every file under it that `compact FILE`
reads: each *.jsonl, and any other whose format is found, such as a Gemini saved
chat or a ShareGPT .json; hidden names left out, the others listed as skipped)
or a glob; conversation-per-line datasets ({..., "messages": [...]} on each
line) are detected and compacted conversation by conversation. Outputs keep
their paths relative to the inputs' common root. A rerun skips inputs whose
output is up to date for the same settings (hashes in .NAME.compact.json beside
each output) unless --force. Takes the options of `compact FILE` but -o and
--in-place (--from, --to, --check-for, --graph... apply to each input).
Example: `compact batch logs/ --out compacted/ --max-tokens 8000 --report batch.json`.
Exit codes: 0 every input done or up to date; 1 some input failed (the others
were done); 2 bad usage; 3 an input still over budget with --strict; 4 the
model summarizer failed on an input (written without a summary; a rerun tries
it again); 130 interrupted (finished outputs are whole: rerun to resume).
"""

ENGINES = ("pool", "ray")
FAILURES_SHOWN = 10


InputsArg = Annotated[list[str], typer.Argument(metavar="INPUT", help="Transcript or dataset files, folders, or globs.", show_default=False)]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Folder for the outputs (created if missing); never one of the inputs.", file_okay=False, show_default=False, rich_help_panel=OUTPUT)]
MAX_JOBS = 4096  # far past any machine's cores; a process pool takes no more than a C int anyway
JobsOpt = Annotated[int | None, typer.Option("--jobs", "-j", min=1, max=MAX_JOBS, help=f"Processes (or Ray tasks) at once, at most {MAX_JOBS}; at most this many transcripts in memory.", show_default="every core, or every CPU of the Ray cluster", rich_help_panel=BATCH)]
EngineOpt = Annotated[str, typer.Option("--engine", metavar="|".join(ENGINES), help="pool (a local process pool) or ray (Ray Data; pip install 'ray[data]').", rich_help_panel=BATCH)]
RayAddressOpt = Annotated[str | None, typer.Option("--ray-address", metavar="ADDRESS", help="Ray cluster to join: auto, HOST:6379 or ray://HOST:10001.", show_default="a local instance started for the run", rich_help_panel=BATCH)]
ForceOpt = Annotated[bool, typer.Option("--force", help="Compact every input again, even when its output is up to date.", rich_help_panel=OUTPUT)]
FailFastOpt = Annotated[bool, typer.Option("--fail-fast", help="Stop at the first input that fails (the running ones finish).", rich_help_panel=BATCH)]
ReportOpt = Annotated[str | None, typer.Option("--report", metavar="FILE", help="Write the batch report (JSON) to FILE; `-` prints it on stdout (the table then goes to stderr).", rich_help_panel=OUTPUT)]
TableOpt = Annotated[bool, typer.Option("--table/--no-table", help="Print the summary table (on stdout; on stderr with --report -).", rich_help_panel=OUTPUT)]
TopOpt = Annotated[int, typer.Option("--top", min=0, help="Rows of the table (0 shows all); the report always has every row.", rich_help_panel=OUTPUT)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No table, progress bar or warning line (errors, and the failures summed up, still print on stderr).", rich_help_panel=OUTPUT)]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Write no output and no sidecar; the table and report say what a run would do.", rich_help_panel=OUTPUT)]


@takes
def batch(
    inputs: InputsArg,
    out: OutOpt,
    jobs: JobsOpt = None,
    engine: EngineOpt = "pool",
    ray_address: RayAddressOpt = None,
    force: ForceOpt = False,
    fail_fast: FailFastOpt = False,
    report: ReportOpt = None,
    table: TableOpt = True,
    top: TopOpt = 20,
    quiet: QuietOpt = False,
    dry_run: DryRunOpt = False,
    *,
    settings: SettingsFlags,
    flags: RunFlags,
) -> None:
    from core.batch.runner import batch_report, default_jobs, plan_batch

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}", fix="use pool or ray")
    if ray_address is not None and engine != "ray":
        raise ConfigError("--ray-address needs --engine ray")
    report = _report_target(report, out)
    options = flags.options(dry_run=dry_run, budget=settings.budget_flag())
    config = settings.build(quiet=quiet)
    _check_settings(config)
    skipped: list[dict[str, str]] = []
    tasks = plan_batch(inputs, str(out), config, options, force=force, skipped=skipped)
    if report not in (None, "-"):
        named = {os.path.realpath(path) for task in tasks for path in (task.input, task.output)}
        if os.path.realpath(report) in named:
            raise ConfigError(f"--report {report} names an input or an output", fix="write the report elsewhere")
    if engine == "pool" and jobs is None:
        jobs = default_jobs()
    started = time.perf_counter()
    if not dry_run:  # each input's output is written when it is done: Ctrl-C from here leaves those
        from cli.errors import outputs_written

        outputs_written("the inputs done before it are written (a rerun skips them)")
    rows = _run(tasks, engine=engine, jobs=jobs, ray_address=ray_address, fail_fast=fail_fast, quiet=quiet)
    document = batch_report(tasks, rows, config=config, out=str(out), engine=engine, jobs=jobs,
                            seconds=time.perf_counter() - started, skipped=skipped)
    _write_report(document.to_dict(), report, out)
    if not dry_run:
        flags.save_graph(options)
    elif not quiet:
        from cli.output import warn_unwritable_store

        warn_unwritable_store(config.store)
    if table and not quiet:
        from rich.console import Console

        print_batch(document, Console(stderr=report == "-"), top=top, dry_run=dry_run)
    elif not quiet:
        for line in skipped_lines(document.skipped) + lines_left_out(document.rows):
            sys.stderr.write(f"compact: {line}\n")
    _judge_tool_rules(document.rows, quiet=quiet)
    totals = document.totals
    if totals.failed:
        stopped = f"; --fail-fast stopped the run, {totals.not_run:,} not run" if totals.not_run else ""
        first = next((row.error for row in rows if row.error), "unknown")  # the table may be off: one reason at least
        sys.stderr.write(f"compact: error: {totals.failed:,} of {totals.inputs:,} inputs failed{stopped}; "
                         f"the first: {first} (the report lists each with its error)\n")
        raise typer.Exit(EXIT_CHECK_FAILED)
    if flags.strict and totals.over_budget:
        raise typer.Exit(EXIT_OVER_BUDGET)
    if totals.summary_failed:
        sys.stderr.write(f"compact: error: the summarizer failed on {totals.summary_failed:,} of {totals.inputs:,} inputs:"
                         " they were written without a summary (the report's rows say which; a rerun tries them again)\n")
        raise typer.Exit(EXIT_SUMMARIZER_FAILED)


def _judge_tool_rules(rows: list[Any], *, quiet: bool) -> None:
    """A `tool:` keep rule may pin nothing in some inputs (a warning, unless -q), not in every input read."""
    from core.batch.runner import FAILED, unpinned_rules

    read = sum(row.status != FAILED for row in rows)
    for rule, inputs in unpinned_rules(rows).items():
        if len(inputs) == read:
            path, why = inputs[0]
            raise ConfigError(f"keep rule {rule!r} pins nothing in any of the {read:,} inputs; in the first, {path}: {why}")
        if not quiet:
            sys.stderr.write(f"compact: warning: keep rule {rule!r} pinned nothing in {len(inputs):,} of {read:,} "
                             "inputs (the report's rows say which)\n")


def _report_target(report: str | None, out: Path) -> str | None:
    """Where --report goes: None, "-" (stdout; the table then on stderr) or a file, checked now
    (a folder inside --out may not exist yet: the batch makes it)."""
    from core.io.staged import names_stdout

    if report is not None and names_stdout(report):
        report = "-"
    if report not in (None, "-"):  # before any input is compacted, not once they all are
        from cli.output import check_output_target

        check_output_target("--report", report, created=out)
    return report


def _write_report(document: dict[str, Any], report: str | None, out: Path) -> None:
    """The report to its target; its folder inside --out is made when no output made it (a dry run,
    every input failed, a subfolder no input maps to)."""
    from cli.output import inside_folder, write_json

    if report not in (None, "-") and inside_folder(report, out):
        os.makedirs(os.path.dirname(os.path.realpath(report)), exist_ok=True)
    write_json(document, report)


def _run(tasks: list[Any], *, engine: str, jobs: int | None, ray_address: str | None, fail_fast: bool,
         quiet: bool) -> list[Any]:
    """The rows of every task run, on the pool or on Ray; Ctrl-C says how far it got, and exits 130."""
    from core.batch.runner import run_pool

    wall_start = time.time()
    done: list[Any] = []
    try:
        with _progress(len(tasks), quiet) as on_row:
            def record(row: Any) -> None:
                done.append(row)
                if on_row is not None:
                    on_row(row)

            if engine == "ray":
                from core.batch.ray_engine import run_ray

                return run_ray(tasks, address=ray_address, jobs=jobs, fail_fast=fail_fast, on_row=record)
            return run_pool(tasks, jobs=jobs or 1, fail_fast=fail_fast, on_row=record)
    except KeyboardInterrupt:
        from core.batch.runner import finished_since

        # Workers finish outputs the parent never hears of once Ctrl-C reaches the whole group.
        finished = len({row.index for row in done} | finished_since(tasks, wall_start))
        sys.stderr.write(f"compact: interrupted after {finished:,} of {len(tasks):,} inputs; the outputs written "
                         "are whole, and a rerun resumes where this one stopped\n")
        raise typer.Exit(130) from None


def _check_settings(settings: Any) -> None:
    """Load the encoder and make the summarizer once here, so a bad --encoder, summarizer URL, key or
    prompt file is one usage error (exit 2), not a failure per input."""
    from core.api import open_counter
    from core.summarizers import make_summarizer

    open_counter(settings, use_cache=False)
    make_summarizer(settings)


@contextlib.contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Any]:
    """The bar of a batch: inputs done of all, the failures so far, rate and ETA."""
    from cli.output import progress_bar

    with progress_bar(quiet, rate=True) as bar:
        if bar is None:
            yield None
            return
        task = bar.add_task("compacting", total=total)
        failed = 0

        def on_row(row: Any) -> None:
            nonlocal failed
            if row.status == "failed":
                failed += 1
                bar.update(task, description=f"compacting ({failed:,} failed)")
            bar.advance(task)

        yield on_row


def _arrow(before: int, after: int) -> str:
    return f"{before:,} → {after:,}"


def _saved(before: int, after: int) -> str:
    return f"{(before - after) / before:.0%}" if before else "–"


# Below this width a strategies column folds every row into lines of cut names.
STRATEGIES_SHOWN_FROM = 120


def print_batch(document: Any, console: Any, *, top: int = 20, dry_run: bool = False) -> None:
    """The rows (up to ``top``), the totals and the first failures of a BatchReport, as rich tables."""
    from rich.table import Table
    from rich.text import Text

    rows = document.rows
    console.print(Text(f"compact batch · {document.totals.inputs:,} input(s) → {document.out}", style="bold"))
    if dry_run:
        console.print(Text("dry run: nothing written; the statuses say what a run would do"))
    shown = rows if top == 0 else rows[:top]
    if shown:
        grid = Table(show_edge=False, pad_edge=False)
        grid.add_column("input", overflow="fold")
        grid.add_column("status", no_wrap=True)
        for name in ("messages", "tokens", "saved"):
            grid.add_column(name, justify="right", no_wrap=True)
        listed = console.width >= STRATEGIES_SHOWN_FROM  # (narrower, the totals name them)
        if listed:
            grid.add_column("strategies", min_width=22)  # the longest name, deduplicate_file_reads
        for row in shown:
            name = os.path.relpath(row.output, document.out)  # the input's path below the common root
            if row.status == "failed":
                grid.add_row(name, Text("failed", style="red"), "", "", "", *([""] if listed else []))
                continue
            kind = f" ({row.conversations:,} conv.)" if row.kind == "dataset" else ""
            grid.add_row(name + kind, row.status.replace("_", " "), _arrow(row.messages_before, row.messages_after),
                         _arrow(row.tokens_before, row.tokens_after), _saved(row.tokens_before, row.tokens_after),
                         *([", ".join(row.strategies)] if listed else []))
        console.print(grid)
        if len(shown) < len(rows):
            console.print(Text(f"… {len(rows) - len(shown):,} more row(s) in the report (--top 0 shows all)"))
    console.print(_totals_table(document.totals))
    for line in skipped_lines(document.skipped) + lines_left_out(rows):
        console.print(Text(line, style="yellow"), soft_wrap=True)
    failures = [r for r in rows if r.status == "failed"]
    for row in failures[:FAILURES_SHOWN]:
        console.print(Text(f"failed: {row.error}", style="red"))
    if len(failures) > FAILURES_SHOWN:
        console.print(Text(f"… and {len(failures) - FAILURES_SHOWN:,} more failure(s) in the report", style="red"))


def skipped_lines(skipped: list[dict[str, str]]) -> list[str]:
    """What the folder walk passed over, and why (the report lists every one)."""
    lines = [f"skipped: {entry['path']}: {entry['reason']}" for entry in skipped[:FAILURES_SHOWN]]
    if len(skipped) > FAILURES_SHOWN:
        lines.append(f"… and {len(skipped) - FAILURES_SHOWN:,} more skipped file(s) in the report")
    return lines


def lines_left_out(rows: list[Any]) -> list[str]:
    """The inputs whose reader left lines out: a last line cut off (a session still being written), or
    the invalid lines --skip-invalid leaves out (`compact FILE` on the input names them)."""
    left = [row for row in rows if row.skipped_lines]
    lines = [f"warning: {row.input}: {row.skipped_lines:,} line(s) left out (a last line cut off mid-JSON, or "
             "invalid lines under --skip-invalid; `compact FILE` on it names them)" for row in left[:FAILURES_SHOWN]]
    if len(left) > FAILURES_SHOWN:
        lines.append(f"… and {len(left) - FAILURES_SHOWN:,} more input(s) with lines left out in the report")
    return lines


def _totals_table(totals: Any) -> Any:
    from rich.table import Table

    grid = Table(show_edge=False, pad_edge=False, show_header=False)
    grid.add_column("", style="bold")
    grid.add_column("")
    status = (f"{totals.compacted:,} compacted, {totals.unchanged:,} unchanged, {totals.up_to_date:,} up to date, "
              f"{totals.failed:,} failed")
    if totals.not_run:
        status += f", {totals.not_run:,} not run (--fail-fast)"
    grid.add_row("inputs", status)
    grid.add_row("conversations", f"{totals.conversations:,} ({totals.over_budget:,} still over budget)")
    grid.add_row("messages", _arrow(totals.messages_before, totals.messages_after))
    grid.add_row("tokens", f"{_arrow(totals.tokens_before, totals.tokens_after)} "
                           f"({_saved(totals.tokens_before, totals.tokens_after)} saved)")
    strategies = ", ".join(f"{name} ×{count:,}" for name, count in totals.strategies.items()) or "none"
    grid.add_row("strategies", strategies)
    seconds = totals.seconds
    rate = f" ({totals.inputs / seconds:,.1f} inputs/s)" if seconds > 0 and totals.inputs else ""
    grid.add_row("time", f"{seconds:,.1f} s{rate}")
    return grid
