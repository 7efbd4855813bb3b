"""The commands: parse options, call one core function, render the result."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.help import OUTPUT
from cli.options import (
    FORMATS,  # noqa: F401 - the formats --from lists, for the tests that read them here
    CountingFlags,
    FromOpt,
    RunFlags,
    SettingsFlags,
    TableOrJson,
    WindowOpt,
    takes,
)
from core.errors import EXIT_OVER_BUDGET, EXIT_SUMMARIZER_FAILED, CheckFailed, ConfigError

RUN_HELP = """Compact a transcript to a budget and write it to stdout (or -o FILE).

Example: `compact session.jsonl --max-tokens 8000 > small.jsonl`.
Exit codes: 0 done; 1 --check-for found what the provider would reject;
2 bad usage or input; 3 still over budget with --strict; 4 written, but the
openai summarizer failed.
The README documents every option at length.
"""

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="Transcript in any format --from names; `-` reads stdin.", show_default=False)]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to FILE (atomically); `-` is stdout.", dir_okay=False, allow_dash=True, rich_help_panel=OUTPUT)]
InPlaceOpt = Annotated[bool, typer.Option("--in-place", help="Rewrite FILE, keeping the first backup.", rich_help_panel=OUTPUT)]
ReportOpt = Annotated[str | None, typer.Option("--report", metavar="FILE", help="Write the report (JSON); `-` is stdout.", rich_help_panel=OUTPUT)]
TableOpt = Annotated[bool | None, typer.Option("--table/--no-table", help="Table on stderr.", show_default="on a terminal", rich_help_panel=OUTPUT)]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Write nothing; print what would change.", rich_help_panel=OUTPUT)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No table, progress bar or warning line on stderr (errors still print).", rich_help_panel=OUTPUT)]


@takes
def run(
    file: FileArg,
    settings: SettingsFlags,
    flags: RunFlags,
    output: OutputOpt = None,
    in_place: InPlaceOpt = False,
    report: ReportOpt = None,
    table: TableOpt = None,
    dry_run: DryRunOpt = False,
    quiet: QuietOpt = False,
) -> None:
    from core.api import compact_source
    from core.engine.pipeline import UNLIMITED
    from core.io.staged import names_stdout

    # `-o -` (or /dev/stdout) is stdout, as `-` is stdin and `--report -` is stdout: stdout holds one thing.
    if output is not None and names_stdout(output):
        output = None
    if report is not None and names_stdout(report):
        report = "-"
    options = flags.options(dry_run=dry_run, budget=settings.budget_flag())
    config = settings.build(quiet=quiet)
    _check_destinations(file, output, in_place, report, store=config.store, graph_out=flags.graph_out,
                        dry_run=dry_run, converting=flags.target_format is not None)
    from cli.output import count_progress, stderr_console

    console = None if quiet else stderr_console(table)
    with _problems_on_stderr(), count_progress(quiet) as progress:
        result = compact_source(file, config, options, progress=progress)
    if dry_run:
        _print_plan(result.report, report)
        if not quiet:
            from cli.output import warn_unwritable_store

            warn_unwritable_store(config.store)
        return
    if in_place:
        from cli.output import refuse_in_place_while_written

        refuse_in_place_while_written(result.report, file)
    _write_outputs(result, file, output=output, in_place=in_place, report=report, graph=flags.graph_output(options))
    _show(result, console, quiet=quiet, compacted=options.mode != UNLIMITED, repair=options.repair)
    if flags.strict and result.over_budget:
        raise typer.Exit(EXIT_OVER_BUDGET)
    failure = _summary_failure(result, config.summarizer_calls_a_model)
    if failure:
        if quiet or result.compression is None:  # (a transcript's table or warning line already said it)
            sys.stderr.write(f"compact: error: {failure}\n")
        raise typer.Exit(EXIT_SUMMARIZER_FAILED)  # a failed summarizer is never a silent success


def _summary_failure(result: Any, calls_a_model: bool) -> str:
    """What the model summarizer's failure left without a summary, or "" when it did not fail."""
    from cli.output import line_list
    from core.report import summary_failed

    if result.compression is None and result.dataset is not None:  # a conversation-per-line dataset
        lines = [row.line for row in result.dataset.rows if row.summary_failed]
        if not lines:
            return ""
        return (f"the summarizer failed on {len(lines):,} of {result.dataset.conversations:,} conversations "
                f"(line {line_list(lines, most=5)}): they were written without a summary (a rerun tries them again)")
    if result.compression is not None and summary_failed(result.compression.actions, calls_a_model):
        return "the summarizer failed: the transcript was written without a summary (a rerun tries again)"
    return ""


