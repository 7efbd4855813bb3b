"""compact against Claude Code's own LLM summaries, at the points where Claude Code compacted (issue 28).

Each ``compact_boundary`` line of a real Claude Code log is followed by the ``isCompactSummary``
line Claude Code's model wrote. The prefix is the live context before the boundary (from the
previous boundary's summary on, what Claude Code itself counted); B is the cl100k size of Claude
Code's summary message; the continuation is what follows the summary up to the next boundary. The
needles, their weights and the scoring are bench/quality.py's: what the agent writes in the
continuation that the prefix's own text holds, weighted by how many continuation messages use it.

Rows: Claude Code's summary alone; `compact` at 1×, 2× and 4× B in the session's own format;
newest-that-fit and clear-3-then-newest at the same budgets.

    python bench/peer_summary.py                  # every boundary in ../shared/realdata
    python bench/peer_summary.py --json out.json --out table.md --only 76_

Everything but the timing is deterministic. See bench/README.md ("peer_summary.py").
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's cli/core, not an installed compact
sys.path.insert(0, str(HERE))

import orjson
from quality import (
    MIN_NEEDLES,
    clear_then_newest,
    count,
    extract_needles,
    message_texts,
    needle_sources,
    needles_for,
    newest_that_fit,
    occurs,
    retention,
    run_compact,
)

from core import formats
from core.messages import Message, countable_text, is_summary, written_by_compact

DATA = HERE.parent.parent / "shared" / "realdata" / "claude-code-compactions"
MULTIPLES = (1, 2, 4)
PEER = "claude-code-summary"
BASELINES: dict[str, Callable[[Sequence[Message], int], list[Message]]] = {
    "newest-that-fit": newest_that_fit,
    "clear-3-then-newest": clear_then_newest,
}
# Where a needle came from (quality.needle_sources' source), by who wrote it.
SOURCE_KINDS = {
    "tool result": "tool output",
    "assistant text": "agent's own writes",
    "tool-call arguments": "agent's own writes",
    "user text": "user text",
    "summary": "earlier summary",
    "system": "system",
    "other": "other",
}
AGE_BUCKETS = ((20, "0-19 back"), (50, "20-49 back"), (100, "50-99 back"), (200, "100-199 back"))
OLDEST_BUCKET = "200+ back"
# Identifier-like needle kinds: a line of nothing else is a bare list of names.
IDENTIFIER_KINDS = {"path", "url", "dotted", "snake", "camel", "hex_id", "code", "number", "exception"}


# -- boundaries -------------------------------------------------------------------------------


@dataclass
class Boundary:
    label: str
    line: int  # of the compact_boundary line
    prefix_lines: list[bytes]  # from the previous boundary line (or the file's start) to this one
    session_lines: list[bytes]  # the same start, to the next boundary
    whole: bool
    why: str = ""


def parsed(raw: list[bytes]) -> list[dict[str, Any] | None]:
    lines: list[dict[str, Any] | None] = []
    for line in raw:
        try:
            data = orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError:
            data = None
        lines.append(data if isinstance(data, dict) else None)
    return lines


def is_boundary(data: dict[str, Any] | None) -> bool:
    return data is not None and data.get("type") == "system" and data.get("subtype") == "compact_boundary"


def chain_gap(lines: list[dict[str, Any] | None], at: int) -> str:
    """Why the context before line index ``at`` is not whole in the log ('' when it is).

    Claude Code's context is the parentUuid chain of the newest message: whole when it runs back
    to the session's root or to the previous boundary's summary, a slice when it leaves the file
    (the log starts mid-session, or the session was resumed from elsewhere).
    """
    where = {d["uuid"]: i for i, d in enumerate(lines[:at]) if d is not None and d.get("uuid")}
    newest = next(
        (i for i in range(at - 1, -1, -1) if (d := lines[i]) and d.get("type") in ("user", "assistant")),
        None,
    )
    if newest is None:
        return "no message before the boundary"
    parent = lines[newest].get("uuid") if lines[newest] else None
    while parent:
        index = where.get(parent)
        if index is None:
            return f"a slice: the chain before it leaves the log at {parent[:8]}"
        data = lines[index] or {}
        if data.get("isCompactSummary") is True:
            return ""
        parent = data.get("parentUuid")
    return ""


def boundaries(path: Path) -> list[Boundary]:
    """The compact_boundary lines of a log that Claude Code's summary follows."""
    raw = path.read_bytes().split(b"\n")
    lines = parsed(raw)
    at = [i for i, data in enumerate(lines) if is_boundary(data)]
    found = []
    for k, index in enumerate(at):
        label = f"{path.stem}#{k + 1}"
        summary = lines[index + 1] if index + 1 < len(lines) else None
        if not (summary and summary.get("isCompactSummary") is True):
            continue  # no summary of Claude Code's to compare with
        start = at[k - 1] if k else 0
        end = at[k + 1] if k + 1 < len(at) else len(raw)
        why = chain_gap(lines, index)
        found.append(
            Boundary(label, index + 1, raw[start:index], raw[start:end], not why, why)
        )
    return found


