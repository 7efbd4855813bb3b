"""Compaction quality: how much of what the agent goes on to use survives compaction (issue 12).

On real agent sessions (../shared/realdata) and generated ones, cut the native file at the first
human request at or after 50%, 70% and 90% of the session, compact the prefix (the request
included) to 4k, 8k and 16k cl100k tokens with `compact` and with baselines, and measure:

- retention: the strings the agent writes after the cut (assistant text, tool-call argument
  values) that also occur in the prefix's text (paths, URLs, error lines, exception names, hex
  ids, long numbers, identifiers, quoted strings), and the share of them still in the compacted
  text, weighted by how many continuation messages use each, and unweighted;
- facts: five key-value facts planted in early user, assistant and tool messages of the prefix,
  one asked about in the cut message; a fact is kept when key and value are in one message;
- budget use, first system / newest user message kept, pairing breaks, wall time.

    python bench/quality.py                       # everything: a few minutes on 2 cores
    python bench/quality.py --quick               # a subset, under a minute
    python bench/quality.py --variant nocap="-s clear_tool_results -s sliding_window:keep_messages=100000"
    python bench/quality.py --json out.json --out table.md

`compact` runs in-process through this checkout's CLI entry (cli.app.main), never an installed
copy. Everything but wall time is deterministic. See bench/README.md for the columns.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # this checkout's cli/core, not an installed compact
sys.path.insert(0, str(HERE))

import orjson

from core import formats
from core.config import MemoryConfig
from core.messages import (
    Message,
    call_arguments,
    call_ids,
    call_name,
    content_text,
    countable_text,
    iter_text_parts,
    result_ids,
    string_values,
    tool_calls,
)

BUDGETS = (4000, 8000, 16000)
FRACTIONS = (0.5, 0.7, 0.9)
SEED_LIST = (
    "-s offload:turns=10 -s summarize:turns=10 -s deduplicate_file_reads:tool_name=read_file "
    "-s clear_tool_results:keep_pairs=3 -s clamp_oversized_messages:max_part_tokens=4096 "
    "-s sliding_window:keep_messages=40 -s drop_observations -s drop_turns"
)
CLEARED = "[tool result cleared]"

# A cut whose continuation reuses fewer needles than this (a 90% cut of a short session) is left
# out of the retention means: one or two needles make a 0% or 100% that is noise.
MIN_NEEDLES = 5

# -- needles: what the continuation uses -----------------------------------------------------

# Each pattern is one kind of string an agent reuses verbatim. Group 1, when present, is the needle.
NEEDLE_PATTERNS: dict[str, re.Pattern[str]] = {
    "url": re.compile(r"https?://[^\s\"'<>()\[\]`]+[^\s\"'<>()\[\]`.,;:]"),
    "path": re.compile(r"(?<![\w/.~-])((?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?)"),
    "error_line": re.compile(
        r"^[ \t>]*((?:[\w.]*(?:Error|Exception)|Traceback|FAILED|FAIL|fatal|error|ERROR|panic)"
        r"\b[:( ].{8,})$",
        re.MULTILINE,
    ),
    "exception": re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b"),
    # Booking references, flight numbers, ticket ids: upper-case letters and digits mixed.
    "code": re.compile(r"(?<![\w-])(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])([A-Z0-9]{5,})(?![\w-])"),
    "hex_id": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])([0-9a-f]{7,})\b"),
    "number": re.compile(r"(?<![\w.])(\d{4,})(?![\w])"),
    "dotted": re.compile(r"(?<![\w./])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/])"),
    "snake": re.compile(r"(?<![\w./])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w/])"),
    "camel": re.compile(r"(?<![\w./])([A-Z][a-z0-9]+[A-Z]\w*|[a-z][a-z0-9]*[A-Z]\w*)(?![\w/])"),
    # Single quotes only around a whole string: an apostrophe (don't) or two strings' ends never pair.
    "quoted": re.compile(
        r"\"([^\"\n]{5,100})\"|(?<![\w'])'([^'\n]{5,100})'(?![\w'])|`([^`\n]{5,100})`"
    ),
}
# Inside a path a name is part of the path needle, not a second needle.
MIN_IDENT = (
    5  # dotted, snake_case and CamelCase identifiers shorter than this are too common to tell
)


def extract_needles(text: str) -> dict[str, str]:
    """The needles in ``text``: {needle: kind} (the first kind that finds it)."""
    found: dict[str, str] = {}
    for kind, pattern in NEEDLE_PATTERNS.items():
        for match in pattern.finditer(text):
            needle = next((g for g in match.groups() if g), match.group(0)).strip()
            if kind in ("dotted", "snake", "camel") and len(needle) < MIN_IDENT:
                continue
            if kind == "path" and (needle.count("/") < 1 or len(needle) < 5 or "//" in needle):
                continue
            if kind == "quoted" and (
                needle != needle.strip() or not any(c.isalnum() for c in needle)
            ):
                continue
            if kind == "error_line":
                needle = needle[:200]
            found.setdefault(needle, kind)
    return found


def agent_texts(data: dict[str, Any]) -> list[str]:
    """What the agent itself wrote in a message: assistant text and tool-call argument values.

    Argument keys (``file_path``, ``command``) are the tool's schema, not the agent's words.
    """
    if data.get("role") != "assistant":
        return []
    texts = [t for t in iter_text_parts(data.get("content")) if t]
    for call in tool_calls(data):
        texts.extend(string_values(call_arguments(call)))
    return texts


def occurs(needle: str, text: str) -> bool:
    """``needle`` in ``text`` as a whole token: 'abc1234' does not occur in 'abc12345'."""
    start = text.find(needle)
    if start < 0:
        return False
    head = needle[0].isalnum() or needle[0] == "_"
    tail = needle[-1].isalnum() or needle[-1] == "_"
    if not head and not tail:
        return True
    pattern = re.compile(
        ("(?<![\\w])" if head else "") + re.escape(needle) + ("(?![\\w])" if tail else "")
    )
    return pattern.search(text, start) is not None


def needles_for(continuation: Sequence[Message], prefix_text: str) -> dict[str, tuple[str, int]]:
    """{needle: (kind, weight)}: what the continuation writes that the prefix's own text holds.

    The weight is how many continuation messages use the needle. Only needles in the prefix's
    text count, so nothing compact writes itself (markers, placeholders) can score.
    """
    uses: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for message in continuation:
        found: dict[str, str] = {}
        for text in agent_texts(message.data):
            for needle, kind in extract_needles(text).items():
                found.setdefault(needle, kind)
        for needle, kind in found.items():
            uses[needle] = uses.get(needle, 0) + 1
            kinds.setdefault(needle, kind)
    return {n: (kinds[n], w) for n, w in sorted(uses.items()) if occurs(n, prefix_text)}


def message_source(message: Message) -> list[tuple[str, str]]:
    """(source, text) pieces of a message, by where a model reads them."""
    data = message.data
    if message.role == "assistant":
        pieces = [("assistant text", content_text(data))]
        pieces += [
            ("tool-call arguments", call_name(c) + "\n" + orjson.dumps(call_arguments(c)).decode())
            for c in tool_calls(data)
        ]
        return pieces
    if message.role in ("tool", "function"):
        return [("tool result", content_text(data))]
    if message.role == "user":
        return [("user text", content_text(data))]
    return [("summary" if message.extra.get("summary") else "system", content_text(data))]


def needle_sources(
    needles: dict[str, tuple[str, int]], prefix: Sequence[Message]
) -> dict[str, tuple[str, int]]:
    """{needle: (source, messages before the end)}: the newest prefix message holding each needle."""
    found: dict[str, tuple[str, int]] = {}
    pending = set(needles)
    for age, message in enumerate(reversed(prefix)):
        if not pending:
            break
        for source, text in message_source(message):
            for needle in [n for n in pending if n in text]:
                if occurs(needle, text):
                    found[needle] = (source, age)
                    pending.discard(needle)
    for needle in pending:  # in the text only across pieces (rare): call it the message's own
        found[needle] = ("other", len(prefix))
    return found


def retention(
    needles: dict[str, tuple[str, int]], text: str
) -> tuple[float, float, dict[str, list[str]]]:
    """(weighted, unweighted retention, {kind: needles lost})."""
    if not needles:
        return math.nan, math.nan, {}
    kept_weight = total_weight = kept = 0
    lost: dict[str, list[str]] = {}
    for needle, (kind, weight) in needles.items():
        total_weight += weight
        if occurs(needle, text):
            kept += 1
            kept_weight += weight
        else:
            lost.setdefault(kind, []).append(needle)
    return kept_weight / total_weight, kept / len(needles), lost


def origin(message: Message) -> tuple[int, ...]:
    """The native line numbers a message came from (a chat message is its own line)."""
    return tuple(message.extra.get("origin") or ((message.line,) if message.line else ()))


# -- which user message is a human request ---------------------------------------------------

HARNESS = re.compile(
    r"^\s*(?:<(?:command-|local-command|system-reminder|environment_context|user_instructions|"
    r"user-prompt-submit-hook|bash-|task-notification)|\[Request interrupted|Caveat: The messages below|"
    r"# AGENTS\.md|Stop hook feedback|This session is being continued)"
)


def is_human_request(message: Message, native: dict[int, dict[str, Any] | None]) -> bool:
    """A user message a person wrote: not a tool result, hook or meta line, harness text, or empty."""
    if message.role != "user":
        return False
    text = content_text(message.data)
    if not text.strip() or HARNESS.match(text):
        return False
    for number in origin(message):
        line = native.get(number)
        if line and (line.get("isMeta") is True or line.get("isCompactSummary") is True):
            return False
    return True


# -- sessions and cuts --------------------------------------------------------------------------


@dataclass
class Session:
    name: str
    kind: str  # claude-code, codex, openai (tau-bench, swe-agent), generated
    path: Path


@dataclass
class Cut:
    session: Session
    fraction: float
    index: int  # of the cut message in the session's decoded messages
    prefix_lines: list[bytes]  # the native lines up to and including the cut message's last line
    continuation: list[Message]
    prefix: list[Message] = field(default_factory=list)
    label: str = ""
    # "request": at a human request; "auto": where an agent compacts on its own, mid-task
    kind: str = "request"


def physical_lines(raw: bytes) -> list[bytes]:
    return raw.split(b"\n")


def find_cuts(session: Session, fractions: Sequence[float]) -> tuple[list[Cut], list[str]]:
    """The cuts of a session, and why a fraction found none."""
    decoded = formats.read(str(session.path))
    native = {line.number: line.data for line in decoded.lines}
    messages = decoded.messages
    raw = physical_lines(session.path.read_bytes())
    cuts: list[Cut] = []
    notes: list[str] = []
    taken: set[int] = set()
    for fraction in fractions:
        start = math.ceil(fraction * len(messages))
        kind = "request"
        index = next(
            (i for i in range(start, len(messages)) if is_human_request(messages[i], native)), None
        )
        if index is None:
            kind, index = "auto", auto_compaction_point(messages, start)
        if index is None:
            notes.append(f"{session.name} @{fraction:.0%}: no human request or tool result at or after it")
            continue
        if index in taken:
            notes.append(f"{session.name} @{fraction:.0%}: same cut as an earlier fraction")
            continue
        taken.add(index)
        last_line = max(n for m in messages[: index + 1] for n in origin(m))
        cuts.append(
            Cut(
                session,
                fraction,
                index,
                raw[:last_line],
                messages[index + 1 :],
                label=f"{session.name}@{fraction:.0%}",
                kind=kind,
            )
        )
    return cuts, notes


def auto_compaction_point(messages: Sequence[Message], start: int) -> int | None:
    """Where an agent driven by one prompt compacts on its own: the first tool result at or after
    ``start`` that answers the last open call, with the assistant going on after it (Claude Code
    and Codex compact there when the window fills, mid-task)."""
    open_calls: set[str] = set()
    for i, message in enumerate(messages[:-1]):
        if message.role == "user":
            open_calls.clear()  # a call the person interrupted gets no result: it is not waiting
        open_calls.update(call_ids(message.data))
        open_calls.difference_update(result_ids(message.data))
        if (
            i >= start
            and message.role == "tool"
            and not open_calls
            and messages[i + 1].role == "assistant"
        ):
            return i
    return None


# -- planted facts ----------------------------------------------------------------------------

# (key, value, sentence): the key is asked about, the value must survive beside it.
FACTS = (
    ("deploy token for staging", "KX-4471-QP", "The deploy token for staging is KX-4471-QP."),
    (
        "on-call pager for the billing service",
        "PGR-88213",
        "Note: the on-call pager for the billing service is PGR-88213.",
    ),
    (
        "feature flag for the new cache",
        "ff_cache_v2_rollout_b",
        "The feature flag for the new cache is called ff_cache_v2_rollout_b.",
    ),
    (
        "database replica we must not touch",
        "db-replica-euw3-c7",
        "Careful: the database replica we must not touch is db-replica-euw3-c7.",
    ),
    (
        "release branch for this work",
        "release/2024.11-hotfix-q",
        "The release branch for this work is release/2024.11-hotfix-q.",
    ),
)
# Which role each fact is planted in (falls back to another role when the prefix has none).
FACT_ROLES = ("tool", "assistant", "user", "tool", "assistant")
EARLY = 0.4  # facts go in the first 40% of the prefix's messages


def _insert(text: str, sentence: str) -> str:
    """``text`` with ``sentence`` on its own line a third of the way in (not at an end a clamp keeps)."""
    at = text.find("\n", len(text) // 3)
    if at < 0:
        return text + "\n" + sentence
    return text[:at] + "\n" + sentence + text[at:]


def _at_end(text: str, sentence: str) -> str:
    return text + "\n\n" + sentence


def _plant_in(
    value: Any, snippet: str, sentence: str, insert: Callable[[str, str], str] = _insert
) -> bool:
    """Insert ``sentence`` into the first string value holding ``snippet`` (a message's own text first)."""
    if isinstance(value, dict):
        keys = sorted(
            value, key=lambda k: (k not in ("message", "payload", "content", "text", "output"), 0)
        )
        for key in keys:
            item = value[key]
            if isinstance(item, str) and snippet in item:
                value[key] = insert(item, sentence)
                return True
            if isinstance(item, (dict, list)) and _plant_in(item, snippet, sentence, insert):
                return True
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str) and snippet in item:
                value[i] = insert(item, sentence)
                return True
            if isinstance(item, (dict, list)) and _plant_in(item, snippet, sentence, insert):
                return True
    return False


