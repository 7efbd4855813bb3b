"""The report of bench/peer_summary.py: the table over boundaries, the per-boundary table and the
map of what Claude Code's summary kept and compact lost (by source and age)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from quality import MIN_NEEDLES

MULTIPLES = (1, 2, 4)
PEER = "claude-code-summary"
BASELINE_NAMES = ("newest-that-fit", "clear-3-then-newest")
AGE_BUCKETS = ((20, "0-19 back"), (50, "20-49 back"), (100, "50-99 back"), (200, "100-199 back"))
OLDEST_BUCKET = "200+ back"
# What became of the newest message holding a needle compact lost.
IN_SPAN = "summarized"
IN_TAIL = "in the tail, cut or cleared"


def recency(age: int) -> str:
    return "recent" if age < AGE_BUCKETS[0][0] else "older"


def age_bucket(age: int) -> str:
    return next((name for limit, name in AGE_BUCKETS if age < limit), OLDEST_BUCKET)


def method_names() -> list[str]:
    return [PEER] + [f"{name} {m}×B" for m in MULTIPLES for name in ("compact", *BASELINE_NAMES)]


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
            for key in ("summary_share", "bare_identifier_share"):
                line[key] = mean([m[key] for m in mine])
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
            "by_fate": by_weight(tally([i for i in lost if i.get("fate")],
                                       lambda i: f"{i['source']}, {recency(i['age'])}, {i['fate']}")),
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
            "| budget use | compact's summary: share of output, bare-identifier share |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for line in table:
        name, _, budget = line["method"].partition(" ")
        shares = (
            f"{pct(line['summary_share'])}, {pct(line['bare_identifier_share'])}" if "summary_share" in line else "-"
        )
        out.append(
            f"| {name} | {budget or 'B'} | {line['boundaries']} | {pct(line['weighted'])} "
            f"| {pct(line['unweighted'])} | {pct(line['last_component'])} "
            f"| {line['weighted_x_peer']:.2f} | {line['last_component_x_peer']:.2f} "
            f"| {line['weighted_beats_peer']} / {line['last_component_beats_peer']} "
            f"| {line['budget_use']:.2f} | {shares} |"
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
        fates = loss.get("by_fate", {})
        if fates:
            total = sum(w for _, w in fates.values()) or 1
            out += ["By what became of that message (source, recent = the newest 20 messages, fate): "
                    + "; ".join(f"{key} {w / total:.0%}" for key, (_, w) in fates.items()) + ".", ""]
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
    # a long path is told by its end
    return ", ".join(f"`{n if len(n) <= 60 else '…' + n[-57:]}`" for n in names)


def boundary_losses(rows: list[dict[str, Any]], multiple: int = 1) -> str:
    """Per boundary, at one multiple: what only Claude Code's summary kept (weight by source, the
    share from the newest 20 messages, and where those messages went: into the span compact's
    summary replaced, by source, or into the tail, cut or cleared), the room the summary had for
    its span, and what only compact kept."""
    sources = ["tool output", "agent's own writes", "user text", "earlier summary"]
    out = [
        "",
        (f"Per boundary at {multiple}×B, weight of the needles only Claude Code's summary kept, by "
        "source; of them, those whose message compact summarized (by source) or kept in the tail "
        "with that part cut or cleared; the tokens compact's summary had for the messages it "
        "replaced; and the weight only compact kept:"),
        "",
        "| boundary | only the summary | " + " | ".join(sources) + " | from the newest 20 "
        "| summarized: tool output / writes / user / other | in the tail | summary tokens / messages | only compact |",
        "|---|---|" + "---|" * len(sources) + "---|---|---|---|---|",
    ]
    for row in rows:
        kept = row["kept_by_one"][str(multiple)]
        lost = kept["peer_only"]
        weight = sum(i["weight"] for i in lost)
        by_source = [sum(i["weight"] for i in lost if i["source"] == s) for s in sources]
        recent = sum(i["weight"] for i in lost if i["age"] < AGE_BUCKETS[0][0])
        summarized = [sum(i["weight"] for i in lost if i["source"] == s and i.get("fate") == IN_SPAN)
                      for s in sources[:3]]
        summarized.append(sum(i["weight"] for i in lost if i["source"] not in sources[:3] and i.get("fate") == IN_SPAN))
        tail = sum(i["weight"] for i in lost if i.get("fate") == IN_TAIL)
        mine = row["methods"][f"compact {multiple}×B"]
        room = (f"{mine['summary_tokens']:,} / {mine['summarized_messages']}"
                if mine.get("summarized_messages") else "-")
        out.append(
            f"| {row['label']} | {len(lost)} ({weight}) | " + " | ".join(map(str, by_source))
            + f" | {pct(recent / weight) if weight else '-'} "
            + f"| {' / '.join(map(str, summarized))} | {tail} | {room} "
            + f"| {len(kept['compact_only'])} ({sum(i['weight'] for i in kept['compact_only'])}) |"
        )
    return "\n".join(out) + "\n"