# -- scoring ----------------------------------------------------------------------------------


def last_component(needle: str) -> str:
    return needle.rstrip("/").rsplit("/", 1)[-1] or needle


def scores(needles: dict[str, tuple[str, int]], text: str) -> dict[str, Any]:
    """quality.py's retention, and the weighted share with a path kept when its last component is
    (a summary writes `resume.go` where compact keeps `/Users/…/cli/resume.go`)."""
    weighted, unweighted, lost = retention(needles, text)
    lost_set = {n for items in lost.values() for n in items}
    total = sum(w for _, w in needles.values()) or 1
    kept_short = sum(
        w
        for n, (kind, w) in needles.items()
        if n not in lost_set or (kind == "path" and occurs(last_component(n), text))
    )
    return {
        "weighted": weighted,
        "unweighted": unweighted,
        "last_component": kept_short / total,
        "kept": sorted(set(needles) - lost_set),
    }


def is_identifier(word: str) -> bool:
    found = extract_needles(word)
    return found.get(word) in IDENTIFIER_KINDS


def bare_line(line: str) -> bool:
    """A line that is only a list of names (2+), with at most a short label before a colon."""
    body = line.strip().lstrip("-*• \t")
    head, sep, rest = body.partition(": ")
    if sep and len(head.split()) <= 3:
        body = rest
    words = [w.strip("`'\"()[]{}.:") for w in body.replace(",", " ").replace(";", " ").split()]
    words = [w for w in words if w]
    return len(words) >= 2 and all(is_identifier(w) for w in words)


def bare_identifier_share(output: Sequence[Message]) -> float:
    """The share of compact's own summary (its tokens) on lines that are bare lists of names."""
    texts = [countable_text(m.data) for m in output if is_summary(m) and written_by_compact(m)]
    lines = [line for text in texts for line in text.splitlines() if line.strip()]
    if not lines:
        return 0.0
    tokens = count([Message({"role": "user", "content": line}) for line in lines])
    bare = sum(t for t, line in zip(tokens, lines, strict=True) if bare_line(line))
    return bare / (sum(tokens) or 1)


# -- one boundary -----------------------------------------------------------------------------


def age_bucket(age: int) -> str:
    return next((name for limit, name in AGE_BUCKETS if age < limit), OLDEST_BUCKET)


def evaluate(boundary: Boundary, work: Path, timing: dict[str, float]) -> dict[str, Any]:
    """Every row of one boundary, and what the peer kept that compact lost."""
    stem = boundary.label.replace("#", "-")
    prefix_path = work / f"{stem}-prefix.jsonl"
    prefix_path.write_bytes(b"\n".join(boundary.prefix_lines) + b"\n")
    session_path = work / f"{stem}-session.jsonl"
    session_path.write_bytes(b"\n".join(boundary.session_lines) + b"\n")
    prefix = formats.read(str(prefix_path)).messages
    after = formats.read(str(session_path)).messages  # from the boundary on: summary, continuation
    summary, continuation = after[0], after[1:]
    if not is_summary(summary):
        raise RuntimeError(f"{boundary.label}: the line after the boundary did not read as a summary")
    needles = needles_for(continuation, "\n".join(message_texts(prefix)))
    budget = count([summary])[0]
    methods: dict[str, dict[str, Any]] = {PEER: score_output([summary], needles, budget)}
    for multiple in MULTIPLES:
        for name, run in method_runs(prefix_path, work / f"{stem}-out{multiple}.jsonl").items():
            started = time.perf_counter()
            output = run(prefix, multiple * budget)
            timing[name] = timing.get(name, 0.0) + time.perf_counter() - started
            row = score_output(output, needles, multiple * budget)
            if name == "compact":
                row["bare_identifier_share"] = bare_identifier_share(output)
            methods[f"{name} {multiple}×B"] = row
    return {
        "label": boundary.label,
        "line": boundary.line,
        "prefix_messages": len(prefix),
        "prefix_tokens": sum(count(prefix)),
        "summary_tokens": budget,
        "continuation_messages": len(continuation),
        "needles": len(needles),
        "methods": methods,
        "kept_by_one": kept_by_one(methods, needles, prefix),
    }


def method_runs(prefix_path: Path, out: Path) -> dict[str, Callable[[list[Message], int], list[Message]]]:
    runs: dict[str, Callable[[list[Message], int], list[Message]]] = {
        "compact": lambda _prefix, budget: run_compact(prefix_path, budget, [], out)
    }
    runs.update(BASELINES)
    return runs


