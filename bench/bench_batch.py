"""Throughput of `compact batch`: 1 job vs 2 jobs of the process pool, and the Ray engine.

    python bench/bench_batch.py                      # 1,000 transcripts x 500 messages, every case
    python bench/bench_batch.py --count 200 --cases pool1,pool2 --repeat 3

Transcripts come from bench/generate.py (`generate(500, seed=i, size_scale=0.3)`), written once
to bench/results/data/batch-COUNTxMESSAGES-GENERATORHASH/ (git-ignored) and reused. Every case
is one `compact batch DIR --out OUT --max-tokens 8000 --no-cache --force -q` process, timed
wall to wall (interpreter start, worker start-up and, for Ray, starting and stopping the local
instance included), into a fresh output folder. The outputs of every case are compared byte
for byte. Prints a markdown table (and writes it to --out, with the raw figures beside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate

CASES = {
    "pool1": ["--jobs", "1"],
    "pool2": ["--jobs", "2"],
    "ray2": ["--engine", "ray", "--jobs", "2"],
}
LABELS = {"pool1": "process pool, --jobs 1", "pool2": "process pool, --jobs 2", "ray2": "Ray (local instance), --jobs 2"}


def generator_digest() -> str:
    return hashlib.sha256((HERE / "generate.py").read_bytes()).hexdigest()[:12]


def dataset(data_dir: Path, count: int, messages: int, scale: float) -> Path:
    folder = data_dir / f"batch-{count}x{messages}-s{scale}-{generator_digest()}"
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    for index in range(count):
        sub = folder / f"part{index // 100:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        with open(sub / f"session{index:05d}.jsonl", "wb") as handle:
            handle.writelines(generate(messages, seed=index, size_scale=scale))
    done.touch()
    return folder


def outputs_digest(out: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(out.rglob("*.jsonl")):
        digest.update(str(path.relative_to(out)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def run_case(case: str, source: Path, work: Path, budget: int) -> dict[str, Any]:
    out = work / f"out-{case}"
    shutil.rmtree(out, ignore_errors=True)
    report = work / f"report-{case}.json"
    cmd = [sys.executable, "-c", "from cli.app import main; main()", "batch", str(source), "--out", str(out), "--max-tokens", str(budget),
           "--no-cache", "--force", "-q", "--report", str(report), *CASES[case]]
    env = {**os.environ, "COMPACT_CACHE_DIR": str(work / "cache"), "NO_COLOR": "1"}
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=HERE.parent, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{case} failed ({proc.returncode}): {proc.stderr.strip()}")
    totals = json.loads(report.read_text())["totals"]
    return {"case": case, "seconds": seconds, "load_before": load, "digest": outputs_digest(out),
            "totals": totals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="transcripts (default 1000)")
    parser.add_argument("--messages", type=int, default=500, help="messages per transcript (default 500)")
    parser.add_argument("--scale", type=float, default=0.3, help="generator size_scale (default 0.3)")
    parser.add_argument("--max-tokens", type=int, default=8000, help="the budget (default 8000)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"subset of {','.join(CASES)}")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the best is kept (default 1)")
    parser.add_argument("--data-dir", type=Path, default=HERE / "results" / "data")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "batch.md")
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}; choose from {', '.join(CASES)}")

    started = time.perf_counter()
    source = dataset(args.data_dir, args.count, args.messages, args.scale)
    size = sum(p.stat().st_size for p in source.rglob("*.jsonl"))
    print(f"data: {args.count} transcripts x {args.messages} messages, {size / 1e6:.0f} MB "
          f"({time.perf_counter() - started:.1f} s to make or find)", file=sys.stderr)
    for path in source.rglob("*.jsonl"):  # into the page cache, for every case alike
        path.read_bytes()

    best: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as scratch:
        work = Path(scratch)
        for case in cases:
            for attempt in range(args.repeat):
                run = run_case(case, source, work, args.max_tokens)
                print(f"{case} run {attempt + 1}: {run['seconds']:.1f} s (load {run['load_before']:.2f})", file=sys.stderr)
                if case not in best or run["seconds"] < best[case]["seconds"]:
                    best[case] = run
    text = render(best, args, size)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                         "runs": best}, indent=2))
    return 0


def render(best: dict[str, dict[str, Any]], args: argparse.Namespace, size: int) -> str:
    base = best.get("pool1")
    pool = best.get("pool2")
    title = (f"`compact batch` on {args.count:,} transcripts x {args.messages} messages "
             f"({size / 1e6:.0f} MB, `--max-tokens {args.max_tokens} --no-cache --force`), "
             f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    lines = [
        title,
        "",
        "| case | wall s | transcripts/s | vs --jobs 1 | vs pool --jobs 2 |",
        "|---|---:|---:|---:|---:|",
    ]
    for case, run in best.items():
        speed = args.count / run["seconds"]
        versus_one = f"{base['seconds'] / run['seconds']:.2f}× throughput" if base else ""
        versus_pool = f"{run['seconds'] / pool['seconds']:.2f}× wall time" if pool else ""
        lines.append(f"| {LABELS[case]} | {run['seconds']:.1f} | {speed:.1f} | {versus_one} | {versus_pool} |")
    lines.append("")
    digests = {run["digest"] for run in best.values()}
    lines.append(f"Outputs byte-identical across cases: {'yes' if len(digests) == 1 else 'NO'}.")
    totals = next(iter(best.values()))["totals"]
    lines.append(f"Tokens {totals['tokens_before']:,} → {totals['tokens_after']:,}; "
                 f"messages {totals['messages_before']:,} → {totals['messages_after']:,}.")
    if base and pool:
        gain = base["seconds"] / pool["seconds"]
        lines.append(f"Target: 2 jobs ≥ 1.8× the throughput of 1 job: {gain:.2f}× — {'PASS' if gain >= 1.8 else 'FAIL'}.")
    if pool and "ray2" in best:
        ratio = best["ray2"]["seconds"] / pool["seconds"]
        lines.append(f"Target: Ray within 2× the pool's wall time: {ratio:.2f}× — {'PASS' if ratio <= 2 else 'FAIL'}.")
    loads = ", ".join(f"{case} {run['load_before']:.2f}" for case, run in best.items())
    lines.append(f"Load average (1 min) before each kept run: {loads}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