def plant(cut: Cut, asked: int | None) -> tuple[list[bytes], list[int]]:
    """The prefix's native lines with the facts planted and the question in the cut message
    (none when ``asked`` is None: an auto-compaction cut ends with a tool result, no one asks).

    Returns the lines and the message index of each planted fact (-1 when none could take it).
    Each plant is checked by decoding the result, so a format that hides the text is caught.
    """
    lines = list(cut.prefix_lines)
    prefix = cut.prefix
    early = max(2, int(len(prefix) * EARLY))

    def candidates(role: str) -> list[int]:
        found = []
        for i, message in enumerate(prefix[:early]):
            if message.role != role or i == len(prefix) - 1:
                continue
            text = next(
                (t for t in iter_text_parts(message.data.get("content")) if len(t.strip()) >= 20),
                "",
            )
            if text:
                found.append(i)
        return found

    by_role = {role: candidates(role) for role in ("tool", "assistant", "user")}
    used: set[int] = set()
    where: list[int] = []
    wanted = {role: FACT_ROLES.count(role) for role in by_role}
    seen = {role: 0 for role in by_role}
    for fact, role in enumerate(FACT_ROLES):
        order = [role] + [r for r in ("tool", "assistant", "user") if r != role]
        placed = -1
        for candidate_role in order:
            pool = [i for i in by_role[candidate_role] if i not in used]
            if not pool:
                continue
            # Spread a role's facts evenly over its early messages.
            step = (
                (seen[candidate_role] + 1) / (wanted[candidate_role] + 1)
                if candidate_role == role
                else 0.5
            )
            for i in sorted(pool, key=lambda i: abs(i - pool[0] - step * (pool[-1] - pool[0]))):
                if _plant_message(lines, prefix[i], FACTS[fact][2]):
                    placed = i
                    break
            if placed >= 0:
                break
        if placed >= 0:
            used.add(placed)
            if placed in by_role[role]:
                seen[role] += 1
        where.append(placed)
    if asked is not None:
        _plant_message(
            lines,
            prefix[-1],
            f"Also, before you go on: what is the {FACTS[asked][0]}? I need it afterwards.",
            at_end=True,
        )
    return lines, where


