"""Identifiers a summary must keep verbatim: file paths, error strings, URLs, what the user gave.

Summaries lose the exact strings people need later (a path, an error, an id);
these are looked for in the summary, and what is missing is appended as is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from core.engine.file_calls import quotes_files
from core.messages import call_arguments, content_text, result_ids, tool_calls
from core.summarizers.retries import call_key

MAX_FACTS = 40
MAX_FACT_CHARS = 160
PATH_KEYS = ("path", "file_path", "filename", "file", "notebook_path", "directory", "cwd")
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.:/-]*\d(?![\w])|(?<![\w.])\d(?![\w.])")
_HANDLE = re.compile(r"\boff_[0-9a-f]{16}\b")
# A line that reports an error, not one that merely names an Error class.
# (A tool that failed says so: Codex's "apply_patch verification failed: …", Claude Code's
# "<tool_use_error>File does not exist.", "Failed to find expected lines …".
# Those open the line: in code, `t.Fatalf("copy failed: %v")` is no failure.)
# (A test named after the error it checks, go test's "=== RUN   TestParse_EmptyError", is no error.)
ERROR_LINE = re.compile(
    r"(^|\s)(Traceback \(most recent call last\)|(?!Test)[A-Z]\w*(Error|Exception)(: |$)|[Ee]rror:|ERROR\b|FAILED\b|fatal:)"
    r"|^\s*(<tool_use_error>|File does not exist|Failed to |([\w.-]+ ){0,3}failed: )"
)
_TOOL_ERROR_TAG = re.compile(r"</?tool_use_error>")


ERROR_SCAN_CHARS = 32_000
_DIFF_OR_NUMBER = re.compile(r"^\s*(?:[+-](?=\s)|\d+(?:→|\t|:))")


# A signature's parameter ("def f(error: Path)") is not an error line, nor is code that handles
# or raises one ("except (TypeError, ValueError) as error:", a file view's line 1478).
_SIGNATURE = re.compile(r"^(?:\s*\d+(?:→|\t|:))?\W*(?:async\s+)?(?:def|class|fn|func|function|except|catch|raise|throw)\b")


# The line that names a traceback's exception: unindented, after the frames.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b")


# SWE-agent ends every observation with its shell's state and prompt: not what the command printed.
_SWE_AGENT_FOOTER = re.compile(r"(?:\n\(Open file: [^\n]*\))?\n\(Current directory: [^\n]*\)\n?bash-\$\s*\Z")


def tool_output(text: str) -> str:
    """What a tool printed: Codex wraps a command's output as {"output": ..., "metadata": ...};
    SWE-agent appends its prompt."""
    if text.endswith(("bash-$", "bash-$ ", "bash-$\n")):
        return _SWE_AGENT_FOOTER.sub("", text)
    if not text.startswith('{"output":'):
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    output = value.get("output") if isinstance(value, dict) else None
    return output if isinstance(output, str) else text


# Every ERROR_LINE holds one of these, lower-cased: a text with none of them is read no further.
_ERROR_WORDS = ("error", "exception", "traceback", "fail", "fatal", "does not exist")


def first_error_line(text: str) -> str | None:
    chunk = text[:ERROR_SCAN_CHARS]  # an error shows early; output can be megabytes
    folded = chunk.lower()
    if not any(word in folded for word in _ERROR_WORDS):
        return None
    lines = chunk.splitlines()
    for index, line in enumerate(lines):
        if ERROR_LINE.search(line) and not _SIGNATURE.match(line):
            if "Traceback (most recent call last)" in line:
                # The header says only that something raised: the exception line says what.
                line = next((ln for ln in lines[index + 1:] if _EXCEPTION_LINE.match(ln)), line)
            # A diff's "+"/"-" and a listing's line number are not part of the error.
            return _DIFF_OR_NUMBER.sub("", _TOOL_ERROR_TAG.sub("", line)).strip()[:MAX_FACT_CHARS]
    return None


OPENING_LINES = 3
OPENING_CHARS = 2000
OPENING_SPLIT = 32  # lines looked at for the opening three (blank and match lines passed over)


# A search's match ("path:12:" or "path:12-"): the file's line, whatever it says.
_MATCH_LINE = re.compile(r"^\S+:\d+[:-]")


def opening_error_line(text: str) -> str | None:
    """The error a tool's output opens with (a failed call), not one quoted further down, nor a
    search's match that reads like one."""
    chunk = text[:OPENING_CHARS]
    folded = chunk.lower()
    if not any(word in folded for word in _ERROR_WORDS):  # (most outputs: no line to split)
        return None
    # (split no further than the opening needs: a read's output is thousands of lines)
    head = chunk.split("\n", OPENING_SPLIT)[:OPENING_SPLIT]
    opening = [line for line in head if line.strip() and not _MATCH_LINE.match(line)][:OPENING_LINES]
    return first_error_line("\n".join(opening)) if opening else None


