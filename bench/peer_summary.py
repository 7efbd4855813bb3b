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
    python bench/peer_summary.py --compact-options "-s clear_tool_results:keep_pairs=1"   # a lever

Everything but the timing is deterministic. See bench/README.md ("peer_summary.py").
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's cli/core, not an installed compact
sys.path.insert(0, str(HERE))

import orjson
from peer_report import (
    BASELINE_NAMES,
    IN_SPAN,
    IN_TAIL,
    MULTIPLES,
    PEER,
    aggregate,
    boundary_losses,
    loss_map,
    loss_markdown,
    markdown,
)
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
    origin,
    retention,
    run_compact,
)

from core import formats
from core.errors import CompactError
from core.messages import SUMMARY_MARKER, Message, countable_text, is_summary, starts_with_marker

DATA = HERE.parent.parent / "shared" / "realdata" / "claude-code-compactions"
BASELINES: dict[str, Callable[[Sequence[Message], int], list[Message]]] = dict(
    zip(BASELINE_NAMES, (newest_that_fit, clear_then_newest), strict=True)
)
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


LABEL_WORDS = 20
BARE_SHARE = 0.8


def bare_line(line: str) -> bool:
    """A line that is only a list of names (2+) after its label, whatever the label's length (a
    label before a colon does not make a list of names any less bare)."""
    body = line.strip().lstrip("-*• \t")
    head, sep, rest = body.partition(": ")
    if sep and len(head.split()) <= LABEL_WORDS:
        body = rest
    words = [w.strip("`'\"()[]{}.:") for w in body.replace(",", " ").replace(";", " ").split()]
    words = [w for w in words if w]
    # (mostly names: a group label such as "elsewhere" among them does not make the list prose)
    return len(words) >= 2 and sum(is_identifier(w) for w in words) >= BARE_SHARE * len(words)


SPAN = re.compile(r"\(lines [\d-]+, (\d+) messages\)")


def summary_stats(output: Sequence[Message]) -> dict[str, float]:
    """compact's own summary (not an earlier one of Claude Code's it kept): its share of the output's
    tokens, the share of its tokens on lines that are bare lists of names, its tokens and how many
    messages it stands for."""
    texts = [countable_text(m.data) for m in output if starts_with_marker(m.data, SUMMARY_MARKER)]
    spans = [int(found.group(1)) for text in texts if (found := SPAN.search(text))]
    lines = [line for text in texts for line in text.splitlines() if line.strip()]
    tokens = count([Message({"role": "user", "content": line}) for line in lines]) if lines else []
    bare = sum(t for t, line in zip(tokens, lines, strict=True) if bare_line(line))
    total = sum(count([m for m in output if starts_with_marker(m.data, SUMMARY_MARKER)]))
    return {
        "summary_share": total / (sum(count(output)) or 1),
        "bare_identifier_share": bare / (sum(tokens) or 1),
        "summary_tokens": total,
        "summarized_messages": sum(spans),
    }


# -- one boundary -----------------------------------------------------------------------------


def evaluate(boundary: Boundary, work: Path, timing: dict[str, float], options: Sequence[str] = ()) -> dict[str, Any]:
    """Every row of one boundary, and the needles only the peer or only compact kept; ``options``: more
    `compact` options for its rows (--compact-options)."""
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
    stayed: dict[int, set[str]] = {}
    for multiple in MULTIPLES:
        out = work / f"{stem}-out{multiple}.jsonl"
        for name, run in method_runs(prefix_path, out, options).items():
            started = time.perf_counter()
            output = run(prefix, multiple * budget)
            timing[name] = timing.get(name, 0.0) + time.perf_counter() - started
            row = score_output(output, needles, multiple * budget)
            if name == "compact":
                row.update(summary_stats(output))
                stayed[multiple] = uuids(out.read_bytes().splitlines())
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
        "kept_by_one": kept_by_one(methods, needles, prefix, boundary.prefix_lines, stayed),
    }


def uuids(lines: Sequence[bytes]) -> set[str]:
    """The ids of a Claude Code log's lines (a message compact kept whole or rewrote keeps its id)."""
    found = set()
    for data in parsed(list(lines)):
        if data is not None and isinstance(data.get("uuid"), str):
            found.add(data["uuid"])
    return found


def method_runs(
    prefix_path: Path, out: Path, options: Sequence[str] = ()
) -> dict[str, Callable[[list[Message], int], list[Message]]]:
    runs: dict[str, Callable[[list[Message], int], list[Message]]] = {
        "compact": lambda _prefix, budget: run_compact(prefix_path, budget, options, out)
    }
    for name, baseline in BASELINES.items():
        runs[name] = lambda prefix, budget, baseline=baseline: baseline(unpinned(prefix), budget)
    return runs


def unpinned(prefix: list[Message]) -> list[Message]:
    """The prefix with an earlier Claude Code summary as the user text it is in the log: the
    baselines pin the first system message, and a summary is no system prompt (pinned, it took
    the baselines past their budget at a second boundary)."""
    return [m.rewritten({**m.data, "role": "user"}) if is_summary(m) else m for m in prefix]


