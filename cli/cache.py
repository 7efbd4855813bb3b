"""`compact cache clear`: delete the persistent cache (token counts and the run memo)."""

from __future__ import annotations

import typer

cache_app = typer.Typer(
    help="The persistent cache: token counts by text digest, and the last 50 runs' results (the run memo).",
    short_help="Show where the persistent cache is, or clear it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@cache_app.command(name="clear", short_help="Delete the cache file.", help="Delete the cache file (and its -wal/-shm); the next run starts a new one.")
def clear() -> None:
    from core.counting.counter import clear_cache, default_cache_path

    removed = clear_cache()
    if removed:
        typer.echo(f"removed {', '.join(str(p) for p in removed)}")
    else:
        typer.echo(f"no cache at {default_cache_path()}")


@cache_app.command(name="path", short_help="Print where the cache file is.", help="Print where the cache file is (COMPACT_CACHE_DIR, XDG_CACHE_HOME, ~/.cache).")
def path() -> None:
    from core.counting.counter import default_cache_path

    typer.echo(str(default_cache_path()))
