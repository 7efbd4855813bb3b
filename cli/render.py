"""The usage table people read on stderr (rich); nothing here decides anything."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from core.engine.budget import UNLIMITED
from core.report import GIVE_BACK, line_ranges

BAR_WIDTH = 20
DETAIL_CHARS = 120


def bar(fraction: float) -> str:
    filled = min(BAR_WIDTH, round(fraction * BAR_WIDTH))
    return "█" * filled + "░" * (BAR_WIDTH - filled)


def _usage_row(label: str, usage: dict[str, Any]) -> list[str]:
    fraction = usage["window_fraction"]
    return [label, f"{usage['messages']:,}", f"{usage['tokens']:,}", f"{bar(fraction)} {fraction:6.1%}"]


def usage_table(report: dict[str, Any], *, compacted: bool = True, repair: bool = False) -> Group:
    """Before/after usage, the budget verdict, what each strategy did, and the warnings."""
    budget = report["budget"]
    encoder = report["encoder"]
    parts: list[Any] = []
    parts.append(Text(f"compact · {report['input']}", style="bold"))
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("", style="bold")
    table.add_column("messages", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column(f"of the {budget['window']:,}-token window", justify="left")
    table.add_row(*_usage_row("before" if compacted else "now", report["before"]))
    if compacted:
        table.add_row(*_usage_row("after", report["after"]))
    parts.append(table)

    encoding = f"counted with {encoder['encoding']} ({encoder['backend']})"
    if encoder["fallback"]:
        encoding += f" — fell back from {encoder['requested']}: {encoder['fallback']}"
    window = "the window size is the model's" if budget["window_resolved"] else (
        "the window size comes from --context-window or its default, not from a model")
    parts.append(Text(f"{encoding} · {window}"))
    if report.get("format") and report["format"] != {"input": "openai", "output": "openai", "losses": []}:
        parts.append(_format_line(report["format"]))
    if report.get("format", {}).get("provider_compaction"):
        parts.append(Text(live_part_line(report["format"]["provider_compaction"])))
    if report.get("graph"):
        graph = report["graph"]
        parts.append(Text(f"graph: {graph.get('summary', '')}".rstrip()))
    if compacted:
        parts.append(_verdict(report))
        parts.append(_cache_line(report["prompt_cache"]))
        if report["actions"]:
            parts.append(_Actions(report["actions"]))
        if report["skipped"]:
            skipped = ", ".join(f"{s['strategy']} ({s['reason']})" for s in report["skipped"])
            parts.append(Text(f"skipped: {skipped}"))
    parts.extend(_warnings(report, repair=repair))
    return Group(*parts)


def live_part_line(live: dict[str, Any]) -> str:
    """What a provider compaction record leaves live (the report's and `compact stats`'s line)."""
    before = live["lines_before"]
    said = f"provider compaction: {live['record']} on line {live['line']:,}; counted from there on"
    if not before:  # the record opens the file: nothing before it to speak of
        return said
    kept = "the line before it is kept as it is" if before == 1 else f"the {before:,} lines before it kept as they are"
    return f"{said}, {kept} and not counted (the provider no longer reads them)"


def _format_line(fmt: dict[str, Any]) -> Text:
    line = f"format: {fmt['input']}" if fmt["input"] == fmt["output"] else f"format: {fmt['input']} → {fmt['output']}"
    if fmt["losses"]:
        lost = ", ".join(f"{loss['count']:,} {loss['what']}" for loss in fmt["losses"])
        return Text(f"{line} — not carried: {lost}", style="yellow")
    return Text(line)


def dataset_table(report: Any, *, compacted: bool = True) -> Group:
    """A dataset (its DatasetReport) compacted by the main command, or counted: the totals, then what changed."""
    before, after = report.before, report.after
    parts: list[Any] = [Text(f"compact · {report.input} (dataset)", style="bold")]
    table = Table(show_edge=False, pad_edge=False)
    for name in ("", "conversations", "messages", "tokens"):
        table.add_column(name, justify="right" if name else "left")
    label = "before" if compacted else "now"
    table.add_row(label, f"{report.conversations:,}", f"{before.messages:,}", f"{before.tokens:,}")
    if compacted:
        table.add_row("after", f"{report.changed:,} changed", f"{after.messages:,}", f"{after.tokens:,}")
    parts.append(table)
    parts.append(Text(f"counted with {report.encoder.encoding} ({report.encoder.backend})"))
    if report.strategies:
        used = ", ".join(f"{name} ({count:,})" for name, count in report.strategies.items())
        parts.append(Text(f"strategies (conversations changed): {used}"))
    if report.over_budget:
        parts.append(Text(f"{report.over_budget:,} conversation(s) still over budget: pinned messages alone "
                          "exceed it", style="bold red"))
    parts.extend(Text(f"warning: {line}", style="yellow") for line in skipped_lines(report.input, report.skipped_lines))
    return Group(*parts)


def skipped_lines(path: str, skipped: list[dict[str, Any]]) -> list[str]:
    """What the reader left out, naming the file and the lines: the cut last line of a file still being
    written, and the invalid lines --skip-invalid left out."""
    from cli.output import line_list

    cut = [entry for entry in skipped if entry.get("truncated")]
    invalid = [entry["line"] for entry in skipped if not entry.get("truncated")]
    lines = [f"{path}:{entry['line']}: {entry['error']}" for entry in cut]
    if invalid:
        lines.append(f"{path}: {len(invalid):,} invalid line(s) left out (line {line_list(invalid)}; the report lists why)")
    return lines


def _verdict(report: dict[str, Any]) -> Text:
    budget = report["budget"]
    if report["mode"] == UNLIMITED or budget["trigger"] == UNLIMITED:
        return Text("budget: unlimited — nothing compacted")
    if report["mode"] == "full":
        return Text(f"budget: {budget['description']} — full run: every strategy acted once, whatever the budget")
    if not report["triggered"]:
        return Text(f"budget: {budget['description']} — already within it, nothing to do", style="green")
    passes = f"{report['passes']} pass{'es' if report['passes'] != 1 else ''}"
    if not report["over_budget"]:
        return Text(f"budget: {budget['description']} — reached in {passes}", style="green")
    floor = budget["floor"]
    unit = budget["unit"]
    floor_value = floor["messages"] if unit == "messages" else floor["tokens"]
    return Text(
        f"budget: {budget['description']} — NOT reached after {passes}: pinned messages alone need "
        f"{floor_value:,} {unit} (the floor)",
        style="bold red",
    )


def _cache_line(cache: dict[str, Any]) -> Text:
    """How much of a provider's prompt cache the result can reuse, in a user's words."""
    new = cache["tokens_to_rewrite"]
    if cache["first_changed_line"] is None:
        return Text(f"prompt cache: nothing before the end changed; a provider processes only the {new:,} "
                    "appended token(s) anew")
    line = cache["first_changed_line"]
    if cache["prefix_messages"] == 0:
        return Text(f"prompt cache: the first change is at line {line}, so a provider reuses nothing from "
                    f"its cache and processes all {new:,} tokens anew")
    return Text(f"prompt cache: the {cache['prefix_messages']:,} message(s) before line {line} are unchanged "
                f"({cache['prefix_tokens']:,} tokens a provider can reuse from its cache); the {new:,} tokens "
                "from there on are processed anew")


# Below this width the table's last column would be squeezed to a few characters a line: the
# figures stay a table and what each step did follows it, one line a step.
WIDE_TABLE = 100
_ACTION_COLUMNS = (("strategy", "left"), ("pass", "right"), ("removed", "right"), ("rewritten", "right"),
                   ("tokens saved", "right"))


class _Actions:
    """What each strategy did: one table on a wide console; on a narrow one, the figures and then a
    line per step (the console's width is known only when it renders)."""

    def __init__(self, actions: list[dict[str, Any]]) -> None:
        self.actions = actions

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.max_width >= WIDE_TABLE
        table = Table(show_edge=False, pad_edge=False)
        for name, justify in (*_ACTION_COLUMNS, *((("what it did", "left"),) if wide else ())):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for action in self.actions:
            figures = (action["strategy"], str(action["pass"]), f"{action['messages_removed']:,}",
                       f"{action['messages_changed']:,}", f"{action['tokens_saved']:,}")
            table.add_row(*figures, *((_detail(action),) if wide else ()))
        yield table
        if not wide:
            for action in self.actions:
                yield Text(f"{action['strategy']} (pass {action['pass']}): {_detail(action)}")


def _detail(action: dict[str, Any]) -> str:
    detail = action["detail"] if not action["error"] else f"error: {action['error']}"
    if len(detail) > DETAIL_CHARS:
        detail = detail[: DETAIL_CHARS - 1] + "…"  # the report holds it whole
    return detail


def _warnings(report: dict[str, Any], *, repair: bool) -> list[Text]:
    lines = []
    if report["warning_appended"]:
        lines.append(Text("warning appended: usage reached warn_fraction", style="yellow"))
    lines.extend(_orphan_lines(report, repair=repair))
    lines.extend(Text(f"warning: {line}", style="yellow") for line in skipped_lines(report["input"], report["skipped_lines"]))
    if report["last_error"]:
        lines.append(Text(f"strategy error: {report['last_error']}", style="red"))
    return lines


def _orphan_lines(report: dict[str, Any], *, repair: bool) -> list[Text]:
    """The input's orphan calls and results: a warning for those still there, a note for those --repair dropped."""
    from cli.output import kept_orphans, line_list

    orphans = report["orphans"]
    repaired = {e["line"] for e in report["removed"] if e["strategy"] == "repair"}
    results, calls, fix = kept_orphans(report, repair=repair)
    lines = []
    if results:
        lines.append(Text(f"warning: {len(results)} tool result(s) without their call "
                          f"(line {line_list(results)}); {fix}", style="yellow"))
    if calls:
        lines.append(Text(f"warning: {len(calls)} tool call(s) without a result "
                          f"(line {line_list(calls)}); {fix}", style="yellow"))
    dropped_results = [n for n in orphans["results"] if n in repaired]
    dropped_calls = [c["line"] for c in orphans["calls"] if c["line"] in repaired]
    if dropped_results or dropped_calls:
        what = []
        if dropped_calls:
            what.append(f"{len(dropped_calls)} tool call(s) without a result (line {line_list(dropped_calls)})")
        if dropped_results:
            what.append(f"{len(dropped_results)} tool result(s) without their call (line {line_list(dropped_results)})")
        lines.append(Text(f"repaired: --repair dropped {' and '.join(what)}"))
    return lines


def print_table(report: dict[str, Any], console: Console, *, compacted: bool = True, repair: bool = False) -> None:
    console.print(usage_table(report, compacted=compacted, repair=repair))


def plan_lines(report: dict[str, Any]) -> list[str]:
    """What a --dry-run would do, per strategy and pass: the figures of the run's table (what each
    step removed, rewrote and added, the tokens saved, what it did) and the original lines."""
    lines = [f"dry run: {report['input']} — nothing written"]
    for action in report["actions"]:
        head = f"{action['strategy']} (pass {action['pass']}):"
        if action["error"]:
            lines.append(f"{head} would fail: {action['error']}")
            continue
        step = [e for e in report["removed"] if e["strategy"] == action["strategy"] and e["pass"] == action["pass"]]
        what = []
        for verb, kind, count in (("remove", "removed", action["messages_removed"]),
                                  ("rewrite", "rewritten", action["messages_changed"])):
            if count:
                entries = [e for e in step if e["action"] == kind]
                what.append(f"would {verb} {count:,} message(s){_which(entries, count, action['strategy'])}")
        if action["messages_added"]:
            what.append(f"would add {action['messages_added']:,} message(s)")
        lines.append(f"{head} {'; '.join(what) or 'no change'}; saves {action['tokens_saved']:,} tokens: {action['detail']}")
    for skipped in report["skipped"]:
        lines.append(f"{skipped['strategy']}: skipped ({skipped['reason']})")
    budget = report["budget"]
    after = report["after"]
    if budget["trigger"] == UNLIMITED:
        verdict = "no budget: nothing would be compacted"
    elif not report["triggered"] and report["mode"] != "full":
        verdict = f"already within the budget ({budget['description']}): nothing would change"
    elif report["over_budget"]:
        verdict = f"the budget ({budget['description']}) would NOT be met: {after['messages']:,} messages, {after['tokens']:,} tokens"
    else:
        verdict = f"the budget ({budget['description']}) would be met: {after['messages']:,} messages, {after['tokens']:,} tokens"
    lines.append(verdict)
    return lines


def _which(entries: list[dict[str, Any]], count: int, strategy: str) -> str:
    """The original lines of a step's ``count`` messages, as the ledger has them: compact's own
    messages have none, and a rewrite given back later (or by this very step) is not in it."""
    lines = [e["line"] for e in entries if e["line"] is not None]
    said = [f"line(s) {line_ranges(lines)}"] if lines else []
    own = len(entries) - len(lines)
    if own:
        said.append(f"{own} compact wrote")
    back = count - len(entries)
    if back > 0:
        said.append(f"{back} put back as the input had them" if strategy == GIVE_BACK else f"{back} given back later")
    return f" ({'; '.join(said)})" if said else ""
