"""Parsing snapshot bytes: orjson first, the standard library for NaN and Infinity.

orjson refuses ``NaN``, ``Infinity`` and number literals beyond a double
(``1e999``), which some JSON writers emit. Rather than one opaque parse
error, such files are parsed again by the standard library, which marks each
of those numbers so validation reports every one with its JSON path. Any other
syntax error is one problem with its line and column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import orjson

from core.graph.findings import Finding, PathPart
from core.graph.model import gc_paused
from core.io import jsonio


class _NonFinite(float):
    """A NaN/Infinity read by the fallback parser, remembering how it was written."""

    __slots__ = ("literal",)
    literal: str


def _non_finite(value: float, literal: str) -> _NonFinite:
    marked = _NonFinite(value)
    marked.literal = literal
    return marked


def _parse_float(text: str) -> float:
    value = float(text)
    return _non_finite(value, text) if math.isinf(value) else value


def _parse_constant(literal: str) -> float:
    return _non_finite(float(literal), literal)


def number_literal(value: float) -> str:
    """How a non-finite number was (or would be) written: NaN, Infinity, -Infinity, 1e999."""
    literal = getattr(value, "literal", None)
    if literal is not None:
        return str(literal)
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _malformed(error: json.JSONDecodeError) -> Finding:
    message = error.msg
    fix = (
        "save the file as UTF-8 without a byte-order mark"
        if "BOM" in message
        else ("fix the JSON syntax there; a snapshot is one JSON object")
    )
    return Finding(
        "malformed-json",
        f"malformed JSON: {message}",
        (),
        fix,
        line=error.lineno,
        column=error.colno,
    )


def _invalid_utf8(data: bytes, error: UnicodeDecodeError) -> Finding:
    """The first byte that is not UTF-8, at its line and column (orjson only says line 1, column 1)."""
    line_start = data.rfind(b"\n", 0, error.start) + 1
    return Finding(
        "malformed-json",
        f"invalid UTF-8 (byte 0x{data[error.start]:02x})",
        (),
        "re-encode the file as UTF-8",
        line=data.count(b"\n", 0, error.start) + 1,
        column=error.start - line_start + 1,
    )


def duplicate_keys(data: bytes, document: Any) -> list[Finding]:
    """A key given twice in one object: parsers keep the last silently, so the first value would vanish.

    The quick test: every colon outside strings separates one member, and
    strings are written back unchanged, so the text has more colons than the
    parsed document written back exactly when members were dropped. Only then
    is the text parsed again to name each repeated key by its path.
    """
    try:
        if data.count(b":") == orjson.dumps(document).count(b":"):
            return []
    except TypeError:
        pass  # a value orjson cannot write back (a marked NaN): look the slow way
    return _find_duplicates(data.decode("utf-8", errors="replace"))


def _find_duplicates(text: str) -> list[Finding]:
    repeated: dict[int, list[str]] = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            repeated[id(obj)] = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
        return obj

    try:
        document = json.loads(text, object_pairs_hook=pairs_hook)
    except ValueError:
        return []
    findings: list[Any] = []
    stack: list[tuple[Any, tuple[PathPart, ...]]] = [(document, ())]
    while stack and len(findings) < len(repeated):
        value, where = stack.pop()
        if isinstance(value, dict):
            for key in dict.fromkeys(repeated.get(id(value), ())):
                findings.append(Finding(
                    "duplicate-key", f"key {key!r} appears more than once in this object; readers keep only "
                    "the last value", (*where, key), "keep one of them, merging their values",
                ))
            stack.extend((item, (*where, key)) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, (*where, index)) for index, item in enumerate(value))
    return findings


def walk_non_finite(
    value: Any, parts: tuple[PathPart, ...]
) -> Iterator[tuple[tuple[PathPart, ...], float]]:
    """Every non-finite float inside ``value`` with its path."""
    stack = [(value, parts)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, float):
            if not math.isfinite(current):
                yield where, current
        elif isinstance(current, dict):
            stack.extend((item, (*where, key)) for key, item in reversed(current.items()))
        elif isinstance(current, list):
            stack.extend(
                (item, (*where, index)) for index, item in reversed(list(enumerate(current)))
            )


def _exact(data: bytes, fast: Any) -> Any:
    """The document parsed again by the standard library; ``fast`` if that cannot (4,300+ digits)."""
    try:
        return json.loads(data.decode("utf-8"), parse_float=_parse_float)
    except (RecursionError, ValueError):
        return fast


def parse_json(data: bytes) -> tuple[Any, Finding | None, bool]:
    """(document, malformed-JSON problem or None, whether non-finite numbers were seen).

    orjson refuses NaN and Infinity outright. Files written by tools that emit
    them are parsed again with the standard library, which marks each such
    number so validation can name its path instead of failing the whole file.
    """
    try:
        with gc_paused():
            document = orjson.loads(data)
            if not jsonio.holds_rounded_integer(document):
                return document, None, False
            # orjson read an integer past 64 bits as a float: the standard library keeps it exact.
            return _exact(data, document), None, False
    except orjson.JSONDecodeError as strict_error:
        if "depth limit" in strict_error.msg:
            return None, _malformed(strict_error), False  # the standard library would overflow the stack
        try:
            document = json.loads(
                data.decode("utf-8"), parse_constant=_parse_constant, parse_float=_parse_float
            )
        except json.JSONDecodeError as error:
            return None, _malformed(error), False
        except UnicodeDecodeError as error:
            return None, _invalid_utf8(data, error), False
        except (RecursionError, ValueError):  # (ValueError: an integer of more than 4,300 digits)
            return None, _malformed(strict_error), False
        # An integer past a double's range is valid JSON, read exactly; as a weight it is non-finite. orjson
        # names only the first number it refuses: a NaN before such an integer hides it, so look every time.
        huge = _mark_huge_weights(document)
        if huge or next(walk_non_finite(document, ()), None) is not None:
            return document, None, True
        if "infinity when parsed as double" in strict_error.msg:
            return document, None, False
        return None, _malformed(strict_error), False


def _mark_huge_weights(document: Any) -> bool:
    """Mark each relationship weight that is an integer beyond a double as non-finite; whether there was one."""
    relationships = document.get("relationships") if isinstance(document, dict) else None
    found = False
    for item in relationships if isinstance(relationships, list) else ():
        weight = item.get("weight") if isinstance(item, dict) else None
        if type(weight) is int:
            try:
                float(weight)
            except OverflowError:
                literal = str(weight)
                shown = literal if len(literal) <= 24 else f"{literal[:20]}… ({len(literal.lstrip('-'))} digits)"
                item["weight"] = _non_finite(math.inf if weight > 0 else -math.inf, shown)
                found = True
    return found
