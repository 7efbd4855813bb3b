"""Validators for snapshot items, built from the snapshot schema (loaded by core.io.schema_loader).

The schema is the single source of truth for the shape of a snapshot.
jsonschema takes 20-50 µs per item, over half a minute for a 600k-item snapshot, so
each item type gets two checks built from the same schema text:

- a *fast predicate*, compiled here from the handful of keywords the schema
  uses (``type``, ``required``, ``properties``, ``additionalProperties``,
  ``items``, ``minLength``, ``maxLength``, local ``$ref``). It answers only
  "certainly valid". A keyword it does not know disables it for that item
  type, so a schema edit can make validation slower, never wrong;
- the jsonschema validator, run only on items the predicate did not accept,
  which decides and says what is wrong.

A Hypothesis test holds the two to the same verdicts.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from core.io import jsonio
from core.io.schema_loader import load_schema

# Names for core.io.schema_loader.load_schema (schemas/<name>.schema.json).
SNAPSHOT_SCHEMA = "graph-snapshot"
REPORT_SCHEMA = "graph-report"

Predicate = Callable[[Any], bool]

# Keywords that never change a verdict.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$schema",
        "$id",
        "$defs",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)




class _Unsupported(Exception):
    """The schema uses a keyword the fast predicate does not implement."""


_KNOWN = frozenset(
    {
        "type",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minLength",
        "maxLength",
        "$ref",
    }
)
_TYPE_EXPRESSIONS = {
    "string": "isinstance({v}, str)",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "integer": "((isinstance({v}, int) and not isinstance({v}, bool))"
    " or (isinstance({v}, float) and {v}.is_integer()))",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "boolean": "isinstance({v}, bool)",
    "null": "({v} is None)",
}


class _Compiler:
    """Turns a schema into the source of one Python predicate, then into the function.

    Generated code instead of nested closures: a 600k-item snapshot needs
    about one microsecond per item, which closures calling closures miss by
    an order of magnitude.
    """

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.functions: list[str] = []

    def build(self, schema: Any) -> Predicate:
        name = self._function(schema)
        namespace: dict[str, Any] = {}
        exec("\n\n".join(self.functions), namespace)  # noqa: S102  the source is generated from our own schema
        predicate: Predicate = namespace[name]
        return predicate

    def _function(self, schema: Any) -> str:
        name = f"_check_{len(self.functions)}"
        self.functions.append("")  # reserve the slot: nested helpers come after
        body = self._expression(schema, "value", depth=0)
        self.functions[int(name.rsplit("_", 1)[1])] = f"def {name}(value):\n    return {body}"
        return name

    def _expression(self, schema: Any, v: str, depth: int) -> str:
        if depth > 32:
            raise _Unsupported("$ref nesting too deep")
        if schema is True or schema == {}:
            return "True"
        if schema is False:
            return "False"
        if not isinstance(schema, Mapping) or set(schema) - _ANNOTATIONS - _KNOWN:
            raise _Unsupported(str(schema))
        terms: list[str] = []
        if "$ref" in schema:
            terms.append(self._expression(_resolve(self.root, schema["$ref"]), v, depth + 1))
        if "type" in schema:
            names = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
            terms.append("(" + " or ".join(_TYPE_EXPRESSIONS[n].format(v=v) for n in names) + ")")
        if "minLength" in schema:
            terms.append(f"(not isinstance({v}, str) or len({v}) >= {int(schema['minLength'])})")
        if "maxLength" in schema:
            terms.append(f"(not isinstance({v}, str) or len({v}) <= {int(schema['maxLength'])})")
        if "items" in schema:
            terms.append(f"{self._array(schema['items'])}({v})")
        if {"required", "properties", "additionalProperties"} & set(schema):
            terms.append(f"{self._object(schema)}({v})")
        return "(" + " and ".join(terms) + ")" if terms else "True"

    def _array(self, items: Any) -> str:
        index = len(self.functions)
        self.functions.append("")
        check = self._expression(items, "item", depth=0)
        self.functions[index] = (
            f"def _check_{index}(value):\n"
            "    if not isinstance(value, list):\n        return True\n"
            f"    for item in value:\n        if not {check}:\n            return False\n"
            "    return True"
        )
        return f"_check_{index}"

    def _object(self, schema: Mapping[str, Any]) -> str:
        index = len(self.functions)
        self.functions.append("")
        lines = [
            f"def _check_{index}(value):",
            "    if not isinstance(value, dict):",
            "        return True",
        ]
        lines.append("    for key, item in value.items():")
        keyword = "if"
        for key, sub in schema.get("properties", {}).items():
            lines.append(f"        {keyword} key == {key!r}:")
            check = self._expression(sub, "item", 0)
            lines.append(f"            if not {check}:\n                return False")
            keyword = "elif"
        extra = schema.get("additionalProperties", True)
        extra_check = "True" if extra is True else self._expression(extra, "item", 0)
        if extra_check != "True":
            prefix = "        else:" if keyword == "elif" else "        if True:"
            lines.append(prefix)
            lines.append(f"            if not {extra_check}:\n                return False")
        elif keyword == "if":
            lines.append("        pass")
        required = " and ".join(f"{key!r} in value" for key in schema.get("required", ()))
        lines.append(f"    return {required or 'True'}")
        self.functions[index] = "\n".join(lines)
        return f"_check_{index}"


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise _Unsupported(ref)
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def compile_predicate(root: Mapping[str, Any], subschema: Any) -> Predicate | None:
    """A fast "certainly valid" test for ``subschema``; None when the schema is beyond it."""
    try:
        return _Compiler(root).build(subschema)
    except (_Unsupported, KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """One schema violation inside an item, relative to the item."""

    parts: tuple[str | int, ...]
    message: str
    fix: str


class ItemChecker:
    """Checks values against one (sub)schema of a schema file."""

    def __init__(self, root: Mapping[str, Any], subschema: Mapping[str, Any]) -> None:
        self._schema = {"$defs": root.get("$defs", {}), **subschema}
        self._validator: Any = None
        self.fast: Predicate | None = compile_predicate(root, subschema)

    def _jsonschema(self) -> Any:
        if self._validator is None:
            from jsonschema import Draft202012Validator

            self._validator = Draft202012Validator(self._schema)
        return self._validator

    def is_valid(self, value: Any) -> bool:
        if self.fast is not None and self.fast(value):
            return True
        return bool(self._jsonschema().is_valid(value))

    def issues(self, value: Any) -> list[SchemaIssue]:
        """Nothing when valid; otherwise every violation, each with its path and fix."""
        if self.fast is not None and self.fast(value):
            return []
        errors = sorted(
            self._jsonschema().iter_errors(value), key=lambda e: list(map(str, e.absolute_path))
        )
        issues: list[SchemaIssue] = []
        seen: set[tuple[Any, ...]] = set()
        for error in errors:
            for issue in _describe(error):
                key = (issue.parts, issue.message)
                if key not in seen:
                    seen.add(key)
                    issues.append(issue)
        return issues


def json_type(value: Any) -> str:
    return jsonio.kind_name(value) or type(value).__name__


def _describe(error: Any) -> Iterator[SchemaIssue]:
    parts = tuple(error.absolute_path)
    keyword = error.validator
    instance, expected = error.instance, error.validator_value
    if keyword == "required":
        for name in expected:
            if isinstance(instance, dict) and name not in instance:
                yield SchemaIssue(parts, f"missing required field {name!r}", f'add "{name}"')
    elif keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = list(error.schema.get("properties", {}))
        for key in instance:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                fix = (
                    f'did you mean "{close[0]}"?'
                    if close
                    else "remove it; allowed: " + ", ".join(allowed)
                )
                yield SchemaIssue((*parts, key), f"unknown field {key!r}", fix)
    elif keyword == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(("an " if n[0] in "aeio" else "a ") + n for n in names)
        yield SchemaIssue(parts, f"expected {wanted}, found {json_type(instance)}", f"use {wanted}")
    elif keyword == "minLength" and expected == 1:
        yield SchemaIssue(parts, "empty string", "use a non-empty string")
    else:
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
        yield SchemaIssue(parts, message, f"see schemas/{SNAPSHOT_SCHEMA}.schema.json")


@cache
def snapshot_checkers() -> tuple[ItemChecker, ItemChecker, ItemChecker]:
    """(top level without descending into the arrays, one node, one relationship)."""
    root = load_schema(SNAPSHOT_SCHEMA)
    shell = dict(root)
    shell_properties = {}
    for key, sub in root["properties"].items():
        shell_properties[key] = {k: v for k, v in sub.items() if k != "items"}
    shell["properties"] = shell_properties
    defs = root["$defs"]
    return (
        ItemChecker(root, shell),
        ItemChecker(root, defs["node"]),
        ItemChecker(root, defs["relationship"]),
    )
