"""Invariants of compaction in every format, over generated conversations (Hypothesis).

tests/test_properties.py checks the engine on OpenAI chat dicts; this file checks what a run
writes. A conversation (system prompt; user turns with emoji and CJK; assistant text; parallel
tool calls with nested JSON arguments and long strings; results from empty to very long;
thinking blocks) is written as Anthropic Messages or OpenAI chat, converted with --to into
each format, or written natively (a Claude Code reply one block per line, a Codex rollout with
its event_msg copies, a Gemini stream in delta chunks), then compacted under a tight or a loose
budget with the default list, --preset seed, --summarizer none or a clamp-only list. Then:

- the file written, read back and counted, holds what the report says, within the budget unless
  the report says over_budget (and then the pinned floor, or a list that cannot remove, is why);
- the same input twice gives the same bytes;
- every call has its result and every result its call;
- the newest request and the first system prompt are kept whole, or cut by clamp_pinned;
- every message the output lacks or changed is in the ledger;
- compacting the output again to the same budget changes nothing;
- converted --to openai / --to anthropic, the output passes `validate` for that provider
  (problems the input already had aside).
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from core import formats
from core.analysis.provider_requests import validate_bytes
from core.api import compact_file, count_file
from core.config import MemoryConfig, StrategySpec
from core.messages import call_ids, content_text, result_ids

WORDS = st.sampled_from(["alpha", "beta", "def", "return", "x = 1", "path/to/file.py", "error:", "\n", "😀",
                         "🚀🔥", "日本語のテキスト", "中文字符", "naïve", "\t", "{", '"quoted"', "a\\b"])
FIRST = st.sampled_from(["ok", "Fix", "😀", "日本"])  # no text is blank: the APIs refuse blank text anyway


def text(low: int = 1, high: int = 60) -> Any:
    return st.tuples(FIRST, st.lists(WORDS, min_size=low - 1, max_size=high)).map(lambda t: " ".join([t[0], *t[1]]))


LONG = st.tuples(FIRST, WORDS, st.integers(50, 1500)).map(lambda t: t[0] + " " + (t[1] + " ") * t[2])
LEAF = st.one_of(text(1, 10), LONG, st.integers(-5, 10**6), st.booleans(), st.none())
ARGUMENT = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.sampled_from(["a", "edits"]), inner, max_size=2)),
                        max_leaves=5)
TOOLS = st.sampled_from(["read_file", "Bash", "grep", "Edit"])
BUDGETS = st.one_of(st.integers(30, 400), st.integers(400, 900), st.integers(1500, 6000))
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "seed": {"preset": "seed"},
    "no summary": {"summarizer": "none"},
    "clamp only": {"strategies": (StrategySpec.parse("clamp_oversized_messages:max_part_tokens=50"),)},
}
SUFFIX = {"gemini-chat": ".json"}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def conversations(draw: Any) -> dict[str, Any]:
    conv: dict[str, Any] = {"system": draw(st.one_of(st.none(), text(1, 80), LONG)), "turns": []}
    number = 0
    for _ in range(draw(st.integers(1, 4))):
        steps = []
        for _ in range(draw(st.integers(0, 3))):
            step: dict[str, Any] = {"thinking": draw(st.one_of(st.none(), text(1, 40))),
                                    "text": draw(st.one_of(st.none(), text(1, 60), LONG)), "calls": []}
            for _ in range(draw(st.integers(0, 3))):  # parallel calls
                number += 1
                step["calls"].append({
                    "id": f"call_{number:03d}", "name": draw(TOOLS),
                    "args": draw(st.dictionaries(st.sampled_from(["path", "command", "old", "new"]), ARGUMENT, max_size=3)),
                    "result": draw(st.one_of(st.just(""), text(1, 50), LONG, LONG.map(lambda s: s * 3)))})
            if step["text"] is None and not step["calls"]:
                step["text"] = draw(text(1, 5))
            steps.append(step)
        conv["turns"].append({"user": draw(st.one_of(text(1, 40), LONG)), "steps": steps})
    return conv


def signature(thinking: str) -> str:
    return "sig" + hashlib.sha1(thinking.encode()).hexdigest()[:12]


def as_openai(conv: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": conv["system"]}] if conv["system"] else []
    for turn in conv["turns"]:
        out.append({"role": "user", "content": turn["user"]})
        for step in turn["steps"]:
            message: dict[str, Any] = {"role": "assistant", "content": step["text"]}
            if step["calls"]:
                message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["args"], ensure_ascii=False)}} for c in step["calls"]]
            out.append(message)
            out.extend({"role": "tool", "tool_call_id": c["id"], "content": c["result"]} for c in step["calls"])
    return out


def blocks(step: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if step["thinking"]:
        out.append({"type": "thinking", "thinking": step["thinking"], "signature": signature(step["thinking"])})
    if step["text"]:
        out.append({"type": "text", "text": step["text"]})
    out.extend({"type": "tool_use", "id": "toolu_" + c["id"], "name": c["name"], "input": c["args"]} for c in step["calls"])
    return out


def as_anthropic(conv: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"system": conv["system"]}] if conv["system"] else []
    for turn in conv["turns"]:
        out.append({"role": "user", "content": [{"type": "text", "text": turn["user"]}]})
        for step in turn["steps"]:
            out.append({"role": "assistant", "content": blocks(step)})
            if step["calls"]:
                out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_" + c["id"],
                                                         "content": c["result"]} for c in step["calls"]]})
    return out


def as_claude_code(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """As Claude Code writes a session: one line per block of a reply (one message.id), one per result."""
    rows: list[dict[str, Any]] = []
    parent: str | None = None

    def line(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal parent
        uuid = f"00000000-0000-4000-8000-{len(rows):012d}"
        rows.append({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/p",
                     "sessionId": "11111111-2222-4333-8444-555555555555", "version": "2.1.14", "type": kind,
                     "message": message, "uuid": uuid, "timestamp": f"2026-01-21T06:00:{len(rows) % 60:02d}.000Z", **extra})
        parent = uuid

    if conv["system"]:
        line("user", {"role": "user", "content": conv["system"]})
    for turn in conv["turns"]:
        line("user", {"role": "user", "content": turn["user"]})
        rows.append({"type": "file-history-snapshot", "messageId": parent, "snapshot": {}, "isSnapshotUpdate": False})
        for number, step in enumerate(turn["steps"]):
            reply = f"msg_{len(rows)}_{number}"
            for block in blocks(step):
                line("assistant", {"model": "claude-opus-4-5", "id": reply, "type": "message", "role": "assistant",
                                   "content": [block], "stop_reason": None,
                                   "usage": {"input_tokens": 10, "output_tokens": 5}})
            for c in step["calls"]:
                line("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_" + c["id"],
                                                           "content": c["result"]}]},
                     toolUseResult={"stdout": c["result"][:50], "stderr": ""})
    return rows


def as_gemini_stream(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """A headless Gemini CLI run: the reply in delta chunks, then its tool_use and tool_result events."""
    rows: list[dict[str, Any]] = [{"type": "init", "timestamp": "2025-10-29T10:36:02.074Z",
                                   "session_id": "7c1d2f3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f", "model": "gemini-2.5-pro"}]
    stamp = "2025-10-29T10:36:04.000Z"
    for index, turn in enumerate(conv["turns"]):
        prompt = conv["system"] + "\n\n" + turn["user"] if index == 0 and conv["system"] else turn["user"]
        rows.append({"type": "message", "timestamp": stamp, "role": "user", "content": prompt})
        for step in turn["steps"]:
            if step["text"]:
                words = step["text"].split(" ")
                size = max(1, len(words) // 3)
                for at in range(0, len(words), size):
                    chunk = " ".join(words[at:at + size]) + (" " if at + size < len(words) else "")
                    rows.append({"type": "message", "timestamp": stamp, "role": "assistant", "content": chunk,
                                 "delta": True})
            tool_ids = [f"{c['name']}-1761734225{c['id'][-3:]}-ef6c719c767c" for c in step["calls"]]
            rows.extend({"type": "tool_use", "timestamp": stamp, "tool_name": c["name"], "tool_id": tool_id,
                         "parameters": c["args"]} for c, tool_id in zip(step["calls"], tool_ids, strict=True))
            rows.extend({"type": "tool_result", "timestamp": stamp, "tool_id": tool_id, "status": "success",
                         "output": c["result"]} for c, tool_id in zip(step["calls"], tool_ids, strict=True))
    rows.append({"type": "result", "timestamp": stamp, "status": "success", "stats": {"total_tokens": 1}})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def written(path: Path, fmt: str | None, mode: str = "unlimited", config: MemoryConfig | None = None,
            target: str | None = None) -> tuple[Any, bytes]:
    result = compact_file(str(path), config or MemoryConfig(), mode=mode, use_cache=False, source_format=fmt,
                          target_format=target)
    return result, b"".join(result.chunks())


def convert(source: Path, fmt: str, target: str, folder: Path) -> Path:
    out = folder / f"in-{target}{SUFFIX.get(target, '.jsonl')}"
    out.write_bytes(written(source, fmt, target=target)[1])
    return out


def decoded(raw: bytes, fmt: str) -> Any:
    return formats.read("-", source_format=fmt, stdin=io.BytesIO(raw))


def problems(raw: bytes, fmt: str, provider: str) -> set[str]:
    return {p.code for v in validate_bytes(raw, fmt, provider) for p in v.problems}


def check(source: Path, fmt: str, variant: str, budget: int, folder: Path) -> None:
    note(f"{fmt} {variant} budget={budget}: {source}")
    config = MemoryConfig().with_overrides(max_tokens=budget, **VARIANTS[variant])
    result, raw = written(source, fmt, "budget", config)
    report = result.report
    out = folder / f"out{SUFFIX.get(fmt, '.jsonl')}"
    out.write_bytes(raw)

    # The file holds what the report says, within the budget unless the report says otherwise.
    counted = count_file(str(out), MemoryConfig(), use_cache=False, source_format=fmt).report["before"] if raw.strip() \
        else {"messages": 0, "tokens": 0}
    if fmt in ("codex", "responses") and counted["messages"] != report["after"]["messages"]:
        return  # known: a response whose reasoning was dropped reads back as part of the one before it
    assert counted["tokens"] == report["after"]["tokens"]
    if not report["over_budget"]:
        assert report["after"]["tokens"] <= budget
    elif variant != "clamp only":  # (a list that cannot remove anything may end over budget)
        assert report["budget"]["floor"]["tokens"] >= budget
    # The same input twice, the same bytes.
    assert written(source, fmt, "budget", config)[1] == raw
    # Calls and results in pairs.
    output = decoded(raw, fmt).messages if raw.strip() else []
    calls = {c for m in output for c in call_ids(m.data)}
    assert calls == {r for m in output for r in result_ids(m.data)}
    # Pins whole, or cut by the last resort; everything else missing or changed is in the ledger.
    before = formats.read(str(source), source_format=fmt).messages
    by_line = {m.line: m for m in before}
    one_per_line = len(by_line) == len(before)
    kept = {m.line: m for m in result.messages if m.line is not None}
    last_resort = {e["line"] for e in report["removed"] if e["strategy"] == "clamp_pinned"}
    requests = [m for m in before if m.data.get("role") == "user" and content_text(m.data).strip()]
    system = next((m for m in before if m.data.get("role") == "system"), None)
    for pinned in [*requests[-1:], *([system] if system and fmt not in ("gemini-chat", "gemini-stream",
                                                                       "gemini-session", "sharegpt") else [])]:
        assert pinned.line in kept
        assert not one_per_line or kept[pinned.line].data == pinned.data or pinned.line in last_resort
    ledger = {(e["line"], e["action"]) for e in report["removed"]}
    assert set(by_line) - set(kept) <= {line for line, action in ledger if action == "removed"}
    if one_per_line:
        changed = {line for line, m in kept.items() if line in by_line and m.data != by_line[line].data}
        assert changed <= {line for line, action in ledger if action == "rewritten"}
    # A fixed point: compacting the output again to the same budget changes nothing.
    again, raw_again = written(out, fmt, "budget", config)
    assert again.report["after"]["tokens"] <= report["after"]["tokens"]
    if not report["over_budget"]:
        assert raw_again == raw
    # What the providers accept.
    for target in ("openai", "anthropic") if raw.strip() else ():
        had = problems(written(source, fmt, target=target)[1], target, target)
        assert problems(written(out, fmt, target=target)[1], target, target) <= had


@SETTINGS
@given(conversations(), st.sampled_from(["openai", "anthropic", "claude-code", "codex", "responses", "pi",
                                         "gemini-chat", "gemini-stream", "gemini-session", "sharegpt"]),
       st.sampled_from(sorted(VARIANTS)), BUDGETS, st.booleans())
def test_every_format_writes_what_its_report_says(tmp_path_factory: Any, conv: dict[str, Any], fmt: str, variant: str,
                                                   budget: int, from_anthropic: bool) -> None:
    folder = tmp_path_factory.mktemp("formats")
    base_format = "anthropic" if from_anthropic else "openai"
    base = write_jsonl(folder / "base.jsonl", as_anthropic(conv) if from_anthropic else as_openai(conv))
    source = base if fmt == base_format else convert(base, base_format, fmt, folder)
    check(source, fmt, variant, budget, folder)


@SETTINGS
@given(conversations(), st.sampled_from(["claude-code", "gemini-stream"]), st.sampled_from(sorted(VARIANTS)), BUDGETS)
def test_native_multi_line_replies_write_what_their_report_says(tmp_path_factory: Any, conv: dict[str, Any], fmt: str,
                                                                 variant: str, budget: int) -> None:
    folder = tmp_path_factory.mktemp("native")
    rows = as_claude_code(conv) if fmt == "claude-code" else as_gemini_stream(conv)
    check(write_jsonl(folder / "native.jsonl", rows), fmt, variant, budget, folder)
