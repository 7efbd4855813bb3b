"""Where the commands' output goes: one JSON writer, the stderr console, one progress bar."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def json_bytes(document: Any) -> bytes:
    """A document as the commands print it: indented JSON and a newline (half an emoji written as its escape)."""
    from core.io import jsonio

    return jsonio.dumps(document, indent=True) + b"\n"


def print_json(document: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.buffer.write(json_bytes(document))
    sys.stdout.buffer.flush()


def write_json(document: Any, target: str | None) -> None:
    """A report to ``target``: nowhere (None), stdout (``-``) or a file, written atomically."""
    if target is None:
        return
    if target == "-":
        print_json(document)
        return
    from core.io.staged import atomic_write_bytes

    atomic_write_bytes(target, json_bytes(document))


def refuse_in_place_while_written(report: dict[str, Any], file: str) -> None:
    """--in-place on a file whose last line is cut off: the agent writing it would go on in the old file."""
    from core.errors import InputError

    cut = [entry["line"] for entry in report.get("skipped_lines") or [] if entry.get("truncated")]
    if cut:
        raise InputError("the last line is cut off mid-JSON: the file is still being written, and --in-place "
                         "would replace it under the agent", path=file, line=cut[0],
                         fix="run --in-place once the agent is done, or write the result with -o FILE")


def warn_unwritable_store(store: str | None) -> None:
    """A dry run only reads the store: say so when the real run could not write it."""
    from core.store import write_problem

    problem = write_problem(store) if store else None
    if problem:
        sys.stderr.write(f"compact: warning: a real run could not write the store {store}: {problem}\n")


def stderr_is_terminal() -> bool:
    # Checked before importing rich, which a piped run never needs (it costs ~40 ms).
    return sys.stderr.isatty() or bool(os.environ.get("FORCE_COLOR") or os.environ.get("TTY_COMPATIBLE"))


def stderr_console(show: bool | None) -> Any:
    """A rich console on stderr when ``show`` (None: when stderr is a terminal), else None."""
    if not (stderr_is_terminal() if show is None else show):
        return None
    from rich.console import Console

    return Console(stderr=True)


@contextlib.contextmanager
def progress_bar(quiet: bool, *, rate: bool = False) -> Iterator[Any]:
    """A transient rich progress bar on stderr, only on a terminal (None otherwise); ``rate`` adds items/s and ETA."""
    if quiet or not stderr_is_terminal():
        yield None
        return
    from rich.console import Console
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

    columns: list[Any] = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    columns += [RateColumn(), TimeElapsedColumn(), TextColumn("ETA")] if rate else []
    with Progress(*columns, TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        yield bar


@contextlib.contextmanager
def count_progress(quiet: bool) -> Iterator[Any]:
    """The bar of one run: a task per thing counted or summarized, updated as (what, done, total)."""
    with progress_bar(quiet) as bar:
        if bar is None:
            yield None
            return
        tasks: dict[str, Any] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        yield update