def score_output(output: Sequence[Message], needles: dict[str, tuple[str, int]], budget: int) -> dict[str, Any]:
    row = scores(needles, "\n".join(message_texts(output)))
    tokens = sum(count(output))
    row.update(tokens=tokens, budget_use=tokens / budget)
    return row


def kept_by_one(
    methods: dict[str, dict[str, Any]], needles: dict[str, tuple[str, int]], prefix: list[Message],
    native: Sequence[bytes] = (), stayed: dict[int, set[str]] | None = None,
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per multiple: the needles Claude Code's summary kept and compact's output lost, and the other
    way round, with where in the prefix each was (the newest message holding it) and, for those
    compact lost, what became of that message: in the span its summary replaced, or kept in the
    tail with that part cut or cleared (``native``: the prefix's lines; ``stayed``: per multiple,
    the ids of the lines of compact's output)."""
    sources = needle_sources(needles, prefix)
    lines = parsed(list(native))

    def ids(message: Message) -> set[str]:
        return {str(data["uuid"]) for n in origin(message) if 0 < n <= len(lines)
                and (data := lines[n - 1]) is not None and "uuid" in data}

    def fate(needle: str, multiple: int) -> str:
        age = sources[needle][1]
        if stayed is None or multiple not in stayed or age >= len(prefix):
            return ""
        return IN_TAIL if ids(prefix[len(prefix) - 1 - age]) & stayed[multiple] else IN_SPAN

    def described(names: set[str], multiple: int | None = None) -> list[dict[str, Any]]:
        return [
            {
                "needle": n,
                "kind": needles[n][0],
                "weight": needles[n][1],
                "source": SOURCE_KINDS.get(sources[n][0], sources[n][0]),
                "age": sources[n][1],
                **({"fate": fate(n, multiple)} if multiple is not None else {}),
            }
            for n in sorted(names)
        ]

    peer = set(methods[PEER]["kept"])
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for multiple in MULTIPLES:
        mine = set(methods[f"compact {multiple}×B"]["kept"])
        found[str(multiple)] = {"peer_only": described(peer - mine, multiple), "compact_only": described(mine - peer)}
    return found


# -- main -------------------------------------------------------------------------------------


def compact_refusal(error: RuntimeError) -> str:
    """compact's own one-line error out of run_compact's "compact ARGV exited N: STDERR"."""
    stderr = str(error).partition(": ")[2] or str(error)
    return next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the folder of Claude Code logs with compactions")
    parser.add_argument("--only", action="append", default=[], help="only logs whose name holds this (repeatable)")
    parser.add_argument("--json", type=Path, help="write every boundary's rows, the table and the loss map as JSON")
    parser.add_argument("--out", type=Path, help="also write the markdown report to this file")
    parser.add_argument("--compact-options", type=shlex.split, default=[], metavar='"OPTIONS"',
                        help='more options for every compact row, to measure a lever: "-s NAME:key=value ..."')
    parser.add_argument("--keep-outputs", type=Path, metavar="DIR",
                        help="keep each boundary's prefix, session and compact outputs in DIR, to read beside the peer's")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"peer_summary: no logs at {args.data} (--data DIR)", file=sys.stderr)
        return 2
    paths = [p for p in sorted(args.data.glob("*.jsonl")) if not args.only or any(o in p.name for o in args.only)]
    started = time.perf_counter()
    timing: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    # a fresh cache (no result memo from an earlier run), and the caller's setting back afterwards
    with (
        tempfile.TemporaryDirectory(prefix="compact-peer-") as folder,
        mock.patch.dict(os.environ, {"COMPACT_CACHE_DIR": str(Path(folder) / "cache")}),
    ):
        for path in paths:
            for boundary in boundaries(path):
                if not boundary.whole:
                    skipped.append({"label": boundary.label, "why": boundary.why})
                    continue
                try:
                    work = args.keep_outputs or Path(folder)
                    work.mkdir(parents=True, exist_ok=True)
                    rows.append(evaluate(boundary, work, timing, args.compact_options))
                except CompactError as error:  # a log compact cannot read: said, not a traceback
                    skipped.append({"label": boundary.label, "why": str(error)})
                except RuntimeError as error:  # compact refused the options: every boundary would
                    print(f"peer_summary: --compact-options: {compact_refusal(error)}; see `compact run --help`",
                          file=sys.stderr)
                    return 2
    timing["all"] = time.perf_counter() - started
    table = aggregate(rows)
    losses = loss_map(rows)
    report = markdown(table, rows) + loss_markdown(losses) + boundary_losses(rows)
    few = [r["label"] for r in rows if r["needles"] < MIN_NEEDLES]
    report += f"\n{len(rows)} boundaries of {len({r['label'].split('#')[0] for r in rows})} logs measured"
    report += f" ({len(few)} with under {MIN_NEEDLES} needles left out of the means)" if few else ""
    if args.compact_options:
        report += f" (compact options: {shlex.join(args.compact_options)})"
    report += "; skipped:\n" if skipped else ".\n"
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
