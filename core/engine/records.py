"""Cutting a JSON text of records (an API's answer: review comments, issues, runs) field by field.

Cut through its serialized line, one line of JSON keeps the first record's head and the last one's
tail: a GitHub review comment's diff hunk and reactions, not the ids and links the agent builds its
next call from. Cut here, each record keeps its scalar fields and the heads of its long texts (a
diff hunk also the lines it ends on, those commented on); links and ids stay whole; a nested object shrinks to
what names it (a user to its login), and one repeating the record's own links, a bulky one or a
null goes. When that is still too long, only the fields that name a record and say where it is
stay, then only the first records. The marker after the records says what was cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.counting.counter import MessageCounter
from core.engine import placeholders

RECORD_MIN_KEYS = 3  # (a smaller object is a value, not a record)
PARSE_MAX_CHARS = 400_000
MIN_TEXT_CHARS = 40  # the least a long text keeps
WORD_MAX_CHARS = 300  # a string with no space up to this long (a link, a sha, a path) is kept whole or not at all
NAMING_KEYS = ("login", "name", "title", "ref", "sha", "id")  # what names a nested object, best first
NESTED_CHARS = 160  # a nested object that no key names is kept whole up to this size
# When not every field fits: first those that name a record and say where it is, then these.
WHERE_KEYS = frozenset({"id", "number", "name", "title", "path", "filename", "file", "line", "html_url"})
ABOUT_KEYS = frozenset({"user", "author", "login", "body", "message", "text", "state", "status", "description"})
DIFF_HUNK_START = "@@ "


@dataclass
class Cuts:
    """What one rendering of the records left out, for the marker."""

    shortened: dict[str, None] = field(default_factory=dict)
    collapsed: dict[str, str] = field(default_factory=dict)  # key -> the key naming it
    dropped: dict[str, None] = field(default_factory=dict)
    nulls: bool = False


def cut_records(text: str, max_tokens: int, counter: MessageCounter) -> str | None:
    """``text``, a JSON text of records, cut field by field to at most ``max_tokens`` tokens, or
    None when it is no such text or not even one record's naming fields fit."""
    text, earlier, earlier_dropped = _earlier_cut(text)
    values = _json_values(text)
    if values is None or not any(_is_record(record) for record in _records(values)):
        return None
    total = counter.count_text(text) + earlier
    count = len(_records(values))
    order = _drop_order(_records(values))

    def render(dropped: int, keep: int, cap: int, names: int = placeholders.CUT_NAMES) -> str | None:
        cuts = Cuts(dropped=dict.fromkeys(earlier_dropped))
        drop = frozenset(order[:dropped])
        kept = _render(values, keep, lambda record: _slim(record, cap, drop, cuts, depth=0))
        clamped = kept + "\n" + placeholders.records_cut(
            total - counter.count_text(kept), keep, count - keep, cap,
            cuts.shortened, cuts.collapsed, cuts.dropped, cuts.nulls, names)
        return clamped if counter.count_text(clamped) <= max_tokens else None

    longest = max(MIN_TEXT_CHARS, len(text))
    if render(len(order), 1, MIN_TEXT_CHARS) is None:
        # (the least room, a result cut instead of cleared: one record, a marker naming one field of each kind)
        brief = render(len(order), 1, MIN_TEXT_CHARS, names=1)
        return brief if count == 1 else None
    keep = count
    if render(len(order), count, MIN_TEXT_CHARS) is None:  # not even every record's naming fields
        keep = _largest_int(1, count - 1, lambda n: render(len(order), n, MIN_TEXT_CHARS) is not None)
    # the fewest fields dropped, then the longest texts, that fit
    spared = _largest_int(0, len(order), lambda n: render(len(order) - n, keep, MIN_TEXT_CHARS) is not None)
    return _largest(MIN_TEXT_CHARS, longest, lambda cap: render(len(order) - spared, keep, cap))


def _drop_order(records: list[Any]) -> list[str]:
    """The records' keys that may go when not all fit, the least needed first: those that neither
    name a record nor say what it is about, then those that say what, the bulkiest first in each."""
    size: dict[str, int] = {}
    for record in records:
        if not isinstance(record, dict):
            continue
        own = {value for value in record.values() if isinstance(value, str)}
        for key, value in record.items():
            if _tier(key) > 1:
                least = _shorten(value, MIN_TEXT_CHARS) if isinstance(value, str) else value
                least = _nested(value, own) if isinstance(value, dict) else least
                size[key] = size.get(key, 0) + len(json.dumps(least, ensure_ascii=False))
    return sorted(size, key=lambda key: (-_tier(key), -size[key]))


def _earlier_cut(text: str) -> tuple[str, int, list[str]]:
    """A text cut here before (a later step cuts it again): its records, the tokens its marker
    says were cut and the fields it says were dropped; or the text as it is, 0 and none."""
    records, _, marker = text.rstrip().rpartition("\n")
    said = placeholders.records_cut_said(marker)
    if not records or said is None:
        return text, 0, []
    return records, *said


def _json_values(text: str) -> list[Any] | None:
    """The JSON values ``text`` is made of (one, or several in a row: JSON lines), or None."""
    stripped = text.strip()
    if len(stripped) > PARSE_MAX_CHARS or stripped[:1] not in "[{" or stripped[-1:] not in "]}":
        return None
    decoder = json.JSONDecoder()
    values, at = [], 0
    try:
        while at < len(stripped):
            value, at = decoder.raw_decode(stripped, at)
            values.append(value)
            while at < len(stripped) and stripped[at].isspace():
                at += 1
    except ValueError:
        return None
    return values


