"""JSON values read and written exactly, fast with orjson, by the standard library where orjson cannot.

orjson reads an integer past 64 bits as a float (1111111111111111111111111
becomes 1.1111111111111111e+24), refuses a lone surrogate escape ("\\ud800",
which truncated emoji leave in real logs and JSON allows), and refuses to
write values nested deeper than 254 levels, integers past 64 bits and strings
holding a lone surrogate. Each of those goes through the standard ``json``
module instead, so every field of a message survives a rewrite unchanged.
NaN and Infinity stay refused, as orjson refuses them.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import orjson

# The byte-order mark some editors put before JSON or JSONL; readers skip it.
UTF8_BOM = b"\xef\xbb\xbf"
_DEEP_RECURSION = 20_000  # what the standard library may recurse while writing (orjson reads 1024 deep)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The JSON value of ``data``; raises orjson.JSONDecodeError (a json.JSONDecodeError) when malformed."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in exc.msg:
            raise
        return _stdlib_loads(data, exc)
    if type(value) is not str and holds_rounded_integer(value):
        return _stdlib_loads(data, None)
    return value


# orjson reads an integer literal past 64 bits as a float of the same size: only such a float (an
# integer value from 2**63 up) can stand for digits it lost. Looking for one in the parsed value
# costs a few steps a message; scanning the text for long digit runs cost every byte.
_ROUNDED = float(2**63)


def holds_rounded_integer(value: Any) -> bool:
    """Whether orjson may have read an integer past 64 bits in ``value`` as a float."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and (item >= _ROUNDED or item <= -_ROUNDED) and item.is_integer():
            return True
    return False


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD: what UTF-8-only consumers (tokenizers in Rust,
    SQLite) can take. Valid text comes back as it is."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def dumps(value: Any, *, sort_keys: bool = False, indent: bool = False) -> bytes:
    """Compact JSON bytes (orjson's layout), or indented by two spaces; a lone surrogate is written
    back as its \\u escape."""
    try:
        return orjson.dumps(value, option=(orjson.OPT_SORT_KEYS if sort_keys else 0)
                            | (orjson.OPT_INDENT_2 if indent else 0))
    except orjson.JSONEncodeError:
        pass
    with deep_recursion():
        text = json.dumps(value, ensure_ascii=False, separators=(",", ": ") if indent else (",", ":"),
                          indent=2 if indent else None, sort_keys=sort_keys, allow_nan=False)
    # Lone surrogates can only sit inside strings; backslashreplace writes them as \udXXX escapes.
    return text.encode("utf-8", "backslashreplace")


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Let the standard library's json walk values as deep as orjson reads them (1,024 levels)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _DEEP_RECURSION))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _stdlib_loads(data: bytes | bytearray | memoryview | str, first: orjson.JSONDecodeError | None) -> Any:
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            if first is not None:
                raise first from None
            raise
    try:
        with deep_recursion():
            return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise orjson.JSONDecodeError(exc.msg, exc.doc, exc.pos) from None
    except RecursionError:
        raise orjson.JSONDecodeError("depth limit exceeded", text, 0) from None
    except ValueError as exc:  # NaN or Infinity, or an integer of more than 4,300 digits
        raise orjson.JSONDecodeError(str(exc).split(";")[0], text, 0) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def kind_name(value: Any) -> str | None:
    """How an error message names a JSON value's type ("an array", "a number"); None for another type."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: a bool is an int
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return None