def score_output(output: Sequence[Message], needles: dict[str, tuple[str, int]], budget: int) -> dict[str, Any]:
    row = scores(needles, "\n".join(message_texts(output)))
    tokens = sum(count(output))
    row.update(tokens=tokens, budget_use=tokens / budget)
    return row


def kept_by_one(
    methods: dict[str, dict[str, Any]], needles: dict[str, tuple[str, int]], prefix: list[Message]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per multiple: the needles Claude Code's summary kept and compact's output lost, and the other
    way round, with where in the prefix each was (the newest message holding it)."""
    sources = needle_sources(needles, prefix)

    def described(names: set[str]) -> list[dict[str, Any]]:
        return [
            {
                "needle": n,
                "kind": needles[n][0],
                "weight": needles[n][1],
                "source": SOURCE_KINDS.get(sources[n][0], sources[n][0]),
                "age": sources[n][1],
            }
            for n in sorted(names)
        ]

    peer = set(methods[PEER]["kept"])
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for multiple in MULTIPLES:
        mine = set(methods[f"compact {multiple}×B"]["kept"])
        found[str(multiple)] = {"peer_only": described(peer - mine), "compact_only": described(mine - peer)}
    return found


# -- report -----------------------------------------------------------------------------------


def method_names() -> list[str]:
    return [PEER] + [f"{name} {m}×B" for m in MULTIPLES for name in ("compact", *BASELINES)]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per method: mean scores over the boundaries with enough needles, and how often it
    beats Claude Code's summary."""
    counted = [r for r in rows if r["needles"] >= MIN_NEEDLES]
    table = []
    peer = {key: mean([r["methods"][PEER][key] for r in counted]) for key in ("weighted", "last_component")}
    for name in method_names():
        mine = [r["methods"][name] for r in counted]
        line: dict[str, Any] = {"method": name, "boundaries": len(mine)}
        for key in ("weighted", "unweighted", "last_component"):
            line[key] = mean([m[key] for m in mine])
        for key in ("weighted", "last_component"):
            line[f"{key}_x_peer"] = line[key] / peer[key] if peer[key] else float("nan")
            line[f"{key}_beats_peer"] = sum(
                1 for r in counted if r["methods"][name][key] > r["methods"][PEER][key]
            )
        line["budget_use"] = mean([m["budget_use"] for m in mine])
        if name.startswith("compact"):
            line["bare_identifier_share"] = mean([m["bare_identifier_share"] for m in mine])
        table.append(line)
    return table


def tally(items: list[dict[str, Any]], key: Callable[[dict[str, Any]], str]) -> dict[str, list[int]]:
    """{key: [needles, weight]} over ``items``."""
    cells: dict[str, list[int]] = {}
    for item in items:
        cell = cells.setdefault(key(item), [0, 0])
        cell[0] += 1
        cell[1] += item["weight"]
    return cells


def by_weight(cells: dict[str, list[int]]) -> dict[str, list[int]]:
    return dict(sorted(cells.items(), key=lambda kv: (-kv[1][1], kv[0])))


def heaviest(items: list[dict[str, Any]], how_many: int = 8) -> list[str]:
    """The needles of most weight over all boundaries."""
    weights: dict[str, int] = {}
    for item in items:
        weights[item["needle"]] = weights.get(item["needle"], 0) + item["weight"]
    return [n for n, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:how_many]]


