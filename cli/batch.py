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

from cli.commands import (
    ApiKeyEnvOpt,
    BackendOpt,
    CharsOpt,
    ConfigOpt,
    EncoderOpt,
    FramingOpt,
    KeepOpt,
    MaxFractionOpt,
    MaxMessagesOpt,
    MaxTokensOpt,
    ModelOpt,
    PresetOpt,
    QualityRetryOpt,
    StoreOpt,
    StrategyOpt,
    SummarizerModelOpt,
    SummarizerOpt,
    SummarizerUrlOpt,
    SummaryPromptOpt,
    TurnsOpt,
    WarnOpt,
    WindowOpt,
    build_config,
)
from core.errors import EXIT_CHECK_FAILED, ConfigError

BATCH_HELP = """Compact many transcripts, each on its own, into a folder that mirrors the inputs.

INPUT is a transcript file, a folder (every *.jsonl under it, hidden names left
out) or a glob; conversation-per-line datasets ({..., "messages": [...]} on each
line) are detected and compacted conversation by conversation. Outputs keep
their paths relative to the inputs' common root. A rerun skips inputs whose
output is up to date for the same settings (hashes in .NAME.compact.json beside
each output) unless --force. Takes the compaction options of `compact FILE`.
Example: `compact batch logs/ --out compacted/ --max-tokens 8000 --report batch.json`.
Exit codes: 0 every input done or up to date; 1 some input failed (the others
were done); 2 bad usage; 130 interrupted (finished outputs are whole: rerun to resume).
"""

ENGINES = ("pool", "ray")
FAILURES_SHOWN = 10


def batch(
    inputs: Annotated[list[str], typer.Argument(metavar="INPUT", help="Transcript or dataset files, folders, or globs.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the outputs (created if missing); never one of the inputs.", file_okay=False, show_default=False)],
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Processes (or Ray tasks) at once; at most this many transcripts in memory. Default: every core (Ray: every CPU of the cluster).")] = None,
    engine: Annotated[str, typer.Option("--engine", help="pool (a local process pool) or ray (Ray Data; pip install 'ray[data]').")] = "pool",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Ray cluster to join (auto, HOST:6379 or ray://HOST:10001); default: a local instance started for the run.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Compact every input again, even when its output is up to date.")] = False,
    fail_fast: Annotated[bool, typer.Option("--fail-fast", help="Stop at the first input that fails (the running ones finish).")] = False,
    report: Annotated[str | None, typer.Option("--report", help="Write the batch report (JSON) to FILE; `-` prints it on stdout (the table then goes to stderr).")] = None,
    table: Annotated[bool, typer.Option("--table/--no-table", help="Print the summary table (on stdout; on stderr with --report -).")] = True,
    top: Annotated[int, typer.Option("--top", min=0, help="Rows of the table (default 20; 0 shows all); the report always has every row.")] = 20,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No table and no progress bar (failures are still summed up on stderr).")] = False,
    max_tokens: MaxTokensOpt = None,
    max_messages: MaxMessagesOpt = None,
    max_fraction: MaxFractionOpt = None,
    context_window: WindowOpt = None,
    model: ModelOpt = None,
    encoder: EncoderOpt = None,
    backend: BackendOpt = None,
    chars_per_token: CharsOpt = None,
    framing: FramingOpt = None,
    warn_fraction: WarnOpt = None,
    offload_turns: TurnsOpt = None,
    strategy: StrategyOpt = None,
    preset: PresetOpt = None,
    keep: KeepOpt = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
    summarizer: SummarizerOpt = None,
    summarizer_url: SummarizerUrlOpt = None,
    summarizer_model: SummarizerModelOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    summary_prompt: SummaryPromptOpt = None,
    quality_retry: QualityRetryOpt = None,
    full: Annotated[bool, typer.Option("--full", help="Run every strategy fully, once, whatever the budget.")] = False,
    unlimited: Annotated[bool, typer.Option("--unlimited", help="Compact nothing: only count, warn and rewrite.")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="Drop tool calls without results and results without calls found in the input.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Keep invalid lines (datasets: invalid conversations) as they are instead of failing the input.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the persistent token-count cache.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of usage errors.")] = False,
) -> None:
    from core.batch.runner import batch_report, default_jobs, plan_batch, run_pool
    from core.engine.pipeline import BUDGET, FULL, UNLIMITED

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}", fix="use pool or ray")
    if ray_address is not None and engine != "ray":
        raise ConfigError("--ray-address needs --engine ray")
    if full and unlimited:
        raise ConfigError("--full and --unlimited are mutually exclusive", fix="give one of them")
    settings = build_config(
        config, max_tokens=max_tokens, max_messages=max_messages, max_fraction=max_fraction,
        context_window=context_window, model=model, encoder=encoder, backend=backend,
        chars_per_token=chars_per_token, framing=framing, warn_fraction=warn_fraction,
        offload_turns=offload_turns, strategy=strategy, keep=keep, preset=preset, store=store, summarizer=summarizer,
        summarizer_url=summarizer_url, summarizer_model=summarizer_model, api_key_env=api_key_env,
        summary_prompt_file=summary_prompt, quality_retry=quality_retry,
    )
    _check_encoder(settings)
    mode = FULL if full else UNLIMITED if unlimited else BUDGET
    tasks = plan_batch(inputs, str(out), settings, mode=mode, repair=repair, skip_invalid=skip_invalid,
                       use_cache=not no_cache, force=force)
    if report not in (None, "-"):
        named = {os.path.realpath(path) for task in tasks for path in (task.input, task.output)}
        if os.path.realpath(report) in named:
            raise ConfigError(f"--report {report} names an input or an output", fix="write the report elsewhere")
    if engine == "pool" and jobs is None:
        jobs = default_jobs()
    started = time.perf_counter()
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

                rows = run_ray(tasks, address=ray_address, jobs=jobs, fail_fast=fail_fast, on_row=record)
            else:
                rows = run_pool(tasks, jobs=jobs or 1, fail_fast=fail_fast, on_row=record)
    except KeyboardInterrupt:
        from core.batch.runner import finished_since

        # Workers finish outputs the parent never hears of once Ctrl-C reaches the whole group.
        finished = len({row.index for row in done} | finished_since(tasks, wall_start))
        sys.stderr.write(f"compact: interrupted after {finished:,} of {len(tasks):,} inputs; the outputs written "
                         "are whole, and a rerun resumes where this one stopped\n")
        raise typer.Exit(130) from None
    document = batch_report(tasks, rows, config=settings, out=str(out), engine=engine, jobs=jobs,
                            seconds=time.perf_counter() - started)
    _write_report(document, report)
    if table and not quiet:
        from rich.console import Console

        print_batch(document, Console(stderr=report == "-"), top=top)
    totals = document["totals"]
    if totals["failed"]:
        stopped = f"; --fail-fast stopped the run, {totals['not_run']:,} not run" if totals["not_run"] else ""
        sys.stderr.write(f"compact: error: {totals['failed']:,} of {totals['inputs']:,} inputs failed{stopped}"
                         " (the report lists each with its error)\n")
        raise typer.Exit(EXIT_CHECK_FAILED)


