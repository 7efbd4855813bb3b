"""Messages as values, in the canonical OpenAI Chat Completions shape.

A ``Message`` keeps the parsed JSON object and, until something rewrites it,
the exact bytes of its line, so untouched messages are written back as they
came. The helpers below read the few fields compaction cares about and leave
every other field alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, SupportsBytes

import orjson

from core.io import jsonio

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
SYSTEM_ROLES = ("system", "developer")

# What compact itself writes into transcripts starts with one of these.
PLACEHOLDER_PREFIX = "[compact:"
SUMMARY_MARKER = "CUCA summary:"

# Parts a model sees as images; counted at a fixed cost (README, "Token counting").
IMAGE_PART_TYPES = ("image_url", "image", "input_image", "document", "computer_screenshot")
IMAGE_TOKENS = 85
# ``Message.extra`` key: the source marks this tool result as a failed call (Anthropic ``is_error``,
# pi ``isError``, Gemini CLI ``status: "error"``); writers with a field for it set it again.
FAILED = "failed"
# A tool call's ``type`` for a custom (free-form) tool: its input is raw text, not JSON arguments.
# Read, it is held as ``{"type": "custom", "function": {"name", "arguments": <the text>}}``, so every
# step reads one shape; written, it is the wire's ``{"type": "custom", "custom": {"name", "input"}}``.
CUSTOM_CALL = "custom"
# ``Message.extra`` key: a provider's own compaction record (an Anthropic ``compaction`` block, a
# Responses ``compaction`` item, a Codex ``replacement_history``). The server reads nothing before
# the newest one and checks its bytes (a signature, encrypted content): it is a summary that is
# pinned, never rewritten and never removed, so what it hides stays hidden.
PROVIDER_RECORD = "provider_record"
# extra: the line of each tool call of a message read from several lines (a reply's thinking, text
# and calls each on its own line), by call id.
CALL_LINES = "call_lines"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a transcript.

    ``line`` is the 1-based line it came from (None for messages compact
    added); ``source`` the original bytes of that line, dropped once the
    message is rewritten; ``tokens`` its count, filled in by the counter.
    """

    data: dict[str, Any]
    line: int | None = None
    source: bytes | memoryview | SupportsBytes | None = None
    tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def role(self) -> str:
        role = self.data.get("role", "")
        return role if type(role) is str else str(role)  # (read on every message by every step)

    # Direct construction: dataclasses.replace costs three times as much, on every message of a run.
    def rewritten(self, data: dict[str, Any]) -> Message:
        """The same message (same line) with new content; its bytes are re-serialised."""
        return Message(data, self.line, None, 0, self.extra)

    def with_tokens(self, tokens: int) -> Message:
        return Message(self.data, self.line, self.source, tokens, self.extra)

    def to_bytes(self) -> bytes | memoryview:
        if isinstance(self.source, (bytes, memoryview)):
            return self.source
        if self.source is not None:
            return bytes(self.source)  # a reference into the transcript file
        return jsonio.dumps(wire_message(self.data))


def iter_text_parts(content: Any) -> Iterator[str]:
    """The texts of a content value: a string, or the text of each part."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                yield part
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    yield text
                    continue
                kind = part.get("type")
                if kind == "refusal" and isinstance(part.get("refusal"), str):
                    yield part["refusal"]
                elif kind == "thinking" and isinstance(part.get("thinking"), str):
                    yield part["thinking"]  # Anthropic thinking: counted as the text it is
                elif kind == "compaction" and isinstance(part.get("content"), str):
                    yield part["content"]  # Anthropic's compaction block: the summary the API reads
                elif kind == "reasoning":  # a Responses reasoning item: its readable summary
                    yield from iter_text_parts(part.get("summary"))
                    yield from iter_text_parts(part.get("content"))
                elif kind == "document":  # Anthropic document: a plain-text source is read as text
                    source = part.get("source")
                    if isinstance(source, Mapping) and source.get("type") == "text" and isinstance(source.get("data"), str):
                        yield source["data"]
                    else:
                        yield from iter_text_parts(source.get("content") if isinstance(source, Mapping) else None)


def image_count(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for p in content if isinstance(p, Mapping) and p.get("type") in IMAGE_PART_TYPES
               and not _readable_document(p))


def _readable_document(part: Mapping[str, Any]) -> bool:
    """A document whose text the reader counts (a PDF or other binary source costs a fixed amount)."""
    source = part.get("source")
    return part.get("type") == "document" and isinstance(source, Mapping) and source.get("type") in ("text", "content")


def content_text(data: Mapping[str, Any]) -> str:
    """The message's own text (content only), parts joined by newlines."""
    return "\n".join(iter_text_parts(data.get("content")))


