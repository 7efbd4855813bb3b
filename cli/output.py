"""Where the commands' output goes: one JSON writer, the stderr console, one progress bar."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
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


def check_output_target(option: str, path: str | os.PathLike[str]) -> None:
    """Refuse, before anything runs, an output path ``option`` names that cannot be written: a folder,
    a path in a missing or read-only folder, a path under a file. Found only when writing, such a
    target failed the run after the transcript had gone to stdout."""
    from core.errors import OutputError
    from core.io.staged import open_descriptor

    if open_descriptor(path) is not None:
        return  # a stream (/dev/stdout, /dev/fd/3): written as it stands
    problem = _unwritable(option, Path(os.path.realpath(path)), str(path))
    if problem is not None:
        raise OutputError(f"cannot write: {problem[0]}", path=str(path), fix=problem[1])


def _unwritable(option: str, target: Path, given: str) -> tuple[str, str] | None:
    """Why ``target`` cannot be written, and the fix; None when it can."""
    if target.is_dir():
        return f"{option} names a folder, not a file", f"give {option} a file name, e.g. {given}/report.json"
    if target.exists() and not target.is_file():  # a FIFO or a device: written directly, not renamed over
        return None if os.access(target, os.W_OK) else ("permission denied", f"give {option} a file you can write")
    blocking = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        return f"{blocking} is a file, not a folder", f"give {option} a path inside a folder"
    if not target.parent.is_dir():
        return f"the folder {target.parent} does not exist", f"create it, or give {option} another path"
    if not os.access(target.parent, os.W_OK | os.X_OK):  # (a file is staged beside its target, then renamed)
        return f"the folder {target.parent} is not writable", f"give {option} a path in a folder you can write"
    return None


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