def _check_destinations(file: str, output: Path | None, in_place: bool, report: str | None, *, store: str | None,
                        graph_out: Any, dry_run: bool, converting: bool) -> None:
    """Where the transcript, the report, the store and the graph go: checked before anything runs.
    Each its own file, none of them the input (two naming one file destroyed one of them)."""
    from core.io.staged import names_stdout, same_file

    if in_place and output is not None:
        raise ConfigError("--in-place and --output are mutually exclusive", fix="give one of them")
    if in_place and file == "-":
        raise ConfigError("--in-place needs a file, not stdin")
    if in_place and converting:
        raise ConfigError("--in-place keeps the file's format, so it cannot be combined with --to",
                          fix="write the converted transcript with -o FILE")
    named = [(name, str(path)) for name, path in (("--output", output), ("--report", report), ("--store", store),
                                                 ("--graph-out", graph_out)) if path not in (None, "-")]
    if file != "-":
        for name, target in sorted(named, key=lambda item: item[0] != "--report"):  # (the report's line first)
            if same_file(target, file):
                if name in ("--output", "--report"):
                    raise ConfigError(f"{name} names the input file {file}", fix="use --in-place to rewrite the input")
                raise ConfigError(f"the input and {name} name the same file {file}", fix="give each its own file")
    for index, (first, path) in enumerate(named):
        for second, other in named[index + 1:]:
            if same_file(path, other):
                raise ConfigError(f"{first} and {second} name the same file {other}", fix="give each its own file")
    if report == "-" and output is None and not in_place and not dry_run:
        raise ConfigError("--report - needs the transcript in a file", fix="add -o FILE or --in-place, or give --report a file")
    if graph_out is not None and names_stdout(graph_out) and (report == "-" or output is None and not in_place):
        raise ConfigError("--graph-out names stdout, where the transcript or the report already goes",
                          fix="write the graph, the transcript or the report to a file")
    written: list[tuple[str, Any]] = [("--report", report)]
    if not dry_run:  # (a dry run writes only its report)
        written += [("--output", output), ("--graph-out", graph_out), ("--in-place", file if in_place else None)]
    _check_writable(written)


def _check_writable(targets: Iterable[tuple[str, Any]]) -> None:
    """Each file the run will write can be written: found only when writing, a report into a folder
    failed the run after the transcript had gone to stdout."""
    from cli.output import check_output_target
    from core.io.staged import names_stdout

    for option, path in targets:
        if path is not None and not names_stdout(path):
            check_output_target(option, path)


@contextlib.contextmanager
def _problems_on_stderr() -> Iterator[None]:
    """--check-for refused the result: a line per problem on stderr, then the one error line."""
    from core.api import ProviderRejected

    try:
        yield
    except ProviderRejected as exc:
        for problem in exc.problems:
            sys.stderr.write(f"compact: {problem.in_result()}: {problem.message} ({problem.fix})\n")
        from core.analysis.provider_check import REPAIRABLE

        repairable = any(p.code in REPAIRABLE for p in exc.problems)
        raise CheckFailed(exc.what, fix="see the lines above; --repair drops orphan calls and results" if repairable
                          else "see the lines above") from None


def _print_plan(report: dict[str, Any], target: str | None) -> None:
    """--dry-run: the plan as text, or as the report (JSON) on stdout with --report -."""
    from cli.errors import outputs_written
    from cli.output import write_json
    from cli.render import plan_lines

    write_json(report, target)
    if target is not None:
        outputs_written()
    if target != "-":  # stdout holds one thing: the plan as JSON (the report) instead of text
        typer.echo("\n".join(plan_lines(report)))


def _show(result: Any, console: Any, *, quiet: bool, compacted: bool, repair: bool) -> None:
    """The usage table on stderr, or without it the strategies that failed."""
    if console is not None and result.compression is None:
        from cli.render import dataset_table

        console.print(dataset_table(result.dataset))
    elif console is not None:
        from cli.render import print_table

        print_table(result.report, console, compacted=compacted, repair=repair)
    elif not quiet:
        _warn_strategy_errors(result.report)
        _warn_shortfall(result, repair=repair)


def _warn_shortfall(result: Any, *, repair: bool) -> None:
    """Without the table, a missed budget, kept invalid lines or kept orphans are one line on stderr:
    a script or CI that never draws the table would not notice them otherwise."""
    from cli.output import dataset_warning, run_warning

    warning = dataset_warning(result.dataset, result.report["input"]) if result.compression is None else run_warning(result.report, repair=repair)
    if warning:
        sys.stderr.write(f"compact: warning: {warning}\n")