def _plant_message(
    lines: list[bytes], message: Message, sentence: str, at_end: bool = False
) -> bool:
    text = next((t for t in iter_text_parts(message.data.get("content")) if t.strip()), "")
    snippet = text[:60] if len(text) >= 20 else text
    if not snippet:
        return False
    for number in origin(message):
        try:
            data = orjson.loads(lines[number - 1])
        except orjson.JSONDecodeError:
            continue
        if _plant_in(data, snippet, sentence, _at_end if at_end else _insert):
            lines[number - 1] = orjson.dumps(data)
            return True
    return False


# -- counting ---------------------------------------------------------------------------------

_COUNTER = None


def counter() -> Any:
    """The project's counter with its default settings (cl100k_base, no framing): compact's own count."""
    global _COUNTER
    if _COUNTER is None:
        from core.api import open_counter

        _COUNTER, _ = open_counter(MemoryConfig(), use_cache=False)
    return _COUNTER


def count(messages: Sequence[Message]) -> list[int]:
    return [m.tokens for m in counter().count_messages(list(messages))]


# -- baselines --------------------------------------------------------------------------------


def units(messages: Sequence[Message]) -> list[list[int]]:
    """Indexes grouped so a tool call and its results stay together."""
    groups: list[list[int]] = []
    open_calls: dict[str, list[int]] = {}
    for i, message in enumerate(messages):
        answered = [open_calls[r] for r in result_ids(message.data) if r in open_calls]
        if answered:
            answered[0].append(i)
            continue
        group = [i]
        groups.append(group)
        for call in call_ids(message.data):
            open_calls[call] = group
    return groups