def _check_encoder(settings: Any) -> None:
    """Load the encoder once here, so a bad --encoder is one usage error, not a failure per input."""
    from core.counting.tokenizers import load_counter

    load_counter(settings.encoder_name, backend=settings.backend, chars_per_token=settings.chars_per_token,
                 implied=settings.encoder_implied)


def _write_report(document: dict[str, Any], report: str | None) -> None:
    if report is None:
        return
    import orjson

    data = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    if report == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    from core.io.staged import atomic_write_bytes

    atomic_write_bytes(report, data)


@contextlib.contextmanager
def _progress(total: int, quiet: bool) -> Iterator[Any]:
    """A rich progress bar with rate and ETA on stderr, only on a terminal."""
    from rich.console import Console

    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("–/s" if speed is None else f"{speed:,.1f}/s")

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
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


def print_batch(document: dict[str, Any], console: Any, *, top: int = 20) -> None:
    """The rows (up to ``top``), the totals and the first failures, as rich tables."""
    from rich.table import Table
    from rich.text import Text

    rows = document["rows"]
    totals = document["totals"]
    console.print(Text(f"compact batch · {totals['inputs']:,} input(s) → {document['out']}", style="bold"))
    shown = rows if top == 0 else rows[:top]
    if shown:
        grid = Table(show_edge=False, pad_edge=False)
        grid.add_column("input", overflow="fold")
        grid.add_column("status", no_wrap=True)
        for name in ("messages", "tokens", "saved"):
            grid.add_column(name, justify="right", no_wrap=True)
        grid.add_column("strategies", min_width=22)  # the longest name, deduplicate_file_reads
        for row in shown:
            name = os.path.relpath(row["output"], document["out"])  # the input's path below the common root
            if row["status"] == "failed":
                grid.add_row(name, Text("failed", style="red"), "", "", "", "")
                continue
            kind = f" ({row['conversations']:,} conv.)" if row["kind"] == "dataset" else ""
            grid.add_row(name + kind, row["status"].replace("_", " "),
                         _arrow(row["messages_before"], row["messages_after"]),
                         _arrow(row["tokens_before"], row["tokens_after"]),
                         _saved(row["tokens_before"], row["tokens_after"]), ", ".join(row["strategies"]))
        console.print(grid)
        if len(shown) < len(rows):
            console.print(Text(f"… {len(rows) - len(shown):,} more row(s) in the report (--top 0 shows all)"))
    console.print(_totals_table(totals))
    failures = [r for r in rows if r["status"] == "failed"]
    for row in failures[:FAILURES_SHOWN]:
        console.print(Text(f"failed: {row['error']}", style="red"))
    if len(failures) > FAILURES_SHOWN:
        console.print(Text(f"… and {len(failures) - FAILURES_SHOWN:,} more failure(s) in the report", style="red"))


def _totals_table(totals: dict[str, Any]) -> Any:
    from rich.table import Table

    grid = Table(show_edge=False, pad_edge=False, show_header=False)
    grid.add_column("", style="bold")
    grid.add_column("")
    status = (f"{totals['compacted']:,} compacted, {totals['unchanged']:,} unchanged, "
              f"{totals['up_to_date']:,} up to date, "
              f"{totals['failed']:,} failed")
    if totals["not_run"]:
        status += f", {totals['not_run']:,} not run (--fail-fast)"
    grid.add_row("inputs", status)
    grid.add_row("conversations", f"{totals['conversations']:,} ({totals['over_budget']:,} still over budget)")
    grid.add_row("messages", _arrow(totals["messages_before"], totals["messages_after"]))
    grid.add_row("tokens", f"{_arrow(totals['tokens_before'], totals['tokens_after'])} "
                           f"({_saved(totals['tokens_before'], totals['tokens_after'])} saved)")
    strategies = ", ".join(f"{name} ×{count:,}" for name, count in totals["strategies"].items()) or "none"
    grid.add_row("strategies", strategies)
    seconds = totals["seconds"]
    rate = f" ({totals['inputs'] / seconds:,.1f} inputs/s)" if seconds > 0 and totals["inputs"] else ""
    grid.add_row("time", f"{seconds:,.1f} s{rate}")
    return grid
