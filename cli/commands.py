"""The commands: parse options, call one core function, render the result."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from core.errors import EXIT_OVER_BUDGET, EXIT_SUMMARIZER_FAILED, ConfigError

RUN_HELP = """Compact a transcript to a budget and write it to stdout (or -o FILE).

FILE is a transcript in any supported format (see --from); `-` reads stdin.
Example: `compact session.jsonl --max-tokens 8000 > small.jsonl`.
Exit codes: 0 done; 1 --check-for found what the provider would reject;
2 bad usage or input; 3 still over budget with --strict; 4 written, but the
openai summarizer failed.
The README documents every option at length.
"""

FORMATS = "openai, dataset, anthropic, claude-code, responses, codex, pi, gemini-stream, gemini-chat, sharegpt"  # = core.formats.names()

# -- options shared by run, count and config show ---------------------------------

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML or JSON config file; flags override it.", dir_okay=False)]
MaxTokensOpt = Annotated[int | None, typer.Option("--max-tokens", min=1, help="Compact until under N tokens.")]
MaxMessagesOpt = Annotated[int | None, typer.Option("--max-messages", min=1, help="Compact until at most N messages.")]
MaxFractionOpt = Annotated[float | None, typer.Option("--max-fraction", min=0.0, max=1.0, help="Compact until under F (0-1) of the window [0.8].")]
WindowOpt = Annotated[int | None, typer.Option("--context-window", min=1, help="Window when --model sets none [128000].")]
ModelOpt = Annotated[str | None, typer.Option("--model", metavar="NAME", help="Model (gpt-4o, …): sets window and encoder.")]
EncoderOpt = Annotated[str | None, typer.Option("--encoder", metavar="NAME", help="tiktoken encoding, model, or heuristic [cl100k_base].")]
BackendOpt = Annotated[str | None, typer.Option("--backend", metavar="auto|tiktoken|bpe", help="Tokenizer backend [auto].")]
CharsOpt = Annotated[float | None, typer.Option("--chars-per-token", min=0.1, help="Ratio for --encoder heuristic [4.0].")]
FramingOpt = Annotated[bool | None, typer.Option("--framing/--no-framing", help="Count the chat API's framing tokens.")]
WarnOpt = Annotated[float | None, typer.Option("--warn-fraction", min=0.0, max=1.0, help="Append a context warning at F (0-1) of the window.")]
TurnsOpt = Annotated[int | None, typer.Option("--offload-turns", min=1, help="Turns drop_turns removes per pass [2].")]
StrategyOpt = Annotated[list[str] | None, typer.Option("--strategy", "-s", metavar="NAME[:k=v,...]", help="Ordered strategy list; repeat.")]
PresetOpt = Annotated[str | None, typer.Option("--preset", metavar="default|seed", help="Strategy list and rules: default, or seed (the original ones) [default].")]
StoreOpt = Annotated[str | None, typer.Option("--store", metavar="PATH", envvar="COMPACT_STORE", help="SQLite offload store (enables offload, recall).")]
SummarizerOpt = Annotated[str | None, typer.Option("--summarizer", metavar="extractive|openai|none", help="Who summarizes what is removed [extractive].")]
SummarizerUrlOpt = Annotated[str | None, typer.Option("--summarizer-url", metavar="URL", help="Chat-completions server, e.g. http://127.0.0.1:8080/v1.")]
SummarizerModelOpt = Annotated[str | None, typer.Option("--summarizer-model", metavar="NAME", help="Model name sent to the server.")]
ApiKeyEnvOpt = Annotated[str | None, typer.Option("--api-key-env", metavar="NAME", help="Variable holding the API key [OPENAI_API_KEY].")]
SummaryPromptOpt = Annotated[str | None, typer.Option("--summary-prompt", metavar="FILE", help="Replace the summary system prompt.")]
QualityRetryOpt = Annotated[bool | None, typer.Option("--quality-retry/--no-quality-retry", help="Ask again when a summary misses something [on].")]
FromOpt = Annotated[str | None, typer.Option("--from", metavar="FORMAT", help=f"Read FILE as FORMAT instead of detecting it: {FORMATS}.")]
KeepOpt = Annotated[list[str] | None, typer.Option("--keep", "-k", metavar="RULE", help="Pin: role:NAME, tool:NAME, match:REGEX, line:N, line:A-B.")]


class CountFormat(StrEnum):
    table = "table"
    json = "json"


def build_config(
    config: Path | None,
    *,
    max_tokens: int | None = None,
    max_messages: int | None = None,
    max_fraction: float | None = None,
    context_window: int | None = None,
    model: str | None = None,
    encoder: str | None = None,
    backend: str | None = None,
    chars_per_token: float | None = None,
    framing: bool | None = None,
    warn_fraction: float | None = None,
    offload_turns: int | None = None,
    strategy: list[str] | None = None,
    keep: list[str] | None = None,
    preset: str | None = None,
    **seam_options: Any,
) -> Any:
    from core.config import MemoryConfig, StrategySpec, load_config

    base = load_config(str(config)) if config is not None else MemoryConfig()
    strategies = tuple(StrategySpec.parse(s) for s in strategy) if strategy else None
    settings = base.with_overrides(
        max_tokens=max_tokens,
        max_messages=max_messages,
        max_fraction=max_fraction,
        context_window_tokens=context_window,
        model=model,
        encoder=encoder,
        backend=backend,
        chars_per_token=chars_per_token,
        framing=framing,
        warn_fraction=warn_fraction,
        offload_turns=offload_turns,
        strategies=strategies,
        keep=(*base.keep, *keep) if keep else None,
        preset=preset,
        **seam_options,
    )
    _warn_unknown_model(settings)
    return settings


def _warn_unknown_model(settings: Any) -> None:
    """An unknown --model still runs (on the default window and encoder), but never silently."""
    from core.counting.models import lookup_model, nearest_models

    if not settings.model or lookup_model(settings.model) is not None:
        return
    window, _ = settings.window()
    near = nearest_models(settings.model)
    hint = f"did you mean {', '.join(near)}?" if near else "`compact config show` shows the effective settings"
    sys.stderr.write(
        f"compact: warning: unknown model {settings.model!r}: using a {window:,}-token window and the "
        f"{settings.encoder_name} encoder ({hint})\n"
    )


def _stderr_is_terminal() -> bool:
    # Checked before importing rich, which a piped run never needs (it costs ~40 ms).
    return sys.stderr.isatty() or bool(os.environ.get("FORCE_COLOR") or os.environ.get("TTY_COMPATIBLE"))


def _stderr_console(table: bool | None) -> Any:
    show = _stderr_is_terminal() if table is None else table
    if not show:
        return None
    from rich.console import Console

    return Console(stderr=True)


def run(
    file: Annotated[str, typer.Argument(metavar="FILE", help="Transcript; `-` reads stdin.", show_default=False)],
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
    source_format: FromOpt = None,
    target_format: Annotated[str | None, typer.Option("--to", metavar="FORMAT", help="Write in FORMAT [the input's].")] = None,
    config: ConfigOpt = None,
    store: StoreOpt = None,
    summarizer: SummarizerOpt = None,
    summarizer_url: SummarizerUrlOpt = None,
    summarizer_model: SummarizerModelOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    summary_prompt: SummaryPromptOpt = None,
    quality_retry: QualityRetryOpt = None,
    full: Annotated[bool, typer.Option("--full", help="Run every strategy once, whatever the budget.")] = False,
    unlimited: Annotated[bool, typer.Option("--unlimited", help="Compact nothing: count, warn, convert.")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="Drop calls without results and vice versa.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Keep invalid lines as they are.")] = False,
    max_line_bytes: Annotated[int | None, typer.Option("--max-line-bytes", metavar="N", help="Refuse a line over N bytes [256 MiB].", show_default=False)] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 3 when still over budget.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to FILE (atomically); `-` is stdout.", dir_okay=False, allow_dash=True)] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Rewrite FILE, keeping the first backup.")] = False,
    report: Annotated[str | None, typer.Option("--report", metavar="FILE", help="Write the report (JSON); `-` is stdout.")] = None,
    table: Annotated[bool | None, typer.Option("--table/--no-table", help="Usage table on stderr [on a terminal].")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Skip the persistent token-count cache.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; print what would change.")] = False,
    check_for: Annotated[str | None, typer.Option("--check-for", metavar="openai|anthropic|responses", help="Refuse a result the API would reject.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No table, no progress (errors still show).")] = False,
    graph: Annotated[Path | None, typer.Option("--graph", metavar="SNAPSHOT", help="Working graph to render in.", dir_okay=False)] = None,
    graph_merge: Annotated[Path | None, typer.Option("--graph-merge", metavar="DELTA", help="Merge DELTA into --graph first.", dir_okay=False)] = None,
    merge_policy: Annotated[str, typer.Option("--merge-policy", metavar="keep_existing|prefer_incoming|merge", help="On an id conflict.")] = "merge",
    merge_weights: Annotated[str, typer.Option("--merge-weights", metavar="incoming|max|sum", help="How weights combine.")] = "incoming",
    graph_out: Annotated[Path | None, typer.Option("--graph-out", help="Write the resulting graph.", dir_okay=False)] = None,
    graph_max_nodes: Annotated[int, typer.Option("--graph-max-nodes", min=0, help="Most nodes shown.")] = 64,
    graph_max_relationships: Annotated[int, typer.Option("--graph-max-relationships", min=0, help="Most relationships shown.")] = 128,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    from core.api import compact_file
    from core.engine.pipeline import BUDGET, FULL, UNLIMITED

    if output is not None and str(output) == "-":
        output = None  # `-o -` is stdout, as `-` is stdin and `--report -` is stdout
    if full and unlimited:
        raise ConfigError("--full and --unlimited are mutually exclusive", fix="give one of them")
    if check_for is not None:
        from core.analysis.provider_check import PROVIDERS

        if check_for not in PROVIDERS:  # checked before anything runs (a summarizer may cost money)
            raise ConfigError(f"unknown provider {check_for!r} for --check-for", fix=f"use one of {', '.join(PROVIDERS)}")
    if in_place and output is not None:
        raise ConfigError("--in-place and --output are mutually exclusive", fix="give one of them")
    if in_place and file == "-":
        raise ConfigError("--in-place needs a file, not stdin")
    _check_formats(source_format, target_format)
    if in_place and target_format is not None:
        raise ConfigError("--in-place keeps the file's format, so it cannot be combined with --to",
                          fix="write the converted transcript with -o FILE")
    to_stdout = output is None and not in_place
    from core.io.staged import same_file

    if file != "-":
        for name, target in (("--report", report), ("--output", output)):
            if target not in (None, "-") and same_file(str(target), file):
                raise ConfigError(f"{name} names the input file {file}", fix="use --in-place to rewrite the input")
    if report == "-" and to_stdout and not dry_run:
        raise ConfigError("--report - needs the transcript in a file", fix="add -o FILE or --in-place, or give --report a file")
    settings = build_config(
        config,
        max_tokens=max_tokens,
        max_messages=max_messages,
        max_fraction=max_fraction,
        context_window=context_window,
        model=model,
        encoder=encoder,
        backend=backend,
        chars_per_token=chars_per_token,
        framing=framing,
        warn_fraction=warn_fraction,
        offload_turns=offload_turns,
        strategy=strategy,
        keep=keep,
        preset=preset,
        store=store,
        summarizer=summarizer,
        summarizer_url=summarizer_url,
        summarizer_model=summarizer_model,
        api_key_env=api_key_env,
        summary_prompt_file=summary_prompt,
        quality_retry=quality_retry,
        max_line_bytes=max_line_bytes,
    )
    if graph is None and (graph_merge is not None or graph_out is not None):
        raise ConfigError("--graph-merge and --graph-out need --graph SNAPSHOT")
    working = None
    step = None
    if graph is not None:
        from core.graph import GraphContextConfig
        from core.graph.context import graph_step, load_working_graph

        context = GraphContextConfig(max_nodes=graph_max_nodes, max_relationships=graph_max_relationships)
        working = load_working_graph(
            str(graph), merge=str(graph_merge) if graph_merge else None,
            policy=merge_policy, weights=merge_weights, context=context,
        )
        step = graph_step(working, settings.graph_marker)
    mode = FULL if full else UNLIMITED if unlimited else BUDGET
    console = None if quiet else _stderr_console(table)
    from core.api import scratch_store

    with scratch_store(settings) if dry_run else _unchanged(settings) as effective, _progress(quiet) as progress:
        result = compact_file(
            file, effective, mode=mode, repair=repair, skip_invalid=skip_invalid, use_cache=not no_cache,
            graph_step=step, progress=progress, memo_ok=check_for is None,
            source_format=source_format, target_format=target_format,
        )
    if result.report.get("kind") == "dataset" and (dry_run or check_for is not None or graph is not None):
        option = "--dry-run" if dry_run else "--check-for" if check_for is not None else "--graph"
        raise ConfigError(f"{option} works on one transcript, and {file} is a conversation-per-line dataset",
                          fix="leave it out, or compact the conversations one file each")
    if check_for is not None:
        _check_provider(result, check_for)
    if dry_run:
        from cli.render import plan_lines

        if report not in (None, "-"):
            from core.io.staged import atomic_write_bytes

            atomic_write_bytes(report, _report_bytes(result.report))
        if report == "-":  # stdout holds one thing: the plan as JSON (the report) instead of text
            sys.stdout.buffer.write(_report_bytes(result.report))
        else:
            typer.echo("\n".join(plan_lines(result.report)))
        return
    if working is not None and graph_out is not None:
        from core.graph import save_snapshot

        save_snapshot(working.graph, graph_out)
    _write_outputs(result, file, output=output, in_place=in_place, report=report)
    if console is not None and result.report.get("kind") == "dataset":
        from cli.render import dataset_table

        console.print(dataset_table(result.report))
    elif console is not None:
        from cli.render import print_table

        print_table(result.report, console, compacted=mode != UNLIMITED)
    elif not quiet:
        _warn_strategy_errors(result.report)
    if strict and result.over_budget:
        raise typer.Exit(EXIT_OVER_BUDGET)
    if effective.summarizer_in_use == "openai" and _summary_failed(result.report):
        raise typer.Exit(EXIT_SUMMARIZER_FAILED)  # a failed summarizer is never a silent success


def _summary_failed(report: dict[str, Any]) -> bool:
    """The summarizer failed and no later pass got a summary from it."""
    summaries = [a for a in report.get("actions") or [] if a.get("strategy") == "summarize"]
    return any(a.get("error") for a in summaries) and not any(not a.get("error") for a in summaries)


def _warn_strategy_errors(report: dict[str, Any]) -> None:
    """Without the table, a strategy that failed (a summarizer down) still gets a line on stderr."""
    for action in report.get("actions") or []:
        if action.get("error"):
            sys.stderr.write(f"compact: warning: {action['strategy']} failed in pass {action['pass']}: "
                             f"{' '.join(str(action['error']).split())} (its messages were left as they were)\n")


def _check_formats(*given: str | None) -> None:
    from core import formats

    for name in given:
        if name is not None and name not in formats.names():
            raise ConfigError(f"unknown format {name!r}", fix=f"use one of {', '.join(formats.names())}")


@contextlib.contextmanager
def _unchanged(value: Any) -> Iterator[Any]:
    yield value


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Any]:
    """A rich progress bar on stderr for long counts and summarizer calls, only on a terminal."""
    if quiet or not _stderr_is_terminal():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        yield update


def _check_provider(result: Any, provider: str) -> None:
    """Judge the transcript about to be written as ``compact validate --for`` would; name lines of the result."""
    from core.analysis.provider_check import REPAIRABLE
    from core.analysis.provider_requests import validate_bytes
    from core.errors import CheckFailed

    written_as = result.report.get("format", {}).get("output", "openai")
    verdicts = validate_bytes(b"".join(result.chunks()), written_as, provider)
    problems = [p for v in verdicts for p in v.problems]
    if problems:
        for problem in problems:
            where = f"line {problem.line}" if problem.line is not None else f"message {problem.index + 1}"
            sys.stderr.write(f"compact: {where} of the result: {problem.message} ({problem.fix})\n")
        repairable = any(p.code in REPAIRABLE for p in problems)
        raise CheckFailed(
            f"the compacted transcript would be rejected by {provider} ({len(problems)} problem(s)); nothing was written",
            fix="see the lines above; --repair drops orphan calls and results" if repairable else "see the lines above",
        )


def _report_bytes(report: dict[str, Any]) -> bytes:
    import orjson

    return orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n"


def _write_outputs(result: Any, file: str, *, output: Path | None, in_place: bool, report: str | None) -> None:
    from core.io.staged import StagedWrites
    from core.io.transcript import backup_chunks, write_chunks

    report_bytes = _report_bytes(result.report)
    staged = StagedWrites()
    backup = ""
    # Everything is staged, then renamed together: a failure or Ctrl-C leaves no output
    # (no report for a transcript that was never written, no backup without its rewrite).
    try:
        if report not in (None, "-"):
            staged.add(report, [report_bytes])
        if in_place:
            real = os.path.realpath(file)
            backup = free_backup_name(real)
            staged.add(backup, backup_chunks(real), follow=False)  # a name the user never gave
            staged.add(real, result.chunks())
        elif output is not None:
            staged.add(output, result.chunks())
        else:
            write_chunks(result.chunks(), sys.stdout.buffer)
        staged.commit()
    except BaseException:
        staged.discard()
        raise
    if in_place and not backup.endswith(".bak"):
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


def count(
    file: Annotated[str, typer.Argument(metavar="FILE", help="Transcript (JSONL); `-` reads stdin.", show_default=False)],
    model: ModelOpt = None,
    encoder: EncoderOpt = None,
    backend: BackendOpt = None,
    context_window: WindowOpt = None,
    chars_per_token: CharsOpt = None,
    framing: FramingOpt = None,
    config: ConfigOpt = None,
    output_format: Annotated[CountFormat, typer.Option("--format", help="The usage table or one JSON document, on stdout.")] = CountFormat.table,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the persistent token-count cache.")] = False,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Count around invalid lines instead of failing.")] = False,
    source_format: FromOpt = None,
) -> None:
    import orjson

    from core.api import compact_file
    from core.engine.pipeline import UNLIMITED

    settings = build_config(
        config, model=model, encoder=encoder, backend=backend, context_window=context_window,
        chars_per_token=chars_per_token, framing=framing,
    )
    _check_formats(source_format)
    result = compact_file(file, settings, mode=UNLIMITED, skip_invalid=skip_invalid, use_cache=not no_cache,
                          source_format=source_format)
    report = result.report
    dataset = report.get("kind") == "dataset"
    if output_format == "json":
        usage = _dataset_usage(report, settings) if dataset else _usage(report)
        sys.stdout.buffer.write(orjson.dumps(usage, option=orjson.OPT_INDENT_2) + b"\n")
        return
    from rich.console import Console

    from cli.render import dataset_table, print_table

    console = Console()  # the table is what `count` prints: stdout, so `compact count f | less` shows it
    if dataset:
        console.print(dataset_table(report, compacted=False))
    else:
        print_table(report, console, compacted=False)


def _usage(report: dict[str, Any]) -> dict[str, Any]:
    usage = {k: report[k] for k in ("input", "encoder", "before", "orphans", "skipped_lines")}
    usage["format"] = report["format"]["input"]
    usage["window"] = report["budget"]["window"]
    usage["window_resolved"] = report["budget"]["window_resolved"]
    return usage


def _dataset_usage(report: dict[str, Any], settings: Any) -> dict[str, Any]:
    """A conversation-per-line dataset: the totals and one row per conversation."""
    window, resolved = settings.window()
    return {
        "input": report["input"], "encoder": report["encoder"], "before": report["before"],
        "skipped_lines": report["skipped_lines"], "format": "dataset", "window": window,
        "window_resolved": resolved, "conversations": report["conversations"],
        "rows": [{"line": row["line"], "messages": row["messages_before"], "tokens": row["tokens_before"]}
                 for row in report["rows"]],
    }


def config_show(
    config: ConfigOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_messages: MaxMessagesOpt = None,
    max_fraction: MaxFractionOpt = None,
    context_window: WindowOpt = None,
    model: ModelOpt = None,
    encoder: EncoderOpt = None,
    warn_fraction: WarnOpt = None,
    offload_turns: TurnsOpt = None,
    strategy: StrategyOpt = None,
    preset: PresetOpt = None,
    keep: KeepOpt = None,
) -> None:
    import orjson

    settings = build_config(
        config, max_tokens=max_tokens, max_messages=max_messages, max_fraction=max_fraction,
        context_window=context_window, model=model, encoder=encoder, warn_fraction=warn_fraction,
        offload_turns=offload_turns, strategy=strategy, keep=keep, preset=preset,
    )
    effective = settings.effective_dict()
    window, resolved = settings.window()
    effective["resolved"] = {"encoder": settings.encoder_name, "window": window, "window_resolved": resolved}
    sys.stdout.buffer.write(orjson.dumps(effective, option=orjson.OPT_INDENT_2) + b"\n")
