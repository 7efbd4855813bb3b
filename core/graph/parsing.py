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


def parse_json(data: bytes) -> tuple[Any, Finding | None, bool]:
    """(document, malformed-JSON problem or None, whether non-finite numbers were seen).

    orjson refuses NaN and Infinity outright. Files written by tools that emit
    them are parsed again with the standard library, which marks each such
    number so validation can name its path instead of failing the whole file.
    """
    try:
        with gc_paused():
            return orjson.loads(data), None, False
    except orjson.JSONDecodeError as strict_error:
        try:
            document = json.loads(
                data.decode("utf-8"), parse_constant=_parse_constant, parse_float=_parse_float
            )
        except json.JSONDecodeError as error:
            return None, _malformed(error), False
        except UnicodeDecodeError:
            return None, _malformed(strict_error), False
        if next(walk_non_finite(document, ()), None) is not None:
            return document, None, True
        return None, _malformed(strict_error), False
