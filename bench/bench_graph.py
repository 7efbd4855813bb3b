"""Benchmark the working graph: validate, load, merge, save and render a large snapshot.

    python bench/bench_graph.py                      # 100k nodes, 500k relationships
    python bench/bench_graph.py --nodes 10000 --relationships 50000 --no-tracemalloc

Generates a seeded random snapshot (and a delta: 10% of the nodes, half of
them new, and 10% of the relationships, half of them new) in a temporary
folder, runs each step in a fresh process (so each peak is its own), and
prints a markdown table: seconds, and the process's peak resident memory
(which includes the interpreter and, for steps after "load", the loaded graph).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.graph import (
    GraphCaps,
    GraphContextConfig,
    MergePolicy,
    load_snapshot,
    read_snapshot,
    render_graph_text,
    save_snapshot,
    validate_snapshot_file,
)
from core.graph.checkers import SNAPSHOT_SCHEMA
from core.io.schema_loader import load_schema

LABELS = ["Person", "Place", "Thing", "Event", "Team", "Secret"]
TYPES = ["KNOWS", "OWNS", "NEAR", "PART_OF", "MENTIONS"]


def make_snapshot(
    nodes: int,
    rels: int,
    seed: int,
    *,
    id_offset: int = 0,
    rel_offset: int = 0,
    node_space: int | None = None,
) -> dict[str, Any]:
    rng = random.Random(seed)
    space = node_space or nodes
    node_items = []
    for i in range(id_offset, id_offset + nodes):
        props = {"name": f"node {i}", "rank": i % 97} if i % 3 == 0 else {}
        node_items.append(
            {"id": f"n{i}", "labels": rng.sample(LABELS, 1 + i % 2), "properties": props}
        )
    ids = [f"n{i}" for i in range(space)] + [item["id"] for item in node_items]
    rel_items = []
    for j in range(rel_offset, rel_offset + rels):
        rel_items.append(
            {
                "id": f"r{j}",
                "from": rng.choice(ids),
                "to": rng.choice(ids),
                "type": rng.choice(TYPES),
                "weight": round(rng.uniform(0.1, 5.0), 3),
                "properties": {"seen": j % 7} if j % 10 == 0 else {},
            }
        )
    return {"nodes": node_items, "relationships": rel_items}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux: the peak so far is the best we have
        return peak_rss_mb()


STEPS = {
    "validate": "validate_snapshot_file (parse + schema + rules)",
    "load": "load_snapshot (validate + build the Graph)",
    "merge_delta": "merge a delta file (read + validate it + merge, policy merge, weights sum)",
    "merge_self": "merge the graph into itself (every id conflicts, weights sum)",
    "save": "save_snapshot (atomic, streamed)",
    "render": "render_graph_text (64 nodes / 128 relationships)",
}


def run_step(name: str, folder: Path, traced: bool) -> dict[str, Any]:
    """Run one step in this (fresh) process: setup untimed, then the step timed."""
    base_path, delta_path = folder / "base.json", folder / "delta.json"
    caps = GraphCaps(max_nodes=10**7, max_relationships=10**8)
    policy = MergePolicy("merge", "sum")
    graph = None
    if name in ("merge_delta", "merge_self", "save", "render"):
        graph = load_snapshot(base_path, caps=caps)
    steps: dict[str, Callable[[], Any]] = {
        "validate": lambda: validate_snapshot_file(base_path),
        "load": lambda: load_snapshot(base_path, caps=caps),
        "merge_delta": lambda: graph.merge(
            read_snapshot(delta_path, known_node_ids=graph.nodes)[0], policy
        ),
        "merge_self": lambda: graph.merge(graph.snapshot(), policy),
        "save": lambda: save_snapshot(graph, folder / "out.json"),
        "render": lambda: render_graph_text(graph, GraphContextConfig()),
    }
    gc.collect()
    before_rss = current_rss_mb()
    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    result = steps[name]()
    seconds = time.perf_counter() - start
    traced_peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else None
    summary = result.summary() if hasattr(result, "summary") else None
    return {
        "seconds": seconds,
        "rss_before": before_rss,
        "rss_peak": peak_rss_mb(),
        "traced_peak": traced_peak,
        "summary": summary,
    }


def in_subprocess(name: str, folder: Path, traced: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--run-step", name, "--folder", str(folder)]
    if traced:
        command.append("--tracemalloc")
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.splitlines()[-1])


def jsonschema_per_item(path: Path, sample: int) -> float:
    """Seconds jsonschema alone would take for every item, extrapolated from ``sample`` items."""
    from jsonschema import Draft202012Validator

    schema = load_schema(SNAPSHOT_SCHEMA)
    document = orjson.loads(path.read_bytes())
    validators = {
        name: Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"})
        for name in ("node", "relationship")
    }
    total = 0.0
    for name, items in (("node", document["nodes"]), ("relationship", document["relationships"])):
        chunk = items[:sample]
        start = time.perf_counter()
        for item in chunk:
            validators[name].is_valid(item)
        total += (time.perf_counter() - start) * len(items) / max(len(chunk), 1)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--relationships", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also trace Python allocations (slow; overstates orjson's transient peak)",
    )
    parser.add_argument("--jsonschema-sample", type=int, default=20_000)
    parser.add_argument("--run-step", choices=sorted(STEPS), help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_step:
        print(json.dumps(run_step(args.run_step, args.folder, args.tracemalloc)))
        return

    folder = Path(tempfile.mkdtemp(prefix="bench-graph-"))
    try:
        n, r = args.nodes, args.relationships
        base_path = folder / "base.json"
        base_path.write_bytes(orjson.dumps(make_snapshot(n, r, args.seed)))
        delta = make_snapshot(
            n // 10,
            r // 10,
            args.seed + 1,
            id_offset=n - n // 20,
            rel_offset=r - r // 20,
            node_space=n,
        )
        (folder / "delta.json").write_bytes(orjson.dumps(delta))
        rows = [(STEPS[name], in_subprocess(name, folder, args.tracemalloc)) for name in STEPS]
        size = base_path.stat().st_size / 2**20
        estimate = jsonschema_per_item(base_path, args.jsonschema_sample)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"Snapshot: {n:,} nodes, {r:,} relationships, {size:.1f} MiB on disk; "
        f"delta: {len(delta['nodes']):,} nodes, {len(delta['relationships']):,} relationships; "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs."
    )
    print("Each step runs in a fresh process; the graph is loaded first (untimed) where needed.\n")
    traced = " | peak traced MiB" if args.tracemalloc else ""
    print(f"| step | seconds | peak RSS MiB (process) | RSS when the step starts MiB{traced} |")
    print("|---|---:|---:|---:|" + ("---:|" if args.tracemalloc else ""))
    for label, row in rows:
        extra = f" | {row['traced_peak']:.0f}" if args.tracemalloc else ""
        seconds, peak, before = row["seconds"], row["rss_peak"], row["rss_before"]
        print(f"| {label} | {seconds:.2f} | {peak:.0f} | {before:.0f}{extra} |")
    print(
        "| for comparison: jsonschema alone on every item (extrapolated from "
        f"{args.jsonschema_sample:,} per type) | {estimate:.1f} | | |"
    )
    print(f"\nDelta merge: {rows[2][1]['summary']}")


if __name__ == "__main__":
    main()
