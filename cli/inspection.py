"""`compact stats`, `compact diff` and `compact validate`: look at transcripts, change nothing.

Each command parses its options, makes one call into core (core.analysis.stats,
core.analysis.diff, core.analysis.provider_check) and renders the result: rich tables or one
JSON document on stdout. Domain errors propagate to the boundary in cli.errors.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from cli.options import CountingFlags, FromOpt, TableOrJson, takes
from cli.output import line_list, print_json
from core.analysis.provider_check import REPAIRABLE
from core.errors import CheckFailed, ConfigError

STATS_HELP = """Show where a transcript's tokens go: by role, by tool, by file read, the largest messages,
and the files read more than once with what those rereads cost.

Counts equal `compact count` (same encoder options). A tool's tokens are its calls (name and
arguments) plus the results that answer them. Tables go to stdout; --format json prints one
JSON document instead. Exit codes: 0 done; 2 bad usage or input.
"""

DIFF_HELP = """Show which messages were removed, rewritten or added between BEFORE and AFTER
(typically a transcript and its compacted output), with line numbers on both sides and tokens.

A message of AFTER identical to one of BEFORE is kept; between kept messages, one with the same
role (and tool_call_id) is rewritten; the rest of BEFORE was removed and the rest of AFTER added.
Exit codes: 0 done; 2 bad usage or input.
"""

VALIDATE_HELP = """Check that a provider's API would accept a transcript: one line per problem on stdout,
`FILE:LINE: problem (fix)`, and a summary on stderr.