def newest_that_fit(messages: Sequence[Message], budget: int) -> list[Message]:
    """The first system message and the newest whole call/result groups that fit the budget."""
    tokens = count(messages)
    system = next((i for i, m in enumerate(messages) if m.role in ("system", "developer")), None)
    used = tokens[system] if system is not None else 0
    keep: set[int] = {system} if system is not None else set()
    for group in reversed(units(messages)):
        group = [i for i in group if i != system]
        cost = sum(tokens[i] for i in group)
        if used + cost > budget:
            break
        used += cost
        keep.update(group)
    return [m for i, m in enumerate(messages) if i in keep]


def clear_then_newest(
    messages: Sequence[Message], budget: int, keep_results: int = 3
) -> list[Message]:
    """Every tool result but the newest ``keep_results`` cleared, then newest-that-fit."""
    results = [i for i, m in enumerate(messages) if m.role in ("tool", "function")]
    clear = set(results[:-keep_results] if keep_results else results)
    cleared = [
        m.rewritten({**m.data, "content": CLEARED}) if i in clear else m
        for i, m in enumerate(messages)
    ]
    return newest_that_fit(cleared, budget)


def langchain_trim(messages: Sequence[Message], budget: int) -> list[Message]:
    """LangChain's trim_messages(strategy="last", include_system=True, start_on="human"), our counter."""
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        trim_messages,
    )

    tokens = count(messages)
    converted = []
    for i, message in enumerate(messages):
        text = content_text(message.data)
        if message.role in ("system", "developer"):
            converted.append(SystemMessage(content=text, id=str(i)))
        elif message.role == "user":
            converted.append(HumanMessage(content=text, id=str(i)))
        elif message.role == "assistant":
            calls = [
                {
                    "name": call_name(c) or "tool",
                    "args": call_arguments(c),
                    "id": str(c.get("id")),
                    "type": "tool_call",
                }
                for c in tool_calls(message.data)
            ]
            converted.append(AIMessage(content=text, tool_calls=calls, id=str(i)))
        else:
            ids = result_ids(message.data) or [str(message.extra.get("native_id", "external"))]
            converted.append(ToolMessage(content=text, tool_call_id=ids[0], id=str(i)))

    def token_counter(batch: Sequence[Any]) -> int:
        return sum(tokens[int(m.id)] for m in batch)

    kept = trim_messages(
        converted,
        max_tokens=budget,
        strategy="last",
        include_system=True,
        start_on="human",
        token_counter=token_counter,
    )
    return [messages[int(m.id)] for m in kept]


BASELINES: dict[str, Callable[[Sequence[Message], int], list[Message]]] = {
    "newest-that-fit": newest_that_fit,
    "clear-3-then-newest": clear_then_newest,
    "langchain-trim": langchain_trim,
}

CEILING = "ceiling"


def ceiling(
    messages: Sequence[Message], budget: int, needles: dict[str, tuple[str, int]]
) -> list[Message]:
    """What a compactor that knew the continuation could keep of whole messages (not a baseline:
    headroom). The first system message and the newest message stay; then, greedily, the call/result
    group that adds the most needle weight per token while it fits."""
    tokens = count(messages)
    groups = units(messages)
    system = next((i for i, m in enumerate(messages) if m.role in ("system", "developer")), None)
    forced = {len(messages) - 1} | ({system} if system is not None else set())
    texts = message_texts(messages)
    holds = []
    for group in groups:
        text = "\n".join(texts[i] for i in group)
        holds.append({n for n in needles if n in text and occurs(n, text)})
    chosen = {g for g, group in enumerate(groups) if forced & set(group)}
    used = sum(tokens[i] for g in chosen for i in groups[g])
    have: set[str] = set().union(*(holds[g] for g in chosen))
    while True:
        best, best_value = None, 0.0
        for g, group in enumerate(groups):
            cost = sum(tokens[i] for i in group)
            if g in chosen or used + cost > budget:
                continue
            gain = sum(needles[n][1] for n in holds[g] - have)
            if gain and gain / max(cost, 1) > best_value:
                best, best_value = g, gain / max(cost, 1)
        if best is None:
            break
        chosen.add(best)
        used += sum(tokens[i] for i in groups[best])
        have |= holds[best]
    keep = {i for g in chosen for i in groups[g]}
    return [m for i, m in enumerate(messages) if i in keep]