def _records(values: list[Any]) -> list[Any]:
    """The top-level records: a list's items, or the values in a row."""
    return values[0] if len(values) == 1 and isinstance(values[0], list) else values


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and len(value) >= RECORD_MIN_KEYS


def _render(values: list[Any], keep: int, slim: Callable[[Any], Any]) -> str:
    """The first ``keep`` records slimmed, one a line: a list stays a list, values in a row stay so."""
    def dumps(value: Any) -> str:
        return json.dumps(slim(value) if _is_record(value) else value, ensure_ascii=False, separators=(",", ":"))
    if len(values) == 1 and isinstance(values[0], list):
        return "[" + ",\n".join(dumps(item) for item in values[0][:keep]) + "]"
    return "\n".join(dumps(value) for value in values[:keep])


def _slim(record: dict[str, Any], cap: int, drop: frozenset[str], cuts: Cuts, depth: int) -> dict[str, Any]:
    """``record`` without the keys in ``drop``, long strings shortened to ``cap`` characters,
    nested objects named or dropped, nulls dropped; what went noted in ``cuts``."""
    own = {value for value in record.values() if isinstance(value, str)}
    slim: dict[str, Any] = {}
    for key, value in record.items():
        if key in drop:
            cuts.dropped[key] = None
        elif value is None:
            cuts.nulls = True
        elif isinstance(value, str):
            slim[key] = _shorten(value, cap)
            if slim[key] != value:
                cuts.shortened[key] = None
        elif isinstance(value, dict):
            named = _nested(value, own)
            if named is None:
                cuts.dropped[key] = None
            else:
                slim[key] = named
                if named is not value:
                    cuts.collapsed[key] = next(iter(named))
        elif isinstance(value, list):
            slim[key] = _slim_list(key, value, cap, drop, cuts, depth)
        else:
            slim[key] = value
    return slim


def _tier(key: str) -> int:
    if key in WHERE_KEYS:
        return 1
    if key in ABOUT_KEYS or key.endswith(("_id", "url")):
        return 2
    return 3


def _nested(value: dict[str, Any], own: set[str]) -> Any:
    """A nested object as kept: its naming key when it has one (a user: its login), whole when
    small, None when bulky or when it only repeats the record's own links (GitHub's ``_links``)."""
    for key in NAMING_KEYS:
        if isinstance(value.get(key), (str, int)) and not isinstance(value.get(key), bool):
            return value if len(value) == 1 else {key: value[key]}
    strings = _strings(value)
    if set(strings) <= own or _empty(value):
        return None
    return value if len(json.dumps(value)) <= NESTED_CHARS else None


def _empty(value: Any) -> bool:
    """Nothing in it but zeros, nulls and links (GitHub's reactions to a comment no one reacted to)."""
    if isinstance(value, dict):
        return all(_empty(item) for item in value.values())
    if isinstance(value, list):
        return all(_empty(item) for item in value)
    return not value or (isinstance(value, str) and value.startswith(("http://", "https://")))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _slim_list(key: str, items: list[Any], cap: int, drop: frozenset[str], cuts: Cuts, depth: int) -> list[Any]:
    """A list inside a record: its records slimmed as records (two levels deep at most), its
    strings shortened, and past ``cap`` characters its first items and how many more."""
    if depth < 1 and any(_is_record(item) for item in items):
        return [_slim(item, cap, drop, cuts, depth + 1) if _is_record(item) else item for item in items]
    kept: list[Any] = []
    used = 0
    for item in items:
        item = _shorten(item, cap) if isinstance(item, str) else item
        used += len(json.dumps(item, ensure_ascii=False)) + 1
        if used > cap and kept:
            kept.append(f"… {len(items) - len(kept)} more")
            cuts.shortened[key] = None
            break
        kept.append(item)
    return kept


def _shorten(text: str, cap: int) -> str:
    """``text`` within about ``cap`` characters: its head, or for a diff hunk its first lines and,
    in a third of it, the lines it ends on (a review comment is on its last); cut at an ellipsis."""
    if len(text) <= cap or (len(text) <= WORD_MAX_CHARS and not any(c.isspace() for c in text)):
        return text  # (a link cut short leads nowhere)
    if text.startswith(DIFF_HUNK_START) and "\n" in text:
        head = text[: cap * 2 // 3].rpartition("\n")[0] or text[: cap * 2 // 3]  # (whole lines, when it keeps one)
        tail = text[len(text) - (cap - len(head)) :]
        tail = tail.partition("\n")[2] or tail
        return f"{head}\n…\n{tail}"
    return text[:cap].rstrip() + "…"


def _largest(low: int, high: int, render: Callable[[int], str | None]) -> str | None:
    """The rendering at the largest cap in [low, high] that fits (a bisection), or None."""
    best = render(high)
    if best is not None:
        return best
    best = render(low)
    if best is None:
        return None
    while high - low > max(8, low // 16):  # (to within a sixteenth: a few renderings, not dozens)
        middle = (low + high) // 2
        rendered = render(middle)
        if rendered is None:
            high = middle
        else:
            low, best = middle, rendered
    return best


def _largest_int(low: int, high: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [low, high] with ``fits(n)``, ``fits(low)`` being true (a bisection)."""
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