The transcript is judged as the provider receives it: a file in its own format as it is (OpenAI
chat for openai; Anthropic lines or a Claude Code session for anthropic, the session from its
last compact_boundary on; Responses items or a Codex rollout for responses), any other as
`compact --to PROVIDER` writes it; a conversation-per-line dataset gets a verdict per line.
Checks: each message or item against the provider's request type (the JSON Schemas shipped in
schemas/, generated from the official SDKs); every tool call answered and no result without
its call (openai: tool messages right after the call; anthropic: tool_result blocks first in
the next user message; responses: an output after its call); call ids of at most 40 characters
(openai) or 64 (responses); openai: an assistant message has content or tool_calls; anthropic, after merging consecutive messages of one side as the API
does: a user message first, no empty text, tool_use ids of letters, digits, _ and -, unique.
Exit codes: 0 no problem; 1 problems found; 2 bad usage or input.
"""

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="Transcript (JSONL); `-` reads stdin.", show_default=False)]
BeforeArg = Annotated[str, typer.Argument(metavar="BEFORE", help="The original transcript (JSONL); `-` reads stdin.", show_default=False)]
AfterArg = Annotated[str, typer.Argument(metavar="AFTER", help="The changed transcript, e.g. compact's output.", show_default=False)]
TopOpt = Annotated[int, typer.Option("--top", min=0, help="Rows per table (tools, files, largest messages, rereads); 0 shows all.")]
ReadToolOpt = Annotated[list[str] | None, typer.Option("--read-tool", metavar="NAME", help="A tool whose calls read files (repeatable).", show_default="every read tool compact knows")]


class Provider(StrEnum):
    openai = "openai"
    anthropic = "anthropic"
    responses = "responses"


FormatOpt = Annotated[TableOrJson, typer.Option("--format", "-f", help="table (rich tables) or json (one document), on stdout.")]
ProviderOpt = Annotated[Provider, typer.Option("--for", help="The API the transcript is meant for.", show_default=False)]


@takes
def stats(
    file: FileArg,
    output_format: FormatOpt = TableOrJson.table,
    top: TopOpt = 10,
    read_tool: ReadToolOpt = None,
    *,
    counting: CountingFlags,
) -> None:
    from core.analysis.stats import DEFAULT_READ_TOOLS, stats_file

    read_tools = tuple(read_tool or DEFAULT_READ_TOOLS)
    result = stats_file(file, counting.build(), read_tools=read_tools, use_cache=not counting.no_cache)
    _warn_left_out(result.path, result.skipped_lines)
    limit = top or None
    if output_format is TableOrJson.json:
        print_json(result.to_dict(top=limit))
    else:
        print_stats(result, limit)


@takes
def diff(
    before: BeforeArg,
    after: AfterArg,
    output_format: FormatOpt = TableOrJson.table,
    *,
    counting: CountingFlags,
) -> None:
    from core.analysis.diff import diff_files

    if before == "-" and after == "-":
        raise ConfigError("BEFORE and AFTER cannot both be stdin", fix="give at least one of them as a file")
    result = diff_files(before, after, counting.build(), use_cache=not counting.no_cache)
    for path, skipped in result.left_out:
        _warn_left_out(path, skipped)
    if output_format is TableOrJson.json:
        print_json(result.to_dict())
    else:
        print_diff(result)


def validate(file: FileArg, provider: ProviderOpt, source_format: FromOpt = None) -> None:
    from core import formats
    from core.analysis.provider_requests import validate as judge
    from core.api import check_formats

    check_formats(source_format)
    transcript = formats.read(file, source_format=source_format)
    _warn_left_out(transcript.path, transcript.skipped_lines)
    verdicts = judge(transcript, provider.value)
    for verdict in verdicts:
        for problem in verdict.problems:
            typer.echo(problem.format(transcript.path))
    codes = [p.code for v in verdicts for p in v.problems]
    if transcript.format == formats.DATASET:
        rejected = sum(1 for v in verdicts if v.problems)
        summary = validation_summary(transcript.path, sum(v.items for v in verdicts), provider.value, codes,
                                     conversations=(len(verdicts), rejected))
    else:
        summary = validation_summary(transcript.path, len(transcript.messages), provider.value, codes,
                                     sent=sum(v.items for v in verdicts))
    if codes:
        fix = "--repair drops calls without a result and results without a call, and writes one-id tool_call_ids " \
              "lists as tool_call_id; `compact validate --help` lists " \
              "the checks" if any(c in REPAIRABLE for c in codes) else "`compact validate --help` lists the checks"
        raise CheckFailed(summary, fix=fix)
    typer.echo(f"compact: {summary}", err=True)


def _warn_left_out(path: str, skipped: list[dict[str, Any]]) -> None:
    """A line the reader left out (the cut last line of a session still being written) is never silent."""
    from cli.render import skipped_lines

    for line in skipped_lines(path, skipped):
        typer.echo(f"compact: warning: {line}", err=True)


def validation_summary(path: str, messages: int, provider: str, codes: list[str],
                       conversations: tuple[int, int] | None = None, sent: int | None = None) -> str:
    """``sent``: how many messages the provider's request holds, when it differs from the transcript's
    (Anthropic takes consecutive messages of one role as one)."""
    where = f"{path}: {_plural(messages, 'message')}"
    if sent is not None and sent != messages:
        where += f" ({sent:,} in the {provider} request)"
    if conversations is not None:
        where = f"{path}: {conversations[0]} conversations ({conversations[1]} rejected), {_plural(messages, 'message')}"
    if not codes:
        return f"{where}, no problems for {provider}"
    tally: dict[str, int] = {}
    for code in codes:
        tally[code] = tally.get(code, 0) + 1
    kinds = ", ".join(f"{count} {code}" for code, count in tally.items())
    noun = "problem" if len(codes) == 1 else "problems"
    return f"{path}: {len(codes)} {noun} for {provider}: {kinds}" + (
        f" in {conversations[1]} of {conversations[0]} conversations" if conversations else "")


# -- rendering: rich tables on stdout (they are the command's output) ---------------

SHARE_BAR_WIDTH = 8
TEXT_COLUMNS = ("role", "tool", "change", "")


def _console() -> Any:
    from rich.console import Console

    return Console()


SHARE_BAR_CHARS = "█░ "


def _share(tokens: int, total: int) -> str:
    """A short bar and the percentage of the transcript's tokens."""
    fraction = tokens / total if total else 0.0
    filled = min(SHARE_BAR_WIDTH, round(fraction * SHARE_BAR_WIDTH))
    return "█" * filled + "░" * (SHARE_BAR_WIDTH - filled) + f" {fraction:6.1%}"