def call_error(call: Mapping[str, Any], output: str) -> str | None:
    """The error a call's output reports: of a read or a search, whose output is files' text, only
    one it opens with."""
    if not output:
        return None
    return opening_error_line(output) if quotes_files(call) else first_error_line(output)


def _paths(call: Mapping[str, Any]) -> Iterable[str]:
    arguments = call_arguments(call)
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            yield value.strip()


def extract_facts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The newest MAX_FACTS identifiers of a span, in order of appearance, without repeats.

    Read newest first, and no further than needed: a long span has thousands of tool results."""
    found: dict[Any, None] = {}  # a result's error is keyed by (result ids, error, text) until its call is seen
    quoting: set[str] = set()  # the calls whose output is files' text: an error inside is the files'
    errors: set[str] = set()
    erring: set[str] = set()  # the ids of the results whose error is kept
    kept_error: dict[str, tuple[Any, ...]] = {}  # a result id: the error kept for it
    went_through: set[str] = set()  # the ids of the results without an error
    got_past: set[tuple[str, str]] = set()  # the kinds of call a newer call of went through (retries.py)
    for message in reversed(messages):
        if len(found) >= MAX_FACTS:
            break
        role = message.get("role")
        text = content_text(message)
        for call in tool_calls(message):
            found.update(dict.fromkeys(_paths(call)))
            call_id = str(call.get("id"))
            if call_id in erring and quotes_files(call):  # (asked only of calls whose output erred)
                quoting.add(call_id)
            if call_id in kept_error and call_key(call) in got_past:
                found.pop(kept_error.pop(call_id), None)  # history: a newer call of its kind went through
            elif call_id in went_through:
                got_past.add(call_key(call))
        if role in ("user", "assistant", "system"):
            found.update(dict.fromkeys(url.rstrip(".,;:") for url in _URL.findall(text)))
            found.update(dict.fromkeys(_HANDLE.findall(text)))
        if role == "user":
            found.update(dict.fromkeys(_EMAIL.findall(text)))
            found.update(dict.fromkeys(labelled_numbers(text)))
        if role == "tool":
            error = first_error_line(text)
            ids = tuple(result_ids(message))
            if error and error not in errors:
                errors.add(error)
                found[(ids, error, text)] = None
                erring.update(ids)
                kept_error.update(dict.fromkeys(ids, (ids, error, text)))
            elif not error:
                went_through.update(ids)
    facts = (_call_error(key, quoting) if isinstance(key, tuple) else key for key in reversed(found))
    return list(dict.fromkeys(fact for fact in facts if fact))[-MAX_FACTS:]


def _call_error(result: tuple[tuple[str, ...], str, str], quoting: set[str]) -> str | None:
    """A result's error: of a read or a search, only the one its output opens with (a grep match
    such as `t.Fatalf("… got error: %v")` is the files', not the call's)."""
    ids, error, text = result
    return opening_error_line(text) if quoting.intersection(ids) else error


# The words before a number that say what it counts: "lines 474-490", "limit to 100".
_LABEL = re.compile(r"\b([A-Za-z][A-Za-z-]+)[ \t]+(?:(?:is|are|was|to|of|at|by|for|from|be|the|a|an)[ \t]+)?$")
_NOT_LABELS = frozenset(("is", "are", "was", "to", "of", "at", "by", "for", "from", "be", "the", "a", "an", "and",
                         "or", "in", "on", "with", "than", "about", "under", "over", "it", "we", "i"))
_TOKEN_EDGE = "()[]{}<>,.;:!?\"'`"
IDENTIFIER_CHARS = 40
_IDENTIFIER_TOKEN = re.compile(r"[\w#$@+-]+(?:[./:][\w#$@+-]+)*")  # KX-4471-QP, #W2378156, v1.2.3 (not code)


def labelled_numbers(text: str) -> Iterator[str]:
    """The numbers ``text`` gives (two characters or more), each as written with what labels it: a
    number inside an identifier is the identifier (KX-4471-QP), a bare one comes with the word
    before it when that word says what it counts (lines 474-490, limit to 100)."""
    for match in _NUMBER.finditer(text):
        number = match.group()
        if len(number) < 2:
            continue
        start, end = match.start(), match.end()
        while start and not text[start - 1].isspace():
            start -= 1
        while end < len(text) and not text[end].isspace():
            end += 1
        token = text[start:end].strip(_TOKEN_EDGE)
        if token != number and len(token) <= IDENTIFIER_CHARS and _IDENTIFIER_TOKEN.fullmatch(token):
            yield token
            continue
        label = _LABEL.search(text, max(match.start() - IDENTIFIER_CHARS, 0), match.start())
        if label is not None and label.group(1).lower() not in _NOT_LABELS:
            yield text[label.start():match.end()]
        else:
            yield number


def missing_facts(summary: str, facts: Iterable[str]) -> list[str]:
    return [fact for fact in facts if fact not in summary]


# -- what a source file defines -------------------------------------------------------------

LINE_NUMBER = re.compile(r"^\s*\d+(?:→|\t|: )")  # Claude Code's "   12→", cat -n's "  12\t"
_DEFINITION = re.compile(
    r"^\s*(?:export\s+)?(?:pub(?:\(\w+\))?\s+)?(?:async\s+)?"
    r"(?:def|class|fn|struct|enum|trait|impl|interface|function|func|type|module)\s+(?:\([^()\n]*\)\s*)?([A-Za-z_]\w*)"
)
OUTLINE_NAMES = 12
OUTLINE_SCAN_CHARS = 64_000


# (A Go method's receiver comes between `func` and its name: `func (s *GitStore) GetSessionLog(`.)
# _DEFINITION at the start of a line, after a listing's line number: found by one scan for a
# newline followed by a definition (a literal first character the regex engine can skip to),
# not a Python loop over the lines (a run outlines hundreds of files).
_DEFINITION_BODY = (
    r"(?:[ \t]*\d+(?:→|\t|: ))?[ \t\f]*(?:export[ \t]+)?(?:pub(?:\(\w+\))?[ \t]+)?(?:async[ \t]+)?"
    r"(?:def|class|fn|struct|enum|trait|impl|interface|function|func|type|module)[ \t]+(?:\([^()\n]*\)[ \t]*)?([A-Za-z_]\w*)"
)
_FIRST_LINE_DEFINITION = re.compile(_DEFINITION_BODY)
_LATER_LINE_DEFINITION = re.compile("\n" + _DEFINITION_BODY)


def outline(text: str, limit: int = OUTLINE_NAMES) -> list[str]:
    """The names a source file defines (functions, classes, types), in order, at most ``limit``."""
    if "\r" in text:  # a bare CR ends a line too (old Mac files)
        text = text[:OUTLINE_SCAN_CHARS].replace("\r\n", "\n").replace("\r", "\n")
    first = _FIRST_LINE_DEFINITION.match(text, 0, OUTLINE_SCAN_CHARS)
    names: dict[str, None] = {first.group(1): None} if first else {}
    for match in _LATER_LINE_DEFINITION.finditer(text, 0, OUTLINE_SCAN_CHARS):
        if len(names) >= limit:
            break
        names[match.group(1)] = None
    return list(names)[:limit]


def _markdown_lines(text: str) -> Iterator[tuple[str, bool]]:
    """The lines of a Markdown document as a tool read it (line numbers taken off), each with whether
    it stands inside a fenced code block; the fence lines themselves are not yielded."""
    fenced = False
    for line in text[:OUTLINE_SCAN_CHARS].splitlines():
        line = LINE_NUMBER.sub("", line, count=1)
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        yield line, fenced


def fenced_outline(text: str, limit: int = OUTLINE_NAMES) -> list[str]:
    """The names the fenced code blocks of a Markdown document define, in order, at most ``limit``
    (prose outside them that starts like a definition, "type of session…", is not code)."""
    names: dict[str, None] = {}
    for line, fenced in _markdown_lines(text):
        match = _DEFINITION.match(line) if fenced else None
        if match:
            names[match.group(1)] = None
            if len(names) >= limit:
                break
    return list(names)


# An id a record holds: one word of letters and digits (underscores, hyphens), with both a letter
# and a digit (sofia_kim_7287, HAT078, gift_card_7480005, a UUID) or in capitals (a booking code,
# AQLBTL); not a price, a date or a name.
_RECORD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{3,63}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
_CODE = re.compile(r"[A-Z0-9]{5,}")
# A field name can hold a digit too (address1, line2): a key counts when it looks like data.
_KEY_ID = re.compile(r"[0-9]{3}")
# A field holding a kind, a state or a side ("start_side": "RIGHT", "author_association": "MEMBER")
# holds a category the record falls in, not an id a next call passes on.
_CATEGORY_KEY = re.compile(r"(?:^|_)(?:side|association|state|status|type|kind|role|level|mode|event|action)$",
                           re.IGNORECASE)
RECORD_IDS = 16
FIELD_IDS = 8  # a field listing dozens shows its first few and a count
RECORD_SCAN_CHARS = 200_000


def _is_record_id(value: str) -> bool:
    if not _RECORD_ID.fullmatch(value) or not _LETTER.search(value):
        return False
    return bool(_DIGIT.search(value) or _CODE.fullmatch(value))


def _ids_inside(value: Any) -> dict[str, None]:
    """The ids inside a JSON value, in document order: id-like strings and the keys of records keyed by id."""
    found: dict[str, None] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _is_record_id(item):
                found[item] = None
        elif isinstance(item, dict):
            found.update((k, None) for k in item if _is_id_key(k))
            stack.extend(reversed([v for k, v in item.items() if not _is_category(k, v)]))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return found


def _is_category(key: str, value: Any) -> bool:
    return isinstance(value, str) and bool(_CATEGORY_KEY.search(key))


def _is_id_key(key: str) -> bool:
    return _is_record_id(key) and bool(_KEY_ID.search(key) or _CODE.fullmatch(key))


def record_ids(text: str, known: Iterable[str] = ()) -> tuple[list[tuple[str, list[str], int]], int]:
    """The ids a JSON record (a tool's object or array answer) holds, grouped by the top-level field
    that holds them ("" for a bare array or records keyed by id), in order: (field, the first
    FIELD_IDS of them, how many more), at most RECORD_IDS in all; and how many ids the fields past
    that hold. An agent passes them to its next calls (the payment method, the reservation, the
    order). Those in ``known`` (what the call asked for) are left out."""
    if len(text) > RECORD_SCAN_CHARS or text.lstrip()[:1] not in ("{", "["):
        return [], 0
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return [], 0
    fields = list(value.items()) if isinstance(value, dict) else [("", value)] if isinstance(value, list) else []
    groups: dict[str, dict[str, None]] = {}
    for key, held in fields:
        if _is_category(key, held):
            continue
        found = _ids_inside(held)
        if _is_id_key(key):
            found = {key: None} | found
            key = ""
        if found:
            groups.setdefault(key, {}).update(found)
    kept: list[tuple[str, list[str], int]] = []
    seen = set(known)
    room = RECORD_IDS
    elsewhere = 0
    for key, ids in groups.items():
        fresh = [i for i in ids if i not in seen]
        seen.update(fresh)
        shown = fresh[: min(FIELD_IDS, room)]
        if shown:
            kept.append((key, shown, len(fresh) - len(shown)))
            room -= len(shown)
        else:
            elsewhere += len(fresh)
    return kept, elsewhere


def record_gist(text: str, known: Iterable[str] = ()) -> str:
    """A JSON record's ids by the field that held them: "ids: user_id u_1; reservations AB12, CD34"
    (those in ``known``, what the call asked for, left out)."""
    groups, elsewhere = record_ids(text, known)
    said = "; ".join(f"{key} {', '.join(ids)}".strip() + (f" (+{more} more)" if more else "")
                     for key, ids, more in groups)
    if said and elsewhere:
        said += f"; {elsewhere} more in other fields"
    return f"ids: {said}" if said else ""


_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
HEADING_CHARS = 48
SECTIONS = 8


def headings(text: str, limit: int = SECTIONS) -> list[str]:
    """A Markdown document's map: its headings in order (code blocks skipped); when there are
    more than ``limit``, the top two levels only; at most ``limit``."""
    found: list[tuple[int, str]] = []
    for line, fenced in _markdown_lines(text):
        match = None if fenced else _HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2)[:HEADING_CHARS]))
    if len(found) > limit:
        found = [(level, title) for level, title in found if level <= 2]
    return list(dict.fromkeys(title for _, title in found))[:limit]


def contents(path: str, text: str) -> str:
    """What a file holds, in a few words: "defines NAMES" for source, "sections HEADINGS" for a
    Markdown document, or "" when it shows neither."""
    if path.lower().endswith(MARKDOWN_SUFFIXES):
        sections = headings(text)
        sketched = fenced_outline(text)  # a plan's code blocks name what is to be built
        parts = [f"sections {'; '.join(sections)}"] if sections else []
        parts += [f"its code sketches {', '.join(sketched)}"] if sketched else []
        return "; ".join(parts)
    names = outline(text)
    return f"defines {', '.join(names)}" if names else ""
