"""The `compact` command: `compact FILE [OPTIONS]` plus a few subcommands beside it."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _interrupted_outside_a_command(signum: int, frame: Any) -> None:
    # Ctrl-C while the libraries load or the interpreter shuts down: nothing is being written,
    # so leave at once with the usual line instead of a traceback from inside an import.
    sys.stderr.write("compact: error: interrupted; nothing was written\n")
    os._exit(130)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_outside_a_command)

import typer

from cli.errors import ClickContext, ErrorBoundaryGroup, flush_stdout
from cli.help import PanelledCommand, plain_help

DEFAULT_COMMAND = "run"
_PASSTHROUGH = {"--help", "-h", "--version", "--install-completion", "--show-completion"}


class DefaultCommandGroup(ErrorBoundaryGroup):
    """Routes `compact FILE ...` to `compact run FILE ...`.

    Anything that is not a subcommand name (a path, or an option of `run`)
    goes to the default command, so the primary form needs no verb; a file
    named like a subcommand is reached as `./name`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_help(self)

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in _PASSTHROUGH:
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=DefaultCommandGroup,
    name="compact",
    help=(
        "Compact an LLM transcript (JSONL) to a token or message budget.\n\n"
        "Usage: compact FILE --max-tokens 8000  (short for `compact run FILE ...`).\n\n"
        "Run `compact run --help` for every compaction option."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version_callback(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"compact {version('compact-transcripts')}")
        except PackageNotFoundError:
            typer.echo("compact (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Compact an LLM transcript (JSONL) to a token or message budget."""


def _register() -> None:
    from cli import batch, cache, commands, graph, inspection, store

    # Each short_help is the whole sentence `compact --help` lists; click would cut the long help's
    # first sentence at about 45 characters, mid-phrase.
    app.command(name="run", help=commands.RUN_HELP, short_help="Compact a transcript to a budget (`compact FILE` for short).",
                no_args_is_help=True, cls=PanelledCommand)(commands.run)
    app.command(name="count", help="Count a transcript's tokens and show its usage; compacts nothing.",
                short_help="Count a transcript's tokens; compacts nothing.")(commands.count)
    app.command(name="stats", help=inspection.STATS_HELP, short_help="Show where a transcript's tokens go.",
                no_args_is_help=True)(inspection.stats)
    app.command(name="diff", help=inspection.DIFF_HELP, short_help="Show what changed between two transcripts.",
                no_args_is_help=True)(inspection.diff)
    app.command(name="validate", help=inspection.VALIDATE_HELP, short_help="Check that a provider's API would accept a transcript.",
                no_args_is_help=True)(inspection.validate)
    config_app = typer.Typer(help="Print the effective configuration (defaults, then the config file, then flags) as JSON.",
                             short_help="Print the effective configuration as JSON.", no_args_is_help=True)
    config_app.command(name="show", help="Print the effective configuration as JSON.", cls=PanelledCommand)(commands.config_show)
    app.add_typer(config_app, name="config")
    app.add_typer(graph.graph_app, name="graph")
    app.command(name="recall", help=store.RECALL_HELP, short_help="Search the offload store, or print an offloaded message.")(
        store.recall)
    app.add_typer(store.store_app, name="store")
    app.command(name="batch", help=batch.BATCH_HELP, short_help="Compact many transcripts into a folder that mirrors them.",
                no_args_is_help=True, cls=PanelledCommand)(batch.batch)
    app.add_typer(cache.cache_app, name="cache")


_register()


def main(argv: list[str] | None = None) -> Any:
    # Half an emoji (a lone surrogate, valid in JSON) in a preview or a path would stop a table
    # mid-print with a traceback: the text streams write it as its escape instead.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    # Each command's context (cli.errors) puts back Python's KeyboardInterrupt when its code starts:
    # from there Ctrl-C is its one line, and staged files are removed.
    try:
        return app(args=argv, prog_name="compact")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the work is done or undone: let it exit
        flush_stdout()