def _n(*figures: int) -> list[str]:
    return [f"{figure:,}" for figure in figures]


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]], caption: str = "", width: int = 0) -> Any:
    """Figures keep their full width; a description takes what is left of ``width`` and is cut there.
    When the table would not fit ``width``, shares lose their bar, then a path gives up its head
    ("…" and the tail: the file name is what a reader looks for)."""
    from rich.table import Table

    table = Table(title=title or None, title_justify="left", title_style="bold", caption=caption or None,
                  show_edge=False, pad_edge=False)
    widths = _natural_widths(columns, rows)
    if width and "share" in columns and _least_width(columns, widths) > width:
        share = columns.index("share")
        rows = [[*row[:share], row[share].lstrip(SHARE_BAR_CHARS), *row[share + 1:]] for row in rows]
        widths = _natural_widths(columns, rows)
    fixed = sum(w for name, w in zip(columns, widths) if name not in ("what", "path")) + 3 * (len(columns) - 1)
    if width and "path" in columns:
        room = max(LEAST_WHAT, width - fixed - (LEAST_WHAT if "what" in columns else 0))
        at = columns.index("path")
        rows = [[*row[:at], _tail(row[at], room), *row[at + 1:]] for row in rows]
    for name, natural in zip(columns, widths):
        if name == "what":
            table.add_column(name, no_wrap=True, overflow="ellipsis", max_width=max(LEAST_WHAT, width - fixed))
        elif name in ("path", "roles"):
            table.add_column(name, overflow="fold", min_width=len(name) + 5)
        else:
            justify = "left" if name in TEXT_COLUMNS else "right"
            table.add_column(name, justify=justify, no_wrap=True, min_width=natural)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row)
    return table


# The least a path or a description is given before the shares lose their bars.
LEAST_PATH, LEAST_WHAT = 30, 12


def _least_width(columns: tuple[str, ...], widths: list[int]) -> int:
    least = {"path": LEAST_PATH, "what": LEAST_WHAT}
    return sum(min(w, least.get(name, w)) for name, w in zip(columns, widths)) + 3 * (len(columns) - 1)


def _natural_widths(columns: tuple[str, ...], rows: list[list[str]]) -> list[int]:
    return [max([len(name), *(len(row[k]) for row in rows)]) for k, name in enumerate(columns)]


def _tail(path: str, room: int) -> str:
    return path if len(path) <= room else "…" + path[len(path) - room + 1:]


def _top(rows: list[Any], limit: int | None) -> tuple[list[Any], str]:
    if limit is None or len(rows) <= limit:
        return rows, ""
    return rows[:limit], f"top {limit} of {len(rows)}"


def print_stats(result: Any, limit: int | None) -> None:
    from rich.text import Text

    console = _console()
    total, encoder = result.tokens, result.encoder
    head = f"{_plural(result.messages, 'message')} · {total:,} tokens · encoder {encoder.encoding} ({encoder.backend})"
    if encoder.fallback_reason:
        head += f" — fell back from {encoder.requested}: {encoder.fallback_reason}"
    if result.uncounted["messages"]:
        head += f" · graph message not counted ({result.uncounted['tokens']:,} tokens)"
    console.print(Text(f"compact stats · {result.path}", style="bold"), soft_wrap=True)
    console.print(Text(head), soft_wrap=True)
    if result.live_part is not None:
        from cli.render import live_part_line

        console.print(Text(live_part_line(result.live_part)), soft_wrap=True)

    rows = [[r.role, *_n(r.messages, r.tokens), _share(r.tokens, total)] for r in result.by_role]
    if result.reply_priming:
        rows.append(["(reply priming)", "", *_n(result.reply_priming), _share(result.reply_priming, total)])
    console.print(_table("tokens by role", ("role", "messages", "tokens", "share"), rows, width=console.width))

    tools, caption = _top(result.by_tool, limit)
    rows = [[t.tool, *_n(t.calls, t.results, t.call_tokens, t.result_tokens, t.tokens), _share(t.tokens, total)]
            for t in tools]
    tool_columns = ("tool", "calls", "results", "in calls", "in results", "tokens", "share")
    empty = Text("tokens by tool: no tool calls")
    console.print(_table("tokens by tool", tool_columns, rows, caption, console.width) if rows else empty)

    read_tools = ", ".join(result.read_tools) or "read tool"
    files, caption = _top(result.by_file, limit)
    rows = [[f.path, *_n(f.reads, f.tokens), _share(f.tokens, total)] for f in files]
    title = f"tokens by file read ({read_tools} results)"
    empty = Text(f"tokens by file read: no {read_tools} call with a path")
    console.print(_table(title, ("path", "reads", "tokens", "share"), rows, caption, console.width) if rows else empty)

    largest, caption = _top(result.largest, limit)
    rows = [[str(m.line), m.role, *_n(m.tokens), _share(m.tokens, total), m.what] for m in largest]
    largest_columns = ("line", "role", "tokens", "share", "what")
    console.print(_table("largest messages", largest_columns, rows, caption, width=console.width))
    _print_rereads(console, result, limit)