# -- compact ----------------------------------------------------------------------------------


def run_compact(path: Path, budget: int, extra: Sequence[str], out: Path) -> list[Message]:
    """`compact PATH --max-tokens N [extra]` through this checkout's CLI entry; the output's messages."""
    from cli.app import main

    argv = ["run", str(path), "--max-tokens", str(budget), "-o", str(out), "-q", *extra]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            main(argv)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise RuntimeError(
                f"compact {' '.join(argv)} exited {exit_.code}: {stderr.getvalue()[-500:]}"
            ) from None
    return formats.read(str(out)).messages


def has_option(option: str) -> bool:
    from cli.app import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        main(["run", "--help"])
    return option in buffer.getvalue()


# -- one cut, every method --------------------------------------------------------------------


def message_texts(messages: Sequence[Message]) -> list[str]:
    return [countable_text(m.data) for m in messages]


def orphans(messages: Sequence[Message]) -> set[str]:
    calls = {c for m in messages for c in call_ids(m.data)}
    results = {r for m in messages for r in result_ids(m.data)}
    return {f"call:{c}" for c in calls - results} | {f"result:{r}" for r in results - calls}


def score(
    output: Sequence[Message],
    cut: Cut,
    planted: list[Message],
    needles: dict[str, tuple[str, int]],
    sources: dict[str, tuple[str, int]],
    where: list[int],
    asked: int | None,
    budget: int,
    seconds: float,
) -> dict[str, Any]:
    texts = message_texts(output)
    whole = "\n".join(texts)
    weighted, unweighted, lost = retention(needles, whole)
    lost_from: dict[str, int] = {}
    for items in lost.values():
        for needle in items:
            source, age = sources[needle]
            key = f"{source}, {'newest 20' if age < 20 else '20-100 back' if age < 100 else '100+ back'}"
            lost_from[key] = lost_from.get(key, 0) + 1
    facts = [
        any(FACTS[f][0].lower() in t.lower() and FACTS[f][1] in t for t in texts)
        if where[f] >= 0
        else None
        for f in range(len(FACTS))
    ]
    system = next(
        (m for m in planted if m.role in ("system", "developer") and not m.extra.get("summary")),
        None,
    )
    system_kept = None if system is None else countable_text(system.data) in texts
    newest = content_text(planted[-1].data)
    task = next((m for m in planted[:-1] if m.role == "user" and m.extra.get("human")), None)
    task_kept = (
        None
        if task is None
        else any(
            content_text(task.data) in content_text(m.data) for m in output if m.role == "user"
        )
    )
    tokens = sum(count(output))
    return {
        "weighted": weighted,
        "unweighted": unweighted,
        "needles": len(needles),
        "tokens": tokens,
        "budget_use": tokens / budget,
        "messages": len(output),
        "facts": [f for f in facts if f is not None],
        "asked_fact": None if asked is None else facts[asked],
        "system_kept": system_kept,
        "task_kept": task_kept,
        # An auto-compaction cut ends with a tool result: there is no newest request to keep.
        "newest_user_kept": None
        if cut.kind == "auto"
        else any(m.role == "user" and newest in content_text(m.data) for m in output),
        "pairing_breaks": len(orphans(output) - orphans(planted)),
        "seconds": seconds,
        "lost": {kind: sorted(items)[:40] for kind, items in lost.items()},
        "lost_from": lost_from,
    }


@dataclass
class Method:
    name: str
    run: Callable[[Path, list[Message], int, Path], list[Message]]


def compact_method(name: str, extra: Sequence[str]) -> Method:
    return Method(name, lambda path, _messages, budget, out: run_compact(path, budget, extra, out))


def baseline_method(name: str) -> Method:
    function = BASELINES[name]
    return Method(name, lambda _path, messages, budget, _out: function(messages, budget))