def _warn_strategy_errors(report: dict[str, Any]) -> None:
    """Without the table, a strategy that failed (a summarizer down) still gets a line on stderr."""
    for action in report.get("actions") or []:
        if action.get("error"):
            sys.stderr.write(f"compact: warning: {action['strategy']} failed in pass {action['pass']}: "
                             f"{' '.join(str(action['error']).split())} (its messages were left as they were)\n")


def _write_outputs(result: Any, file: str, *, output: Path | None, in_place: bool, report: str | None,
                   graph: tuple[Path, Iterable[bytes]] | None = None) -> None:
    from cli.errors import outputs_written
    from cli.output import json_bytes
    from core.io.staged import StagedWrites
    from core.io.transcript import backup_chunks, same_bytes, write_chunks

    report_bytes = json_bytes(result.report)
    staged = StagedWrites()
    backup = ""
    real = os.path.realpath(file) if in_place else ""
    # A file the run would write back byte for byte stays as it is: no rewrite, no backup of the same bytes.
    unchanged = in_place and same_bytes(result.chunks(), real)
    # Everything is staged, then renamed together: a failure or Ctrl-C leaves no output
    # (no report or --graph-out for a transcript that was never written, no backup without its rewrite).
    try:
        if report not in (None, "-"):
            staged.add(report, [report_bytes])
        if graph is not None:
            staged.add(*graph)
        if in_place:
            if not unchanged:
                backup = free_backup_name(real)
                staged.add(backup, backup_chunks(real), follow=False)  # a name the user never gave
                staged.add(real, result.chunks())
        elif output is not None:
            staged.add(output, result.chunks())
        else:
            write_chunks(result.chunks(), sys.stdout.buffer)
        staged.commit(done=outputs_written)
    except BaseException:
        staged.discard()
        raise
    if unchanged:
        sys.stderr.write(f"compact: {file}: unchanged: left as it was, no backup made\n")
    elif in_place and not backup.endswith(".bak"):
        sys.stderr.write(f"compact: {file}: the original stays in {real}.bak; this run's input was kept as {backup}\n")
    if report == "-":
        sys.stdout.buffer.write(report_bytes)
        sys.stdout.buffer.flush()


def free_backup_name(path: str) -> str:
    """FILE.bak, or when an earlier --in-place left one, FILE.bak.1, FILE.bak.2, ...: no backup is overwritten."""
    candidate = f"{path}.bak"
    number = 0
    while os.path.lexists(candidate):
        number += 1
        candidate = f"{path}.bak.{number}"
    return candidate


@takes
def count(
    file: Annotated[str, typer.Argument(metavar="FILE", help="Transcript (JSONL); `-` reads stdin.", show_default=False)],
    context_window: WindowOpt = None,
    output_format: Annotated[TableOrJson, typer.Option("--format", "-f", help="The usage table or one JSON document, on stdout.")] = TableOrJson.table,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Count around invalid lines instead of failing.")] = False,
    source_format: FromOpt = None,
    *,
    counting: CountingFlags,
) -> None:
    from core.api import DatasetResult, count_file

    settings = counting.build(context_window=context_window)
    result = count_file(file, settings, use_cache=not counting.no_cache, skip_invalid=skip_invalid,
                        source_format=source_format)
    if output_format == "json":
        from cli.output import print_json

        print_json(_usage(result, settings))
        return
    from rich.console import Console

    from cli.render import dataset_table, print_table

    console = Console()  # the table is what `count` prints: stdout, so `compact count f | less` shows it
    if isinstance(result, DatasetResult):
        console.print(dataset_table(result.dataset, compacted=False))
    else:
        print_table(result.report, console, compacted=False)


def _usage(result: Any, settings: Any) -> dict[str, Any]:
    """`count --format json`: a transcript's usage, or a dataset's totals and a row per conversation."""
    report = result.compression
    if report is None:
        data = result.dataset
        window, resolved = settings.window()
        return {
            "input": data.input, "encoder": data.encoder.to_dict(), "before": data.before.to_dict(),
            "skipped_lines": data.skipped_lines, "format": "dataset", "window": window, "window_resolved": resolved,
            "conversations": data.conversations,
            "rows": [{"line": row.line, "messages": row.messages_before, "tokens": row.tokens_before}
                     for row in data.rows],
        }
    return {
        "input": report.input, "encoder": report.encoder.to_dict(), "before": report.before.to_dict(),
        "orphans": report.orphans, "skipped_lines": report.skipped_lines,
        "format": report.format.input if report.format else "openai",
        "window": report.budget.window, "window_resolved": report.budget.window_resolved,
    }


@takes
def config_show(settings: SettingsFlags) -> None:
    from cli.output import print_json

    config = settings.build()
    effective = config.effective_dict()
    window, resolved = config.window()
    effective["resolved"] = {"encoder": config.encoder_name, "window": window, "window_resolved": resolved}
    print_json(effective)
