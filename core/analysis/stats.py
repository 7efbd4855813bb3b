"""Where a transcript's tokens go (``compact stats``): by role, by tool, by file read, the largest
messages, and the files read more than once.

Messages are counted exactly as ``compact count`` counts them (the same
MessageCounter), so the totals agree; the rendered graph message is left out
of every figure, as the report leaves it out, and shown on its own.
A tool call's own tokens are its name and arguments counted together; a
tool result's tokens are its message's tokens and count for the tool of the
call it answers (paired by position, as core.engine.structure pairs them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from core.config import MemoryConfig
from core.counting.counter import MessageCounter
from core.counting.tokenizers import EncoderChoice
from core.engine.file_calls import argument_path, classify
from core.engine.structure import PinRules, Structure, analyse
from core.io import jsonio
from core.messages import (
    Message,
    call_arguments,
    call_name,
    call_with_id,
    content_text,
    one_line,
    tool_calls,
)

STATS_VERSION = 1
DEFAULT_TOP = 10
DEFAULT_READ_TOOLS: tuple[str, ...] = ()  # every read tool compact knows (core.engine.file_calls)
PREVIEW_CHARS = 60
NO_CALL = "(no call)"


@dataclass(frozen=True)
class RoleUsage:
    role: str
    messages: int
    tokens: int


@dataclass(frozen=True)
class ToolUsage:
    tool: str
    calls: int
    results: int
    call_tokens: int
    result_tokens: int

    @property
    def tokens(self) -> int:
        return self.call_tokens + self.result_tokens


@dataclass(frozen=True)
class FileReads:
    """The reads of one path: each read's result line and tokens, oldest first."""

    path: str
    lines: tuple[int | None, ...]
    read_tokens: tuple[int, ...]

    @property
    def reads(self) -> int:
        return len(self.lines)

    @property
    def tokens(self) -> int:
        return sum(self.read_tokens)

    @property
    def reread_tokens(self) -> int:
        """Tokens of every read but the newest: what a newer read superseded."""
        return sum(self.read_tokens[:-1])


@dataclass(frozen=True)
class LargeMessage:
    line: int | None
    role: str
    tokens: int
    what: str


@dataclass
class TranscriptStats:
    """Every figure of ``compact stats``, over the whole transcript (``to_dict`` trims to the top N)."""

    path: str
    encoder: EncoderChoice
    messages: int
    tokens: int
    reply_priming: int
    by_role: list[RoleUsage]
    by_tool: list[ToolUsage]
    by_file: list[FileReads]
    largest: list[LargeMessage]
    read_tools: tuple[str, ...]
    uncounted: dict[str, int] = field(default_factory=lambda: {"messages": 0, "tokens": 0})
    live_part: dict[str, Any] | None = None  # a provider compaction record: where the counted part starts
    skipped_lines: list[dict[str, Any]] = field(default_factory=list)  # what the reader left out (a cut last line)

    @property
    def rereads(self) -> list[FileReads]:
        """Files read more than once, costliest rereads first."""
        reread = [f for f in self.by_file if f.reads > 1]
        return sorted(reread, key=lambda f: (-f.reread_tokens, f.path))

    @property
    def reread_tokens(self) -> int:
        return sum(f.reread_tokens for f in self.by_file)

    def to_dict(self, top: int | None = DEFAULT_TOP) -> dict[str, Any]:
        """The JSON document of ``compact stats --format json``; lists trimmed to ``top`` rows (None: all)."""

        def head(rows: Sequence[Any]) -> Sequence[Any]:
            return rows if top is None else rows[:top]

        rereads = self.rereads
        return {
            "version": STATS_VERSION,
            "input": self.path,
            "encoder": encoder_dict(self.encoder),
            "messages": self.messages,
            "tokens": self.tokens,
            "reply_priming": self.reply_priming,
            "uncounted": dict(self.uncounted),
            "provider_compaction": self.live_part,
            "top": top,
            "by_role": [vars(r) for r in self.by_role],
            "by_tool": [{**vars(t), "tokens": t.tokens} for t in head(self.by_tool)],
            "read_tools": list(self.read_tools),
            "by_file": [
                {"path": f.path, "reads": f.reads, "tokens": f.tokens} for f in head(self.by_file)
            ],
            "largest": [vars(m) for m in head(self.largest)],
            "rereads": {
                "files": len(rereads),
                "reads": sum(f.reads - 1 for f in rereads),
                "tokens": self.reread_tokens,
                "by_file": [
                    {
                        "path": f.path,
                        "reads": f.reads,
                        "lines": list(f.lines),
                        "tokens": f.tokens,
                        "reread_tokens": f.reread_tokens,
                    }
                    for f in head(rereads)
                ],
            },
        }


