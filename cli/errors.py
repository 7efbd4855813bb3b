"""The one boundary where domain errors become a line on stderr and an exit code."""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Any

import typer
import typer.core

from core.errors import CompactError

# typer 0.29 vendors click as typer._click; typer.core uses it under this name, and no
# `click` package is installed for users, so the usage-error classes are reached through it.
_click_exceptions = typer.core._click.exceptions
UsageError = _click_exceptions.UsageError
NoArgsIsHelpError = _click_exceptions.NoArgsIsHelpError
MissingParameter = _click_exceptions.MissingParameter
# The base class typer's group methods are declared with (typer.Context is a subclass of it).
ClickContext = typer.core._click.core.Context
get_current_context = typer.core._click.globals.get_current_context
EXIT_USAGE = 2


def debug_enabled(ctx: ClickContext) -> bool:
    return os.environ.get("COMPACT_DEBUG", "") not in ("", "0") or bool(ctx.meta.get(DEBUG_KEY))


def print_error(message: str) -> None:
    # Plain write, no rich markup: transcript text in a message must print as is.
    sys.stderr.write(f"compact: error: {message}\n")
    sys.stderr.flush()


DEBUG_KEY = "compact.debug"
WRITTEN_KEY = "compact.written"


def outputs_written(note: str = "the outputs were already written") -> None:
    """The command's outputs are in place (or, for a batch, some may be): from here Ctrl-C says ``note``,
    not that nothing was written."""
    ctx = get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[WRITTEN_KEY] = note  # (meta is shared by the whole chain of contexts, the boundary's too)


def usage_line(exc: Any, fallback: str = "compact") -> str:
    """A usage error (bad option value, unknown option, missing argument, ...) as one line.

    Click prints three lines (Usage, Try, Error); the README promises one, with the fix.
    """
    message = " ".join(exc.format_message().split())  # "No such option: --x\nDid you mean …" on one line
    message = message.replace("Value error, ", "").rstrip(".")
    message = message[:1].lower() + message[1:] if message[:2] != message[:2].upper() else message
    param = getattr(exc, "param", None)
    if isinstance(exc, MissingParameter) and "`-` reads stdin" in (getattr(param, "help", None) or ""):
        message += ": give a transcript's path, or - to read standard input"  # (`cat x | compact` names no FILE)
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else fallback  # click leaves ctx unset for some errors
    return f"{message} (see `{command} --help`)"


def _report_usage_error(exc: Any, ctx: Any = None) -> typer.Exit:
    fallback = "compact"
    if ctx is not None and ctx.invoked_subcommand:
        fallback = f"{ctx.command_path} {ctx.invoked_subcommand}"
    print_error(usage_line(exc, fallback))
    return typer.Exit(exc.exit_code or EXIT_USAGE)


class _CommandContext(ClickContext):
    """A leaf command's context: Ctrl-C becomes Python's KeyboardInterrupt when the command's own code starts.

    Not earlier: typer parses options with pydantic, whose Rust core prints a KeyboardInterrupt
    raised in a callback as "Exception ignored" and drops it. Until here the start-up handler
    of cli.app leaves at once, which is right while nothing has been written.
    """

    def invoke(self, callback: Any, /, *args: Any, **kwargs: Any) -> Any:
        if callback is self.command.callback and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return super().invoke(callback, *args, **kwargs)


def _interruptible_commands(command: Any) -> None:
    for sub in getattr(command, "commands", {}).values():
        if not hasattr(sub, "commands"):
            sub.context_class = _CommandContext
        _interruptible_commands(sub)


class ErrorBoundaryGroup(typer.core.TyperGroup):
    """Maps every CompactError and usage error raised under it to one stderr line and its exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _interruptible_commands(self)

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        ctx.meta[DEBUG_KEY] = "--debug" in args
        return super().parse_args(ctx, args)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        # The top level's own parsing (the subcommands' happens in invoke).
        try:
            return super().make_context(*args, **kwargs)
        except NoArgsIsHelpError:
            raise  # prints the help, as asked
        except UsageError as exc:
            raise _report_usage_error(exc) from None

    def invoke(self, ctx: ClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise
        except UsageError as exc:
            raise _report_usage_error(exc, ctx) from None
        except CompactError as exc:
            if debug_enabled(ctx):
                raise
            print_error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            print_error(f"interrupted; {ctx.meta.get(WRITTEN_KEY) or 'nothing was written'}")
            raise typer.Exit(130) from None
        except RecursionError:
            if debug_enabled(ctx):
                raise
            print_error("the input is nested too deeply to process (JSON nested past 1,000 levels)")
            raise typer.Exit(2) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE or debug_enabled(ctx):
                raise  # a reader that stopped early (| head): click leaves quietly
            print_error(_os_error_text(exc))
            _detach_stdout()
            raise typer.Exit(2) from None


def _os_error_text(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    if exc.filename is None:
        return f"cannot write the output: {what} (free some space, or send the output elsewhere)"
    return f"{exc.filename}: {what}"


def _detach_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def flush_stdout() -> None:
    """Flush stdout before the interpreter does: a full disk (/dev/full) is then one line and exit 2."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _detach_stdout()
            return
        print_error(_os_error_text(exc))
        _detach_stdout()
        raise SystemExit(2) from None
