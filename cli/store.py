"""`compact recall` and `compact store stats`: read the offload store.

Thin by design: each command checks its options, makes one call into
``core.store`` (imported lazily, to keep `compact --help` fast) and prints the
result. Neither ever creates a store. Text goes out with plain echo, not rich:
stored text and snippets hold brackets that rich would take for markup.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.options import ExistingStoreOpt as StoreOpt
from cli.output import print_json
from core.errors import EXIT_CHECK_FAILED, ConfigError

if TYPE_CHECKING:
    from core.store import OffloadStore, RecallHit

RECALL_HELP = """Search the offload store, or print an offloaded message (or turn) by its handle.

`compact recall vault Lisbon --store s.sqlite` prints the best-matching offloaded
messages (every word must match; when no message has them all, any word may).
`compact recall --id off_2b1e0265 --store s.sqlite` prints one message exactly; the
handle an offload placeholder names prints every message of that turn, in order.
Exit codes: 0 found; 1 nothing found; 2 bad usage, or no store at --store.
"""

store_app = typer.Typer(
    help="Inspect the offload store (one SQLite file; see `compact recall`).",
    short_help="Inspect the offload store.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


class Format(StrEnum):
    text = "text"
    json = "json"


FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="text for people, json for programs.")]


def _open(store: str | None) -> OffloadStore:
    from core.store import OffloadStore

    if not store:
        raise ConfigError("no store given", fix="pass --store PATH or set COMPACT_STORE")
    return OffloadStore.open(store, read_only=True)


def _not_found(text: str) -> None:
    typer.echo(f"compact: {text}", err=True)
    raise typer.Exit(EXIT_CHECK_FAILED)


def recall(
    query: Annotated[
        list[str] | None,
        typer.Argument(metavar="QUERY", help="Words to search for (plain words; punctuation is literal).", show_default=False),
    ] = None,
    handle: Annotated[
        str | None,
        typer.Option("--id", metavar="HANDLE", help="Print the message or offloaded turn with this handle (or a prefix of 8+ hex digits after off_).", show_default=False),
    ] = None,
    store: StoreOpt = None,
    # max: SQLite's LIMIT takes a 64-bit integer; 10**15 is the schema's bound on every count (= core.config.MAX_COUNT).
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=10**15, help="Most messages to print.")] = 5,
    output_format: FormatOpt = Format.text,
) -> None:
    words = " ".join(query or []).strip()
    if words and handle is not None:
        raise ConfigError("give a QUERY or --id HANDLE, not both")
    if not words and handle is None:
        raise ConfigError("nothing to recall", fix="give a QUERY, or --id HANDLE")
    with _open(store) as opened:
        if handle is not None:
            found = opened.get(handle)
            turn = opened.get_group(handle) if found is None else None
            if turn is not None:
                _print_turn(handle, *turn, output_format)
            elif found is None:
                _not_found(f"no offloaded message has the handle {handle} in {opened.path}")
            elif output_format is Format.json:
                from core.io import jsonio

                typer.echo(jsonio.dumps(found.message).decode())
            else:
                typer.echo(found.text)
            return
        hits = opened.recall(words, limit=limit)
    if not hits:
        _not_found(f"no offloaded message matches {words!r} in {store}")
    if output_format is Format.json:
        print_json([hit.to_dict() for hit in hits])
        return
    typer.echo("\n\n".join(_hit_block(hit) for hit in hits))


def _print_turn(handle: str, messages: list[Any], gone: int, output_format: Format) -> None:
    """An offloaded turn: JSON, one message per line (a transcript again), or each message's text."""
    if gone:
        typer.echo(f"compact: {gone} message(s) of this turn were evicted from the store (store_at_cap)", err=True)
    if not messages:
        _not_found(f"every message of the turn {handle} was evicted from the store")
    if output_format is Format.json:
        from core.io import jsonio

        typer.echo("\n".join(jsonio.dumps(m.message).decode() for m in messages))
        return
    typer.echo("\n\n".join(
        f"[{m.role}, {m.source if m.line is None else f'{m.source}:{m.line}'}]\n{m.text}" for m in messages
    ))


def _hit_block(hit: RecallHit) -> str:
    stored = hit.stored
    where = stored.source if stored.line is None else f"{stored.source}:{stored.line}"
    # Turns are counted from 1 for people, as in placeholders and summaries (the store keeps 0-based).
    turn = "preamble" if stored.turn < 0 else f"turn {stored.turn + 1}"
    head = f"{stored.handle}  {where}  {stored.role}  {turn}  score {hit.score:.3g}"
    snippet = " ".join(hit.snippet.split())
    return f"{head}\n    {snippet}"


@store_app.command("stats", short_help="Show what the offload store holds.")
def stats(store: StoreOpt = None, output_format: FormatOpt = Format.text) -> None:
    """Show what the store holds: messages, sources, sizes, dates, cached summaries."""
    with _open(store) as opened:
        data = opened.stats()
    if output_format is Format.json:
        print_json(data)
        return
    width = max(len(key) for key in data)
    for key, value in data.items():
        shown = "none" if value is None else f"{value:,}" if isinstance(value, int) and key != "schema_version" else value
        typer.echo(f"{key.replace('_', ' '):<{width}}  {shown}")