def evaluate(
    cut: Cut,
    cut_number: int,
    methods: Sequence[Method],
    budgets: Sequence[int],
    work: Path,
    keep_outputs: Path | None,
    with_ceiling: bool = False,
) -> tuple[list[dict[str, Any]], int]:
    """One row per method and budget over the budget this prefix exceeds; and how many budgets were skipped."""
    suffix = ".json" if cut.session.path.suffix == ".json" else ".jsonl"
    original = work / f"cut{cut_number}{suffix}"
    original.write_bytes(b"\n".join(cut.prefix_lines) + b"\n")
    cut.prefix = formats.read(str(original)).messages
    prefix_tokens = sum(count(cut.prefix))
    needles = needles_for(cut.continuation, "\n".join(message_texts(cut.prefix)))
    sources = needle_sources(needles, cut.prefix)
    asked = None if cut.kind == "auto" else cut_number % len(FACTS)
    lines, where = plant(cut, asked)
    planted_path = work / f"cut{cut_number}-planted{suffix}"
    planted_path.write_bytes(b"\n".join(lines) + b"\n")
    decoded = formats.read(str(planted_path))
    planted = decoded.messages
    native = {line.number: line.data for line in decoded.lines}
    for message in planted:  # the task statement is the first human request
        message.extra["human"] = is_human_request(message, native)
    if keep_outputs is not None:  # the compacted input too, to rerun compact on it by hand
        (keep_outputs / f"{_stem(cut.label)}-input{suffix}").write_bytes(planted_path.read_bytes())
    rows: list[dict[str, Any]] = []
    skipped = 0
    for budget in budgets:
        if prefix_tokens <= budget:
            skipped += 1
            continue
        runs = [(m.name, m.run) for m in methods]
        if with_ceiling:
            runs.append((CEILING, lambda _path, messages, budget, _out: ceiling(messages, budget, needles)))
        for name, run in runs:
            out = work / f"out{cut_number}-{budget}-{name}{suffix}"
            started = time.perf_counter()
            output = run(planted_path, planted, budget, out)
            seconds = time.perf_counter() - started
            row = score(output, cut, planted, needles, sources, where, asked, budget, seconds)
            row.update(
                session=cut.session.name,
                kind=cut.session.kind,
                cut=cut.label,
                cut_kind=cut.kind,
                budget=budget,
                method=name,
                prefix_tokens=prefix_tokens,
                prefix_messages=len(planted),
                facts_planted=sum(1 for w in where if w >= 0),
            )
            rows.append(row)
            if keep_outputs is not None:
                target = keep_outputs / f"{_stem(cut.label)}-{budget}-{name}.txt"
                target.write_text(_readable(output))
    return rows, skipped


def _stem(label: str) -> str:
    return label.replace("@", "_at_").replace("%", "")


def _readable(messages: Sequence[Message]) -> str:
    """A compacted output as a person reads it: role, then the text a model sees."""
    return "\n\n".join(f"=== {m.role} ===\n{countable_text(m.data)}" for m in messages)


# -- sessions ---------------------------------------------------------------------------------


# Recorded sessions that ship with the repository (see its README), measured beside ../shared/realdata.
BUNDLED = HERE / "sessions"


def bundled_sessions() -> list[Session]:
    return [Session(path.stem, "claude-code", path) for path in sorted((BUNDLED / "claude-code").glob("*.jsonl"))]


def real_sessions(root: Path, work: Path, tau_count: int, smallest_budget: int) -> list[Session]:
    sessions: list[Session] = []
    for path in sorted((root / "claude-code").glob("*.jsonl")):
        sessions.append(Session(path.stem, "claude-code", path))
    for path in sorted((root / "codex-cli").glob("*.jsonl")):
        sessions.append(Session(path.stem, "codex", path))
    swe = root / "openai-chat" / "swe-agent-marshmallow-1867.jsonl"
    if swe.exists():
        sessions.append(Session(swe.stem, "swe-agent", swe))
    tau = root / "openai-chat" / "tau-bench-airline-trajectories.jsonl"
    if tau.exists() and tau_count:
        sessions.extend(tau_sessions(tau, work, tau_count, smallest_budget))
    return sessions


def tau_sessions(path: Path, work: Path, how_many: int, smallest_budget: int) -> list[Session]:
    """The longest tau-bench conversations (by tokens) with a cut over the smallest budget, as chat JSONL files.

    Most of the 200 conversations are 5-10k tokens, and some have no human request after their
    middle (a long run of tool calls ends them): those give nothing to compact.
    """
    conversations = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        record = orjson.loads(line)
        messages = [Message(m) for m in record["messages"]]
        tokens = count(messages)
        users = [
            i for i, m in enumerate(messages) if m.role == "user" and content_text(m.data).strip()
        ]
        first_cut = next((i for i in users if i >= math.ceil(FRACTIONS[0] * len(messages))), None)
        if first_cut is None or sum(tokens[: first_cut + 1]) <= smallest_budget:
            continue
        conversations.append((sum(tokens), record["task_id"], record["trial"], record["messages"]))
    conversations.sort(key=lambda c: (-c[0], c[1], c[2]))
    sessions = []
    for _tokens, task, trial, messages in conversations[:how_many]:
        target = work / f"tau-bench-airline-task{task}-trial{trial}.jsonl"
        target.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))
        sessions.append(Session(target.stem, "tau-bench", target))
    return sessions


def generated_sessions(work: Path, seeds: Sequence[int], size: int, scale: float) -> list[Session]:
    from generate import generate

    sessions = []
    for seed in seeds:
        target = work / f"generated-seed{seed}.jsonl"
        target.write_bytes(b"".join(generate(size, seed=seed, size_scale=scale)))
        sessions.append(Session(target.stem, "generated", target))
    return sessions


# -- report -----------------------------------------------------------------------------------


def aggregate(
    rows: list[dict[str, Any]], methods: Sequence[str], budgets: Sequence[int]
) -> list[dict[str, Any]]:
    table = []
    for budget in budgets:
        for method in methods:
            mine = [r for r in rows if r["budget"] == budget and r["method"] == method]
            if not mine:
                continue
            with_needles = [r for r in mine if r["needles"] >= MIN_NEEDLES]
            facts = [f for r in mine for f in r["facts"]]
            systems = [r["system_kept"] for r in mine if r["system_kept"] is not None]
            table.append(
                {
                    "budget": budget,
                    "method": method,
                    "cuts": len(mine),
                    "weighted": _mean([r["weighted"] for r in with_needles]),
                    "unweighted": _mean([r["unweighted"] for r in with_needles]),
                    "budget_use": _mean([r["budget_use"] for r in mine]),
                    "min_budget_use": min(r["budget_use"] for r in mine),
                    "over_budget": sum(1 for r in mine if r["tokens"] > budget),
                    "facts": _mean([float(f) for f in facts]),
                    "asked_fact": _mean(
                        [float(r["asked_fact"]) for r in mine if r["asked_fact"] is not None]
                    ),
                    "system_kept": _mean([float(s) for s in systems]) if systems else None,
                    "task_kept": _mean(
                        [float(r["task_kept"]) for r in mine if r["task_kept"] is not None]
                    ),
                    "newest_user_kept": _mean(
                        [
                            float(r["newest_user_kept"])
                            for r in mine
                            if r["newest_user_kept"] is not None
                        ]
                    ),
                    "pairing_breaks": sum(r["pairing_breaks"] for r in mine),
                    "seconds": sum(r["seconds"] for r in mine),
                }
            )
    return table


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _pct(value: float | None) -> str:
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.0%}"
    )


