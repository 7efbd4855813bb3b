"""The one boundary where domain errors become a line on stderr and an exit code."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer
import typer.core

from core.errors import CompactError


def debug_enabled(ctx: typer.Context) -> bool:
    return os.environ.get("COMPACT_DEBUG", "") not in ("", "0") or bool(ctx.meta.get(DEBUG_KEY))


def print_error(message: str) -> None:
    # Plain write, no rich markup: transcript text in a message must print as is.
    sys.stderr.write(f"compact: error: {message}\n")
    sys.stderr.flush()


DEBUG_KEY = "compact.debug"


class ErrorBoundaryGroup(typer.core.TyperGroup):
    """Maps every CompactError raised under it to one stderr line and its exit code."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        ctx.meta[DEBUG_KEY] = "--debug" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CompactError as exc:
            if debug_enabled(ctx):
                raise
            print_error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            print_error("interrupted; nothing was written")
            raise typer.Exit(130) from None