def encoder_dict(choice: EncoderChoice) -> dict[str, Any]:
    return {
        "requested": choice.requested,
        "encoding": choice.encoding,
        "backend": choice.backend,
        "fallback": choice.fallback_reason,
    }


def stats_file(
    path: str,
    config: MemoryConfig,
    *,
    read_tools: Sequence[str] = DEFAULT_READ_TOOLS,
    use_cache: bool = True,
    stdin: BinaryIO | None = None,
) -> TranscriptStats:
    """Read ``path`` (``-`` for stdin), count it as ``compact count`` does, and break the tokens down."""
    from core.api import open_counter
    from core.formats import live_part, read_one

    transcript = read_one(path, stdin=stdin, command="compact stats")
    counter, choice = open_counter(config, use_cache=use_cache)
    try:
        counted = counter.count_messages(transcript.messages)
        stats = transcript_stats(
            counted,
            counter,
            encoder=choice,
            path=transcript.path,
            read_tools=read_tools,
            graph_marker=config.graph_marker,
        )
        stats.live_part = live_part(transcript)
        stats.skipped_lines = transcript.skipped_lines
        return stats
    finally:
        if counter.cache is not None:
            counter.cache.close()


def transcript_stats(
    messages: Sequence[Message],
    counter: MessageCounter,
    *,
    encoder: EncoderChoice,
    path: str = "<stdin>",
    read_tools: Sequence[str] = DEFAULT_READ_TOOLS,
    graph_marker: str | None = None,
) -> TranscriptStats:
    """The breakdown of ``messages``, whose ``tokens`` are already counted by ``counter``."""
    structure = analyse(messages, PinRules(graph_marker=graph_marker))
    counted = [m for m, c in zip(messages, structure.counted) if c]
    uncounted = [m for m, c in zip(messages, structure.counted) if not c and m.data]
    names = _call_names(messages)
    by_file = _file_reads(messages, structure, frozenset(read_tools))
    return TranscriptStats(
        path=path,
        encoder=encoder,
        messages=len(counted),
        tokens=sum(m.tokens for m in counted) + counter.reply_priming(),
        reply_priming=counter.reply_priming(),
        by_role=_by_role(counted),
        by_tool=_by_tool(messages, structure, counter, names),
        by_file=sorted(by_file, key=lambda f: (-f.tokens, f.path)),
        largest=_largest(messages, structure, names),
        read_tools=tuple(read_tools),
        uncounted={"messages": len(uncounted), "tokens": sum(m.tokens for m in uncounted)},
    )


def _by_role(messages: Sequence[Message]) -> list[RoleUsage]:
    tally: dict[str, list[int]] = {}
    for message in messages:
        row = tally.setdefault(message.role, [0, 0])
        row[0] += 1
        row[1] += message.tokens
    rows = [RoleUsage(role, count, tokens) for role, (count, tokens) in tally.items()]
    return sorted(rows, key=lambda r: (-r.tokens, r.role))


def _call_names(messages: Sequence[Message]) -> dict[tuple[int, str], str]:
    """(message position, call id) -> tool name, for every assistant tool call."""
    return {
        (i, str(call.get("id"))): call_name(call)
        for i, message in enumerate(messages)
        if message.role == "assistant"
        for call in tool_calls(message.data)
    }


def _result_tool(
    position: int, message: Message, structure: Structure, names: dict[tuple[int, str], str]
) -> str:
    """The tool a result answers: the first call it answers, else its own ``name``, else ``(no call)``."""
    for key in structure.answered_by.get(position, []):
        return names.get(key, NO_CALL)
    name = message.data.get("name")
    return name if isinstance(name, str) and name else NO_CALL