# A name cut at a line's limit is finished when it ends within this many characters more.
NAME_RUN_CHARS = 24


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, shortened to about ``limit`` characters where a word ends: half a name
    (`textutil.StripIDEContextTag…`) is one a model cannot look up, so a name the limit cuts is
    finished when it ends soon after, else left out whole."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = max(limit - 1, 0)
    if cut and flat[cut] != " " and flat[cut - 1] != " ":  # inside a word
        end = flat.find(" ", cut)
        end = len(flat) if end < 0 else end
        if end - cut <= NAME_RUN_CHARS:
            return flat if end == len(flat) else flat[:end] + "…"
        start = flat.rfind(" ", 0, cut)
        if start > 0:
            cut = start + 1
    return flat[:cut].rstrip() + "…"


def countable_text(data: Mapping[str, Any]) -> str:
    """Every text a model sees in this message: content, tool-call names and arguments, name."""
    pieces = list(iter_text_parts(data.get("content")))
    for call in tool_calls(data):
        function = call.get("function")
        if type(function) is dict or isinstance(function, Mapping):
            pieces.append(str(function.get("name", "")))
            arguments = function.get("arguments", "")
            pieces.append(arguments if isinstance(arguments, str) else jsonio.dumps(arguments).decode())
    legacy = data.get("function_call")
    if isinstance(legacy, Mapping):
        pieces.append(str(legacy.get("name", "")))
        pieces.append(str(legacy.get("arguments", "")))
    name = data.get("name")
    if isinstance(name, str):
        pieces.append(name)
    return "\n".join(pieces)


