"""Where the commands' output goes: one JSON writer, the stderr console, one progress bar."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
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


def check_output_target(option: str, path: str | os.PathLike[str], *,
                        created: str | os.PathLike[str] | None = None) -> None:
    """Refuse, before anything runs, an output path ``option`` names that cannot be written: a folder,
    a path in a missing or read-only folder, a path under a file. Found only when writing, such a
    target failed the run after the transcript had gone to stdout. A missing folder inside
    ``created`` (a folder the command makes, as batch its --out) is fine if it can be made."""
    from core.errors import OutputError
    from core.io.staged import open_descriptor

    if open_descriptor(path) is not None:
        return  # a stream (/dev/stdout, /dev/fd/3): written as it stands
    target = Path(os.path.realpath(path))
    if created is not None and not target.parent.exists() and inside_folder(target.parent, created):
        problem = _uncreatable(option, target.parent)  # the command makes the folders, then writes
    else:
        problem = _unwritable(option, target, str(path))
    if problem is not None:
        raise OutputError(f"cannot write: {problem[0]}", path=str(path), fix=problem[1])


def inside_folder(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``path`` lies inside ``folder`` (either may not exist yet)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def _uncreatable(option: str, folder: Path) -> tuple[str, str] | None:
    """Why the missing ``folder`` cannot be made, and the fix; None when it can."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is a file, not a folder", f"give {option} a path inside a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable", f"give {option} a path in a folder you can write"
    return None


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


LINES_SHOWN = 10  # line numbers a warning lists before "…"


def line_list(lines: Sequence[int | None], most: int = LINES_SHOWN) -> str:
    """Line numbers as every warning and table lists them: the first ``most``, then "…" for the rest."""
    return ", ".join(str(n) for n in lines[:most]) + (", …" if len(lines) > most else "")


def kept_orphans(report: dict[str, Any], *, repair: bool) -> tuple[list[int], list[int], str]:
    """The lines of the input's orphan results and calls the output still has (not removed by --repair
    nor by a strategy), and what --repair does about them (``repair``: the run had --repair; the
    report's actions list repair only when it removed something)."""
    removed = {e["line"] for e in report["removed"] if e["action"] == "removed"}
    orphans = report["orphans"]
    results = [n for n in orphans["results"] if n not in removed]
    calls = [c["line"] for c in orphans["calls"] if c["line"] not in removed]
    return results, calls, "pinned, so --repair kept them" if repair else "--repair drops them"


def run_warning(report: dict[str, Any], *, repair: bool = False) -> str:
    """What a transcript's run fell short of, for one line without the table ("" when nothing):
    the budget missed, lines the reader left out (as the table words them), orphan calls or results kept."""
    from cli.render import skipped_lines

    parts = []
    if report["over_budget"]:
        budget, after = report["budget"], report["after"]
        floor = budget["floor"]["messages" if budget["unit"] == "messages" else "tokens"]
        parts.append(f"the budget ({budget['description']}) was not reached: {after['tokens']:,} tokens, "
                     f"{after['messages']:,} messages after compaction, pinned messages alone need "
                     f"{floor:,} {budget['unit']}")
    parts += skipped_lines(report["input"], report["skipped_lines"])
    results, calls, fix = kept_orphans(report, repair=repair)
    if calls:
        parts.append(f"{len(calls):,} tool call(s) without a result kept (line {line_list(calls)}, {fix})")
    if results:
        parts.append(f"{len(results):,} tool result(s) without their call kept (line {line_list(results)}, {fix})")
    return "; ".join(parts)


def dataset_warning(dataset: Any, path: str) -> str:
    """A dataset's run: the conversations still over budget and the lines the reader left out ("" when none)."""
    from cli.render import skipped_lines

    over = [row.line for row in dataset.rows if row.over_budget]
    parts = [f"{len(over):,} of {dataset.conversations:,} conversation(s) still over budget (line {line_list(over)})"
             ] if over else []
    return "; ".join(parts + skipped_lines(path, dataset.skipped_lines))


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