def markdown(
    table: list[dict[str, Any]], compact_names: Sequence[str], baselines: Sequence[str]
) -> str:
    header = (
        "| budget | method | cuts | weighted retention | unweighted | budget use (min) | over budget | "
        "facts kept | asked fact | first system kept | newest user kept | task kept | pairing breaks | wall s |"
    )
    lines = [header, "|" + "---|" * 14]
    for row in table:
        lines.append(
            f"| {row['budget']} | {row['method']} | {row['cuts']} | {_pct(row['weighted'])} | {_pct(row['unweighted'])} "
            f"| {row['budget_use']:.2f} ({row['min_budget_use']:.2f}) | {row['over_budget']} | {_pct(row['facts'])} "
            f"| {_pct(row['asked_fact'])} | {_pct(row['system_kept'])} | {_pct(row['newest_user_kept'])} "
            f"| {_pct(row['task_kept'])} "
            f"| {row['pairing_breaks']} | {row['seconds']:.1f} |"
        )
    lines.append("")
    lines.append(
        "Targets (issue 12), per budget: weighted retention ≥ 1.25× the best baseline, budget use ≥ 0.95, "
        "facts kept ≥ 60%, first system and newest user kept 100%, no pairing break."
    )
    lines.append("")
    lines.append(
        "| budget | method | ×best baseline | retention | budget use | facts | pins | pairing |"
    )
    lines.append("|---|---|---|---|---|---|---|---|")
    for budget in sorted({r["budget"] for r in table}):
        here = {r["method"]: r for r in table if r["budget"] == budget}
        best = max(
            (
                here[b]["weighted"]
                for b in baselines
                if b in here and not math.isnan(here[b]["weighted"])
            ),
            default=math.nan,
        )
        for name in compact_names:
            row = here.get(name)
            if row is None:
                continue
            ratio = row["weighted"] / best if best and not math.isnan(best) else math.nan
            newest = row["newest_user_kept"]  # nan when every cut was an auto-compaction
            pins = row["system_kept"] in (None, 1.0) and (math.isnan(newest) or newest == 1.0)
            lines.append(
                f"| {budget} | {name} | {ratio:.2f} | {_ok(ratio >= 1.25)} | {_ok(row['budget_use'] >= 0.95)} "
                f"| {_ok(row['facts'] >= 0.6)} | {_ok(pins)} | {_ok(row['pairing_breaks'] == 0)} |"
            )
    return "\n".join(lines) + "\n"


def _ok(flag: bool) -> str:
    return "PASS" if flag else "FAIL"


def by_kind(
    rows: list[dict[str, Any]], methods: Sequence[str], budgets: Sequence[int], key: str = "kind"
) -> str:
    """Weighted retention per kind of session, or of cut (cuts in brackets): where a method wins or loses."""
    kinds = sorted({r[key] for r in rows})
    lines = ["| budget | method | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for budget in budgets:
        for method in methods:
            cells = []
            for kind in kinds:
                mine = [
                    r["weighted"]
                    for r in rows
                    if r["budget"] == budget
                    and r["method"] == method
                    and r[key] == kind
                    and r["needles"] >= MIN_NEEDLES
                ]
                cells.append(f"{_pct(_mean(mine))} ({len(mine)})" if mine else "-")
            if any(c != "-" for c in cells):
                lines.append(f"| {budget} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def lost_summary(rows: list[dict[str, Any]], method: str) -> str:
    """Which kinds of needles ``method`` loses most, with a few examples each."""
    by_kind: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for row in rows:
        if row["method"] != method:
            continue
        for kind, items in row["lost"].items():
            by_kind[kind] = by_kind.get(kind, 0) + len(items)
            for item in items:
                if len(examples.setdefault(kind, [])) < 4 and item not in examples[kind]:
                    examples[kind].append(item)
    parts = [
        f"- {kind}: {n} lost, e.g. {', '.join(repr(e[:60]) for e in examples[kind])}"
        for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1])
    ]
    origins: dict[str, int] = {}
    for row in rows:
        if row["method"] == method:
            for key, n in row["lost_from"].items():
                origins[key] = origins.get(key, 0) + n
    total = sum(origins.values()) or 1
    parts.append(
        "- where the lost needles were (newest prefix message holding each): "
        + "; ".join(
            f"{key} {n / total:.0%}" for key, n in sorted(origins.items(), key=lambda kv: -kv[1])
        )
    )
    return "\n".join(parts)


