"""Budget use beyond the quality benchmark's cuts: every real transcript at many budgets.

Each transcript `compact` reads in ../shared/realdata and bench/sessions (not the datasets, whose conversations are
each compacted to the whole budget; and the longest tau-bench conversations,
each written as a chat JSONL file) is compacted to 18 budgets, 10% to 95% of its own size in
steps of 5%. A run whose input is over its budget must lose something; issue 12 asks it to end
between 95% and 100% of the budget unless the pinned floor forbids it. The report lists every
run that ends lower, with what explains it (the budget is tiny, the pinned floor is most of it,
or nothing the report says).

    python bench/budget_use.py                     # about a minute on 2 cores
    python bench/budget_use.py --tau 8 --json out.json

`compact` runs in-process through this checkout's CLI entry, with a fresh COMPACT_CACHE_DIR.
Deterministic: two runs give the same rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # quality.py: the same in-process run of this checkout's compact

from core import formats
from core.errors import CompactError

FRACTIONS = [round(0.10 + 0.05 * i, 2) for i in range(18)]  # 10% .. 95%
LOW = 0.95  # issue 12: a run over its budget ends between 95% and 100% of it
TINY = 1000  # budgets under this many tokens
HIGH_FLOOR = 0.7  # a pinned floor at least this share of the budget


def transcripts(realdata: Path, work: Path, tau: int, bundled: bool = True) -> list[Path]:
    found = []
    shipped = sorted((ROOT / "bench" / "sessions").rglob("*.jsonl")) if bundled else []  # see bench/sessions/README.md
    for path in [*sorted(realdata.rglob("*")), *shipped]:
        if path.suffix not in (".jsonl", ".json") or "trajectories" in path.name:
            continue
        with contextlib.suppress(CompactError):  # (a file compact does not read is not measured)
            formats.read(str(path))
            found.append(path)
    trajectories = realdata / "openai-chat" / "tau-bench-airline-trajectories.jsonl"
    if tau and trajectories.exists():
        records = [orjson.loads(line) for line in trajectories.read_bytes().splitlines() if line.strip()]
        records.sort(key=lambda r: (-len(orjson.dumps(r["messages"])), r["task_id"], r["trial"]))
        for record in records[:tau]:
            target = work / f"tau-bench-airline-task{record['task_id']}-trial{record['trial']}.jsonl"
            target.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in record["messages"]))
            found.append(target)
    return found


def compact(path: Path, budget: int, report: Path, out: Path) -> dict[str, Any]:
    """The report of `compact PATH --max-tokens BUDGET` (a run that fails raises: no stale report)."""
    from quality import run_compact

    run_compact(path, budget, ["--report", str(report)], out)
    return json.loads(report.read_text())


def measure(paths: list[Path], work: Path) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        whole = compact(path, 10**9, work / "r.json", work / ("o" + path.suffix))
        if "conversations" in whole:
            continue  # a dataset: each conversation is compacted on its own, to the whole budget
        size = whole["before"]["tokens"]
        for fraction in FRACTIONS:
            budget = max(1, int(size * fraction))
            report = compact(path, budget, work / "r.json", work / ("o" + path.suffix))
            floor = (report.get("budget") or {}).get("floor") or {}
            only_free = all(
                e["strategy"] in ("drop_old_thinking", "thinking_after_change", "deduplicate_file_reads")
                for e in report["removed"]
            )
            rows.append({
                "file": path.name,
                "size": size,
                "budget": budget,
                "after": report["after"]["tokens"],
                "use": report["after"]["tokens"] / budget,
                "floor": floor.get("tokens", 0),
                "must_lose": size > budget,
                "loses_nothing_read": bool(report["removed"]) and only_free,
            })
    return rows


def why(row: dict[str, Any]) -> str:
    if row["budget"] < TINY:
        return f"budget under {TINY:,} tokens"
    if row["floor"] >= HIGH_FLOOR * row["budget"]:
        return f"pinned floor {row['floor'] / row['budget']:.0%} of the budget"
    return "other"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--realdata", type=Path, default=ROOT.parent / "shared" / "realdata")
    parser.add_argument("--tau", type=int, default=8, help="how many of the longest tau-bench conversations")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--no-bundled", action="store_true", help="leave out the sessions in bench/sessions")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["COMPACT_CACHE_DIR"] = str(work / "cache")
        rows = measure(transcripts(args.realdata, work, args.tau, not args.no_bundled), work)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    counted = [r for r in rows if r["must_lose"] and not r["loses_nothing_read"]]
    low = [r for r in counted if r["use"] < LOW]
    print(f"{len({r['file'] for r in rows})} transcripts x {len(FRACTIONS)} budgets: {len(rows)} runs; "
          f"{len(counted)} must lose something a model reads; {len(low)} of them end under {LOW:.0%} of the budget.")
    reasons: dict[str, int] = {}
    for row in low:
        reasons[why(row)] = reasons.get(why(row), 0) + 1
    for reason, number in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"- {number}: {reason}")
    print("\n| file | budget | after | use | pinned floor |\n|---|---:|---:|---:|---:|")
    for row in low:
        print(f"| {row['file']} | {row['budget']:,} | {row['after']:,} | {row['use']:.2f} | {row['floor']:,} |")
    over = [r for r in rows if r["after"] > r["budget"] and r["floor"] <= r["budget"]]
    if over:
        print(f"\n{len(over)} run(s) over a reachable budget: " + ", ".join(f"{r['file']}@{r['budget']}" for r in over))
    return 0


if __name__ == "__main__":
    sys.exit(main())
