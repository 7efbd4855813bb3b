"""One error hierarchy for everything `compact` refuses.

The user-facing text lives in ``__str__``; the CLI maps each class to an exit
code at a single boundary (``cli.app``) and prints that text on one line.
"""

from __future__ import annotations

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_OVER_BUDGET = 3
# The transcript was written, compacted without the model summary that failed (a server down).
EXIT_SUMMARIZER_FAILED = 4


class CompactError(Exception):
    """Base class: a problem the user can fix, shown as one line."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        what: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(what)
        self.what = what
        self.path = path
        self.line = line
        self.column = column
        self.fix = fix

    def location(self) -> str:
        if self.path is None:
            return ""
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def __str__(self) -> str:
        text = self.what
        where = self.location()
        if where:
            text = f"{where}: {text}"
        if self.fix:
            text = f"{text} ({self.fix})"
        # One line, always: transcript text must never break the error layout.
        return " ".join(text.split())


class InputError(CompactError):
    """The transcript (or another input file) cannot be read or parsed."""


class OutputError(CompactError):
    """An output (the transcript, a report, a snapshot, a backup) cannot be written."""


class ConfigError(CompactError):
    """The configuration file or the options are invalid."""


class EncoderError(CompactError):
    """The token encoder cannot be loaded."""


class StrategyError(CompactError):
    """A strategy failed; recorded in the report, never fatal."""


class StrategySkipped(StrategyError):
    """A strategy chose not to act because acting would not help (a summary that would not be
    smaller than its turns): listed with why in the report's ``skipped``, not an error."""


class StoreError(CompactError):
    """The offload store cannot be opened, read or written; one line naming the store and the fix."""


class StoreUnavailable(StoreError):
    """SQLite itself failed: read-only, full disk, a lock held past the timeout, an I/O error, a corrupt file.

    Unlike a refusal at the size cap (the strategy keeps its turns and the run
    goes on), this fails the whole run: a strategy that cannot offload would
    otherwise leave the transcript uncompacted and exit 0.
    """


class GraphError(CompactError):
    """A graph snapshot is invalid or a graph operation was refused."""


class CheckFailed(CompactError):
    """A check the user asked for did not pass (exit 1)."""

    exit_code = EXIT_CHECK_FAILED