def loss_map(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per multiple: needles Claude Code kept and compact lost, by source and age, by needle kind,
    the heaviest of each source; and, by kind, what compact kept and Claude Code lost."""
    result: dict[str, dict[str, Any]] = {}
    for multiple in MULTIPLES:
        lost = [i for r in rows for i in r["kept_by_one"][str(multiple)]["peer_only"]]
        won = [i for r in rows for i in r["kept_by_one"][str(multiple)]["compact_only"]]
        sources = sorted({i["source"] for i in lost})
        result[str(multiple)] = {
            "by_source": dict(sorted(tally(lost, lambda i: f"{i['source']}, {age_bucket(i['age'])}").items())),
            "by_kind": by_weight(tally(lost, lambda i: i["kind"])),
            "examples": {s: heaviest([i for i in lost if i["source"] == s]) for s in sources},
            "compact_only_by_kind": by_weight(tally(won, lambda i: i["kind"])),
            "compact_only_examples": heaviest(won),
        }
    return result


def pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0%}"


def markdown(table: list[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    out = [
        (
            "| method | budget | boundaries | weighted | unweighted | weighted, path = last component "
            "| ×peer weighted | ×peer last component | beats peer (weighted / last component) "
            "| budget use | bare-identifier share |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for line in table:
        name, _, budget = line["method"].partition(" ")
        bare = line.get("bare_identifier_share")
        out.append(
            f"| {name} | {budget or 'B'} | {line['boundaries']} | {pct(line['weighted'])} "
            f"| {pct(line['unweighted'])} | {pct(line['last_component'])} "
            f"| {line['weighted_x_peer']:.2f} | {line['last_component_x_peer']:.2f} "
            f"| {line['weighted_beats_peer']} / {line['last_component_beats_peer']} "
            f"| {line['budget_use']:.2f} | {'-' if bare is None else pct(bare)} |"
        )
    out += ["", "Per boundary, weighted (last component):", ""]
    columns = [PEER] + [f"compact {m}×B" for m in MULTIPLES] + [f"newest-that-fit {MULTIPLES[0]}×B"]
    out.append("| boundary | prefix msgs | prefix tokens | B | needles | " + " | ".join(columns) + " |")
    out.append("|---|---|---|---|---|" + "---|" * len(columns))
    for row in rows:
        cells = [
            f"{pct(row['methods'][c]['weighted'])} ({pct(row['methods'][c]['last_component'])})"
            for c in columns
        ]
        out.append(
            f"| {row['label']} | {row['prefix_messages']} | {row['prefix_tokens']} "
            f"| {row['summary_tokens']} | {row['needles']} | " + " | ".join(cells) + " |"
        )
    return "\n".join(out) + "\n"


def loss_markdown(losses: dict[str, dict[str, Any]]) -> str:
    buckets = [name for _, name in AGE_BUCKETS] + [OLDEST_BUCKET]
    out = []
    for multiple, loss in losses.items():
        sources = sorted({key.split(", ")[0] for key in loss["by_source"]})
        out += [
            "",
            (
                f"Needles Claude Code's summary kept and compact {multiple}×B lost, by where the "
                "newest prefix message holding each came from: needles (weight)"
            ),
            "",
            "| source | " + " | ".join(buckets) + " | all |",
            "|---|" + "---|" * (len(buckets) + 1),
        ]
        for source in sources:
            cells = [loss["by_source"].get(f"{source}, {b}", [0, 0]) for b in buckets]
            total = [sum(c[0] for c in cells), sum(c[1] for c in cells)]
            out.append(
                f"| {source} | " + " | ".join(f"{c[0]} ({c[1]})" for c in cells + [total]) + " |"
            )
        out += ["", f"By needle kind: {kind_list(loss['by_kind'])}.", ""]
        for source, names in loss["examples"].items():
            out.append(f"- {source}: " + examples(names))
        out.append(
            f"\nThe other way, kept by compact {multiple}×B and lost by Claude Code's summary: "
            f"{kind_list(loss['compact_only_by_kind'])}; e.g. {examples(loss['compact_only_examples'])}"
        )
    return "\n".join(out) + "\n"


def kind_list(cells: dict[str, list[int]]) -> str:
    return "; ".join(f"{kind} {n} ({w})" for kind, (n, w) in cells.items()) or "none"


def examples(names: list[str]) -> str:
    return ", ".join(f"`{n[:60]}`" for n in names)


# -- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the folder of Claude Code logs with compactions")
    parser.add_argument("--only", action="append", default=[], help="only logs whose name holds this (repeatable)")
    parser.add_argument("--json", type=Path, help="write every boundary's rows, the table and the loss map as JSON")
    parser.add_argument("--out", type=Path, help="also write the markdown report to this file")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"peer_summary: no logs at {args.data} (--data DIR)", file=sys.stderr)
        return 2
    paths = [p for p in sorted(args.data.glob("*.jsonl")) if not args.only or any(o in p.name for o in args.only)]
    started = time.perf_counter()
    timing: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="compact-peer-") as folder:
        work = Path(folder)
        os.environ["COMPACT_CACHE_DIR"] = str(work / "cache")  # no result memo from an earlier run
        for path in paths:
            for boundary in boundaries(path):
                if not boundary.whole:
                    skipped.append({"label": boundary.label, "why": boundary.why})
                    continue
                rows.append(evaluate(boundary, work, timing))
    timing["all"] = time.perf_counter() - started
    table = aggregate(rows)
    losses = loss_map(rows)
    report = markdown(table, rows) + loss_markdown(losses)
    few = [r["label"] for r in rows if r["needles"] < MIN_NEEDLES]
    report += f"\n{len(rows)} boundaries of {len({r['label'].split('#')[0] for r in rows})} logs measured"
    report += f" ({len(few)} with under {MIN_NEEDLES} needles left out of the means)" if few else ""
    report += "; skipped, not whole in the log:\n" if skipped else ".\n"
    report += "".join(f"- {s['label']}: {s['why']}\n" for s in skipped)
    print(report)
    print(
        "timing: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in sorted(timing.items())),
        file=sys.stderr,
    )
    if args.out:
        args.out.write_text(report)
    if args.json:
        document = {"table": table, "boundaries": rows, "loss_map": losses, "skipped": skipped, "timing": timing}
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