def _print_rereads(console: Any, result: Any, limit: int | None) -> None:
    from rich.text import Text

    rereads = result.rereads
    if not rereads:
        console.print(Text("files read more than once: none"))
        return
    extra = sum(f.reads - 1 for f in rereads)
    cost = result.reread_tokens
    share = cost / result.tokens if result.tokens else 0.0
    console.print(Text(
        f"files read more than once: {_plural(len(rereads), 'file')}, {_plural(extra, 'reread')}; "
        f"{cost:,} tokens ({share:.1%}) are in reads a newer read superseded",
        style="bold",
    ))
    shown, caption = _top(rereads, limit)
    rows = [[f.path, *_n(f.reads), line_list(f.lines, most=5), *_n(f.tokens, f.reread_tokens)] for f in shown]
    console.print(_table("", ("path", "reads", "result lines", "tokens", "superseded"), rows, caption, console.width))


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def print_diff(result: Any) -> None:
    from rich.text import Text

    console = _console()
    console.print(Text(f"compact diff · {result.before.path} → {result.after.path}", style="bold"), soft_wrap=True)
    summary = result.summary()
    rows = [
        ["before", *_n(result.before.messages, result.before.tokens), ""],
        ["after", *_n(result.after.messages), "", *_n(result.after.tokens)],
    ]
    for kind in ("kept", "removed", "rewritten", "added"):
        row = summary[kind]
        rows.append([kind, *_n(row["messages"], row["tokens_before"], row["tokens_after"])])
    console.print(_table("", ("", "messages", "tokens before", "tokens after"), rows))
    if not result.changes:
        console.print(Text("no changes"))
        return
    rows = []
    for run in _runs(result.changes, result.kept_lines):
        first, last = run[0], run[-1]
        before = "" if first.before_line is None else str(first.before_line)
        if len(run) > 1:
            before += f"–{last.before_line}"
        rows.append([
            first.change if len(run) == 1 else f"removed ×{len(run)}",
            before,
            "" if first.after_line is None else str(first.after_line),
            ", ".join(dict.fromkeys(c.role for c in run)),
            *_n(sum(c.tokens_before for c in run), sum(c.tokens_after for c in run)),
        ])
    console.print(_table("changes", ("change", "line", "new line", "roles", "tokens", "new tokens"), rows))


def _runs(changes: list[Any], kept_lines: list[int]) -> list[list[Any]]:
    """Removed messages with no kept message between them as one row (the lines between them, if
    any, hold no message); every other change on its own."""
    import bisect

    runs: list[list[Any]] = []
    for change in changes:
        previous = runs[-1][-1] if runs else None
        if (
            previous is not None and change.change == previous.change == "removed"
            and change.before_line is not None and previous.before_line is not None
            and bisect.bisect(kept_lines, previous.before_line) == bisect.bisect(kept_lines, change.before_line)
        ):
            runs[-1].append(change)
        else:
            runs.append([change])
    return runs