def tool_calls(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    calls = data.get("tool_calls")
    if not isinstance(calls, list):
        return []
    # (type(c) is dict first: an isinstance check against the Mapping ABC costs several times more)
    return [c for c in calls if type(c) is dict or isinstance(c, Mapping)]


def canonical_calls(calls: list[Any]) -> list[Any]:
    """The calls as every step reads them: a custom call's input held as its ``function`` arguments."""
    return [_held(c) if type(c) is dict and c.get("type") == CUSTOM_CALL and isinstance(c.get("custom"), dict) else c
            for c in calls]


def _held(call: dict[str, Any]) -> dict[str, Any]:
    custom = call["custom"]
    out = {k: v for k, v in call.items() if k != "custom"}
    out["function"] = {"name": custom.get("name", ""), "arguments": custom.get("input", "")}
    return out


def held_message(data: dict[str, Any]) -> dict[str, Any]:
    """A chat message as a run holds it once read (custom calls as ``canonical_calls`` gives them), for
    messages read without the transcript reader: a stored output, a dataset's conversation."""
    calls = data.get("tool_calls")
    return {**data, "tool_calls": canonical_calls(calls)} if type(calls) is list else data


def custom_arguments(call: Mapping[str, Any]) -> dict[str, str] | None:
    """A custom (free-form) call's input as the one argument formats without such calls get,
    ``{"input": text}``, the text never parsed (it may look like JSON); None for other calls."""
    if call.get("type") != CUSTOM_CALL:
        return None
    function = call.get("function")
    return {"input": _input_text(function if isinstance(function, Mapping) else {})}


def arguments_value(call: Mapping[str, Any]) -> Any:
    """A call's arguments as a format that stores them as an object reads them: a custom call's
    ``{"input": text}``, ``""`` (a call that takes none, as some OpenAI-compatible servers send it) as
    ``{}``, JSON text as its value, other text as it is. The writer wraps what is not an object."""
    free_form = custom_arguments(call)
    if free_form is not None:
        return free_form
    function = call.get("function")
    arguments = function.get("arguments", "{}") if isinstance(function, Mapping) else "{}"
    if not isinstance(arguments, str):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return jsonio.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments


def _input_text(function: Mapping[str, Any]) -> str:
    arguments = function.get("arguments", "")
    return arguments if isinstance(arguments, str) else jsonio.dumps(arguments).decode()


def wire_message(data: dict[str, Any]) -> dict[str, Any]:
    """A chat message as it is sent: custom calls in their wire shape (``data`` itself when it holds none)."""
    calls = data.get("tool_calls")
    if not calls or type(calls) is not list or not any(
            type(c) is dict and c.get("type") == CUSTOM_CALL and "function" in c for c in calls):
        return data
    return {**data, "tool_calls": [_wire(c) if type(c) is dict and c.get("type") == CUSTOM_CALL else c
                                   for c in calls]}


def _wire(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    if not isinstance(function, Mapping):
        return call
    out = {k: v for k, v in call.items() if k != "function"}
    out["custom"] = {"name": function.get("name", ""), "input": _input_text(function)}
    return out


def call_ids(data: Mapping[str, Any]) -> list[str]:
    """Ids of the tool calls an assistant message makes."""
    if data.get("role") != "assistant":
        return []
    return [str(c["id"]) for c in tool_calls(data) if c.get("id") is not None]


def result_ids(data: Mapping[str, Any]) -> list[str]:
    """Ids of the calls a tool message answers (`tool_call_id`, or SWE-agent's `tool_call_ids`)."""
    if data.get("role") != "tool":
        return []
    single = data.get("tool_call_id")
    if single is not None:
        return [str(single)]
    many = data.get("tool_call_ids")
    if isinstance(many, list):
        return [str(i) for i in many]
    return []


# The legacy `function_call` has no id: a `function` message answers the nearest one before it.
LEGACY_CALL = "function_call"

CallKey = tuple[int, str]  # (the position of the message making a call, the call's id)


def call_keys(data: Mapping[str, Any]) -> list[str]:
    """What a message's calls are answered by: their ids, and LEGACY_CALL for a legacy ``function_call``."""
    keys = call_ids(data)
    if data.get("role") == "assistant" and isinstance(data.get("function_call"), Mapping):
        keys.append(LEGACY_CALL)
    return keys


def result_keys(data: Mapping[str, Any]) -> list[str]:
    return [LEGACY_CALL] if data.get("role") == "function" else result_ids(data)


@dataclass(frozen=True, slots=True)
class Pairing:
    """Which results answer which calls in one message list (positions are list indexes)."""

    results_of_call: dict[CallKey, list[int]]  # every call, with its results in order (none: an orphan call)
    answered_by: dict[int, list[CallKey]]  # each result, with the calls it answers
    orphan_results: list[int]  # results with no call before them (once per id they name)


def call_with_id(data: Mapping[str, Any], call_id: str) -> Mapping[str, Any] | None:
    """The tool call of ``data`` a pairing key ``(position, call_id)`` names (None for a legacy ``function_call``)."""
    return next((c for c in tool_calls(data) if str(c.get("id")) == call_id), None)


def pair_calls(messages: Sequence[Mapping[str, Any]]) -> Pairing:
    """Each call's results and each result's calls: the one pairing every step asks.

    By position, not by id alone: real transcripts reuse call ids (tau-bench does), so a result
    answers the nearest call with its id before it (docs/formats.md)."""
    latest_call: dict[str, int] = {}
    results_of_call: dict[CallKey, list[int]] = {}
    answered_by: dict[int, list[CallKey]] = {}
    orphan_results: list[int] = []
    for i, data in enumerate(messages):
        for cid in call_keys(data):
            latest_call[cid] = i
            results_of_call.setdefault((i, cid), [])
        for rid in result_keys(data):
            owner = latest_call.get(rid)
            if owner is None:
                orphan_results.append(i)
                continue
            results_of_call[(owner, rid)].append(i)
            answered_by.setdefault(i, []).append((owner, rid))
    return Pairing(results_of_call, answered_by, orphan_results)


def call_name(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    if type(function) is dict or isinstance(function, Mapping):
        return str(function.get("name", ""))
    return ""


def string_values(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (a call's arguments): the values, never the keys."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from string_values(item)


def call_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as a dict; {} when they are not a JSON object."""
    function = call.get("function")
    if not (type(function) is dict or isinstance(function, Mapping)):
        return {}
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        # Read to see what a call targets, never written back: orjson alone (an integer past 64 bits
        # read as a float changes nothing here), the standard library only for what orjson refuses.
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            try:
                parsed = jsonio.loads(arguments)
            except orjson.JSONDecodeError:
                return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def is_user_message(data: Mapping[str, Any]) -> bool:
    """A user-role message with text: it starts a turn."""
    return data.get("role") == "user" and has_text(data)


# Text a harness injects in the user's name (Claude Code's slash-command echoes, reminders,
# interruption notes; the <session_context> record Gemini CLI writes before every conversation): the
# model reads it, but it is not what the person asked for.
HARNESS_PREFIXES = (
    "<command-name>", "<command-message>", "<command-args>", "<local-command-stdout>", "<local-command-stderr>",
    "<system-reminder>", "<user-prompt-submit-hook>", "[Request interrupted by user",
    "Caveat: The messages below were generated by the user while running local commands",
    "<session_context>",
    # A skill Claude Code loads into the conversation: its instructions, not the user's words.
    "Base directory for this skill:",
    # A hook's refusal Claude Code passes on as user text ("Operation stopped by hook: Another session is active …").
    "Operation stopped by hook:",
)


def is_request(message: Message) -> bool:
    """A request a person typed: user text that is not hook or harness output, nor a summary."""
    data = message.data
    if data.get("role") != "user" or message.extra.get("meta") or message.extra.get("summary"):
        return False
    text = content_text(data).lstrip()
    return bool(text) and not text.startswith(HARNESS_PREFIXES)


def has_text(data: Mapping[str, Any]) -> bool:
    return any(part.strip() for part in iter_text_parts(data.get("content")))


def starts_with_marker(data: Mapping[str, Any], marker: str) -> bool:
    content = data.get("content")
    return isinstance(content, str) and content.startswith(marker)


def content_handle(data: Mapping[str, Any]) -> str:
    """The store's handle for a message: a hash of its canonical JSON (same content, same handle).

    Hashed as the store holds it (``wire_message``: custom calls in their wire shape), so the
    handle the report gives is the one `compact recall --id` finds.
    """
    digest = hashlib.sha256(jsonio.dumps(wire_message(dict(data)), sort_keys=True)).hexdigest()
    return f"off_{digest[:16]}"


ORIGINAL_KEY = "before_compact"


def original_data(message: Message) -> dict[str, Any]:
    """The message as the input had it, before a strategy of this run rewrote it."""
    return message.extra.get(ORIGINAL_KEY, message.data) if message.extra else message.data


def is_summary(message: Message) -> bool:
    """A summary of earlier turns: compact's own, or one an agent wrote (a format's reader flags it)."""
    return message.role in SYSTEM_ROLES and (
        starts_with_marker(message.data, SUMMARY_MARKER) or bool(message.extra and message.extra.get("summary"))
    )


def is_provider_record(message: Message) -> bool:
    """A provider's compaction record (:data:`PROVIDER_RECORD`): kept exactly as it came."""
    return bool(message.extra and message.extra.get(PROVIDER_RECORD))


def written_by_compact(message: Message) -> bool:
    """A summary or placeholder already in the transcript (never summarized or offloaded again)."""
    return is_summary(message) or (message.role in SYSTEM_ROLES and starts_with_marker(message.data, PLACEHOLDER_PREFIX))


def call_line(message: Message, call_id: str) -> int | None:
    """The input line that holds the message's call ``call_id``: the message's first line unless
    the reader recorded each call's own."""
    lines = message.extra.get(CALL_LINES)
    return lines.get(call_id, message.line) if lines else message.line