def _by_tool(
    messages: Sequence[Message],
    structure: Structure,
    counter: MessageCounter,
    names: dict[tuple[int, str], str],
) -> list[ToolUsage]:
    calls: list[tuple[str, str]] = []  # (tool, the call's countable text)
    for i, message in enumerate(messages):
        if message.role != "assistant" or not structure.counted[i]:
            continue
        for call in tool_calls(message.data):
            calls.append((call_name(call), _call_text(call)))
    tally: dict[str, list[int]] = {}
    for (tool, _), tokens in zip(calls, counter.count_texts([text for _, text in calls])):
        row = tally.setdefault(tool, [0, 0, 0, 0])
        row[0] += 1
        row[2] += tokens
    for i, message in enumerate(messages):
        if message.role != "tool" or not structure.counted[i]:
            continue
        row = tally.setdefault(_result_tool(i, message, structure, names), [0, 0, 0, 0])
        row[1] += 1
        row[3] += message.tokens
    rows = [ToolUsage(tool, *figures) for tool, figures in tally.items()]
    return sorted(rows, key=lambda t: (-t.tokens, t.tool))


def _call_text(call: Any) -> str:
    """A call's name and arguments, joined as countable_text joins them."""
    function = call.get("function")
    arguments = function.get("arguments", "") if isinstance(function, dict) else ""
    if not isinstance(arguments, str):
        arguments = jsonio.dumps(arguments).decode()
    return f"{call_name(call)}\n{arguments}"


def target_path(call: Any) -> str | None:
    """The file a call targets: the first of path, file_path, filename, file, … that is a non-empty string."""
    return argument_path(call_arguments(call))


def _read_path(call: Any, read_tools: frozenset[str]) -> str | None:
    """The file a call reads: with ``read_tools``, a call of one of them; else any read compact knows
    (Read, read_file, a shell cat or sed -n of one file, ...), as deduplicate_file_reads does."""
    if read_tools:
        return target_path(call) if call_name(call) in read_tools else None
    found = classify(call)
    return found[1] if found is not None and found[0] == "read" else None


def _file_reads(
    messages: Sequence[Message], structure: Structure, read_tools: frozenset[str]
) -> list[FileReads]:
    reads: list[tuple[int, str]] = []  # (result position, path)
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        for call in tool_calls(message.data):
            path = _read_path(call, read_tools)
            if path is not None:
                results = structure.results_of_call.get((i, str(call.get("id"))), [])
                reads.extend((r, path) for r in results if structure.counted[r])
    by_path: dict[str, list[int]] = {}
    for position, path in sorted(reads):
        by_path.setdefault(path, []).append(position)
    return [
        FileReads(
            path,
            tuple(messages[p].line for p in positions),
            tuple(messages[p].tokens for p in positions),
        )
        for path, positions in by_path.items()
    ]


def _largest(
    messages: Sequence[Message], structure: Structure, names: dict[tuple[int, str], str]
) -> list[LargeMessage]:
    ranked = sorted(
        (i for i in range(len(messages)) if structure.counted[i]),
        key=lambda i: (-messages[i].tokens, i),
    )
    return [
        LargeMessage(
            messages[i].line,
            messages[i].role,
            messages[i].tokens,
            _describe(i, messages, structure, names),
        )
        for i in ranked
    ]


def _describe(
    position: int,
    messages: Sequence[Message],
    structure: Structure,
    names: dict[tuple[int, str], str],
) -> str:
    """A short, one-line label: the tool (and file) of a result or call, else the start of the text."""
    message = messages[position]
    if message.role == "tool":
        tool = _result_tool(position, message, structure, names)
        path = _answered_path(position, messages, structure)
        return f"result of {tool} {path}" if path else f"result of {tool}"
    calls = tool_calls(message.data)
    if calls:
        listed = ", ".join(call_name(c) for c in calls[:3]) + (", …" if len(calls) > 3 else "")
        return f"calls {listed}"
    return preview(content_text(message.data))


def _answered_path(position: int, messages: Sequence[Message], structure: Structure) -> str | None:
    for owner, cid in structure.answered_by.get(position, []):
        call = call_with_id(messages[owner].data, cid)
        if call is not None:
            return target_path(call)
    return None


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    return one_line(text, limit)