# -- main -------------------------------------------------------------------------------------


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, sep, args = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f'--variant wants NAME="compact options", got {text!r}')
    return name, shlex.split(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--realdata",
        type=Path,
        default=REPO.parent / "shared" / "realdata",
        help="the public sessions (default: ../shared/realdata beside the checkout)",
    )
    parser.add_argument(
        "--budgets", default=",".join(map(str, BUDGETS)), help="token budgets, comma-separated"
    )
    parser.add_argument(
        "--tau", type=int, default=6, help="how many of the longest tau-bench conversations"
    )
    parser.add_argument("--seeds", default="0,1,2", help="generated sessions: generator seeds")
    parser.add_argument(
        "--generated-messages", type=int, default=400, help="messages per generated session"
    )
    parser.add_argument(
        "--generated-scale",
        type=float,
        default=0.4,
        help="generator size scale (0.4: about 0.5k tokens per message, like the real sessions)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        type=parse_variant,
        default=[],
        metavar='NAME="OPTIONS"',
        help='another compact configuration, e.g. nocap="-s clear_tool_results -s sliding_window"',
    )
    parser.add_argument("--no-seed", action="store_true", help="leave out the seed-preset column")
    parser.add_argument(
        "--no-bundled", action="store_true", help="leave out the sessions in bench/sessions"
    )
    parser.add_argument("--no-baselines", action="store_true", help="leave out the baselines")
    parser.add_argument(
        "--quick", action="store_true", help="a subset: Claude Code + 2 tau-bench + 1 generated"
    )
    parser.add_argument("--json", type=Path, help="write every row and the aggregate table as JSON")
    parser.add_argument("--out", type=Path, help="also write the markdown table to this file")
    parser.add_argument(
        "--keep-outputs", type=Path, help="write each compacted output as readable text here"
    )
    parser.add_argument("--only", help="only sessions whose name contains this")
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also score what a compactor that knew the continuation could keep of whole "
        "messages (headroom, not a baseline)",
    )
    args = parser.parse_args(argv)

    budgets = [int(b) for b in args.budgets.split(",")]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.quick:
        args.tau, seeds = min(args.tau, 2), seeds[:1]

    methods: list[Method] = [compact_method("compact", [])]
    if not args.no_seed:
        seed_args = ["--preset", "seed"] if has_option("--preset") else shlex.split(SEED_LIST)
        methods.append(compact_method("compact-seed", seed_args))
    for name, extra in args.variant:
        methods.append(compact_method(name, extra))
    compact_names = [m.name for m in methods]
    baselines: list[str] = []
    if not args.no_baselines:
        baselines = ["newest-that-fit", "clear-3-then-newest"]
        try:
            import langchain_core  # noqa: F401

            baselines.append("langchain-trim")
        except ImportError:
            print(
                "langchain-core is not installed: the langchain-trim column is skipped "
                "(pip install -r bench/requirements.txt)",
                file=sys.stderr,
            )
        methods.extend(baseline_method(b) for b in baselines)
    if args.keep_outputs:
        args.keep_outputs.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="compact-quality-") as folder:
        work = Path(folder)
        os.environ["COMPACT_CACHE_DIR"] = str(work / "cache")  # no result memo from an earlier run
        sessions: list[Session] = []
        if args.realdata.is_dir():
            sessions += real_sessions(args.realdata, work, args.tau, min(budgets))
        else:
            print(
                f"no real sessions at {args.realdata}: generated sessions only (--realdata DIR)",
                file=sys.stderr,
            )
        if not args.no_bundled:
            sessions += bundled_sessions()
        sessions += generated_sessions(work, seeds, args.generated_messages, args.generated_scale)
        if args.only:
            sessions = [s for s in sessions if args.only in s.name]
        rows: list[dict[str, Any]] = []
        notes: list[str] = []
        skipped = 0
        cut_number = 0
        started = time.perf_counter()
        for session in sessions:
            cuts, why = find_cuts(session, FRACTIONS)
            notes += why
            for cut in cuts:
                got, skipped_here = evaluate(
                    cut, cut_number, methods, budgets, work, args.keep_outputs, args.ceiling
                )
                cut_number += 1
                rows += got
                skipped += skipped_here
                if skipped_here:
                    notes.append(
                        f"{cut.label}: prefix under {skipped_here} budget(s), skipped there"
                    )
            print(f"  {session.name}: {len(cuts)} cut(s)", file=sys.stderr)
        elapsed = time.perf_counter() - started

    names = [m.name for m in methods] + ([CEILING] if args.ceiling else [])
    table = aggregate(rows, names, budgets)
    report = markdown(table, compact_names, baselines)
    cuts_used = sorted({r["cut"] for r in rows})
    auto_cuts = len({r["cut"] for r in rows if r["cut_kind"] == "auto"})
    report += (
        f"\n{len(cuts_used)} cuts of {len({r['session'] for r in rows})} sessions "
        f"({len(cuts_used) - auto_cuts} at a human request, {auto_cuts} where the agent compacts on its own); "
        f"{skipped} (cut, budget) pairs skipped because the prefix was already under the budget; "
        f"{elapsed:.0f} s in all.\n"
    )
    report += f"\nWeighted retention by kind of session (cuts with {MIN_NEEDLES}+ needles in brackets):\n\n"
    report += by_kind(rows, names, budgets)
    report += "\nWeighted retention by kind of cut:\n\n"
    report += by_kind(rows, names, budgets, key="cut_kind")
    for name in compact_names:
        report += (
            f"\nWhat `{name}` lost most (needles of the continuation missing from its output):\n"
        )
        report += lost_summary(rows, name) + "\n"
    print(report)
    if notes:
        print("Notes:\n" + "\n".join(f"- {n}" for n in notes), file=sys.stderr)
    if args.out:
        args.out.write_text(report)
    if args.json:
        args.json.write_bytes(
            orjson.dumps(
                {
                    "budgets": budgets,
                    "methods": names,
                    "table": table,
                    "rows": rows,
                    "notes": notes,
                    "skipped": skipped,
                },
                option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
