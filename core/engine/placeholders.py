"""The short texts strategies leave behind; all start with one prefix so a rerun recognises them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.engine.file_calls import patch_files
from core.messages import (
    PLACEHOLDER_PREFIX,
    Message,
    call_arguments,
    call_name,
    content_text,
    is_request,
    one_line,
    tool_calls,
)
from core.summarizers.facts import (
    MARKDOWN_SUFFIXES,
    contents,
    first_error_line,
    opening_error_line,
    outline,
    record_gist,
    tool_output,
)

PREFIX = PLACEHOLDER_PREFIX


def is_placeholder(message: Message) -> bool:
    content = message.data.get("content")
    return isinstance(content, str) and content.startswith(PREFIX)


def cleared(tokens: int) -> str:
    return f"{PREFIX} tool result cleared, {tokens:,} tokens]"


def superseded(tool_name: str, path: str, line: int | None) -> str:
    where = f" at line {line}" if line is not None else ""
    return f"{PREFIX} superseded by a newer {tool_name} of {path}{where}]"


CUT_NAMES = 8  # a cut through code names at most this many of the definitions it took (and counts the rest)


# How every marker of a cut opens: "[… compact: 1,204 tokens cut …]".
CUT_START = "[… compact: "
EXCERPT_END = f"\n{CUT_START}end of the lines kept from the cut …]\n"


def cut(tokens: int, names: Sequence[str] = (), sections: Sequence[str] = (), excerpt: str = "") -> str:
    """The marker where a text's middle was cut; with ``names``, what the cut part defined; with
    ``sections`` (a document's), the headings it held; with ``excerpt``, the lines of the cut part
    kept (those naming the most), between it and a closing marker."""
    if len(names) >= 2:
        more = f" and {len(names) - CUT_NAMES} more" if len(names) > CUT_NAMES else ""
        said = f", defining {', '.join(names[:CUT_NAMES])}{more}"
    elif sections:
        more = f" and {len(sections) - CUT_NAMES} more" if len(sections) > CUT_NAMES else ""
        said = f", sections {'; '.join(sections[:CUT_NAMES])}{more}"
    else:
        said = ""
    if excerpt:
        return f"\n{CUT_START}{tokens:,} tokens cut{said}; of them, the lines naming the most: …]\n{excerpt}{EXCERPT_END}"
    return f"\n{CUT_START}{tokens:,} tokens cut{said} …]\n"


def with_content(message: Message, text: str) -> dict[str, object]:
    data = dict(message.data)
    data["content"] = text
    return data


# -- what a removed or cleared message held, in a line a model can act on ----------------------

TARGET_CHARS = 100


def call_target(call: Mapping[str, Any]) -> str:
    """What a tool call acted on: its path, command, pattern or URL, shortened."""
    arguments = call_arguments(call)
    for key in ("file_path", "path", "absolute_path", "notebook_path", "filename", "file", "command", "cmd",
                "pattern", "query", "url", "description", "prompt"):
        value = arguments.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            return one_line(value, TARGET_CHARS)
    return one_line(", ".join(patch_files(call)), TARGET_CHARS)  # a Codex patch names its files inside


def result_gist(text: str, *, quotes_files: bool = False, target: str = "", known: Iterable[str] = ()) -> str:
    """A cleared result's gist: the names a source file defines or a document's sections, or its
    error (for output that quotes files, a read or a search, only the error it opens with: the
    rest is the files'), or the ids a JSON record holds beyond ``known`` (the call's own values)."""
    text = tool_output(text)
    if target.lower().endswith(MARKDOWN_SUFFIXES):
        held = contents(target, text)
        if held:
            return held
    names = outline(text)
    if len(names) >= 2:
        return "defines " + ", ".join(names)
    error = opening_error_line(text) if quotes_files else first_error_line(text)
    if error:
        return f"error: {one_line(error, TARGET_CHARS)}"
    return "" if quotes_files else record_gist(text, known)


def cleared_result(tokens: int, tool: str, target: str, gist: str) -> str:
    what = f" of {tool} {target}".rstrip() if tool else ""
    tail = f"; {gist}" if gist else ""
    return f"{PREFIX} tool result{what} cleared, {tokens:,} tokens{tail}]"


def removal_trace(messages: Sequence[Message], lines: str, turns: str, store: str | None = None) -> str:
    """One line saying what a span of removed messages held: the requests, the tools and their targets."""
    tools: dict[str, dict[str, None]] = {}  # tool -> its distinct targets, in order
    # the first request a person typed; harness text (Gemini CLI's <session_context>, a slash-command
    # echo) only when there is none
    said = [m for m in messages if m.role == "user" and content_text(m.data)]
    request = next((m for m in said if is_request(m)), said[0] if said else None)
    asked = one_line(content_text(request.data), 120) if request is not None else ""
    for message in messages:
        for call in tool_calls(message.data):
            targets = tools.setdefault(call_name(call) or "tool", {})
            target = call_target(call)
            if target:
                targets[target] = None
    used = "; ".join(
        f"{name} ×{len(targets) or 1}" + (f" ({', '.join(one_line(t, 60) for t in list(targets)[-3:])})" if targets else "")
        for name, targets in list(tools.items())[:6]
    )
    where = f" ({turns.lstrip(', ')})" if turns else ""
    parts = [f"{PREFIX} {len(messages)} earlier message(s) removed{where}"]
    if asked:
        parts.append(f'first request: "{asked}"')
    if used:
        parts.append(f"tools: {used}")
    if store:
        parts.append(f"recall them: compact recall WORDS --store {store}")
    return "; ".join(parts) + "]"


def same_result(tool_name: str, target: str, line: int | None) -> str:
    what = f"{tool_name} {target}".strip()
    where = f" at line {line}" if line is not None else ""
    return f"{PREFIX} same result as the newer {what}{where}]"


def changed_later(tool_name: str, path: str, line: int | None) -> str:
    where = f" at line {line}" if line is not None else ""
    return f"{PREFIX} stale {tool_name} of {path}: the file was changed later{where}]"


def records_cut(tokens: int, kept: int, more: int, cap: int, shortened: Iterable[str],
                collapsed: Mapping[str, str], dropped: Iterable[str], nulls: bool, names: int = CUT_NAMES) -> str:
    """The marker after JSON records cut field by field: which fields were shortened (to about
    ``cap`` characters), reduced to the key naming them or dropped (``names`` of each kind named,
    the rest counted), and how many records went."""
    def listed(keys: Iterable[str]) -> str:
        keys = list(keys)
        more_keys = f" and {len(keys) - names} more" if len(keys) > names else ""
        return ", ".join(keys[:names]) + more_keys
    said = []
    if shortened:
        said.append(f"{listed(shortened)} shortened to about {cap:,} characters (…)")
    if collapsed:
        said.append("; ".join(f"{key} to its {name}" for key, name in list(collapsed.items())[:names]))
    gone = listed(dropped) + (" and null fields" if dropped and nulls else "null fields" if nulls else "")
    if gone:
        said.append(f"dropped {gone}")
    if more:
        said.append(f"{more:,} more records cut")
    these = "this record" if kept == 1 else f"these {kept:,} records"
    return f"{CUT_START}{tokens:,} tokens cut from {these}: {'; '.join(said)} …]"


def records_cut_said(marker: str) -> tuple[int, list[str]] | None:
    """What a ``records_cut`` marker says: the tokens cut and the fields it names as dropped (past
    the CUT_NAMES it lists, only their count: those are not named again); None for another text."""
    if not (marker.startswith(CUT_START) and marker.endswith(" …]") and " tokens cut from " in marker):
        return None
    tokens = marker[len(CUT_START) :].split(" ", 1)[0].replace(",", "")
    if not tokens.isdigit():
        return None
    dropped = next((clause[len("dropped ") :] for clause in marker[:-3].split("; ") if clause.startswith("dropped ")), "")
    names = [name for name in dropped.replace(" and ", ", ").split(", ")
             if name and name != "null fields" and not name.endswith(" more")]
    return int(tokens), names
