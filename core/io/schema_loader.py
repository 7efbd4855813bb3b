"""Loads the JSON Schemas shipped in the `schemas` package (the single source of truth)."""

from __future__ import annotations

import functools
import math
from importlib import resources
from typing import Any

import orjson


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema ``schemas/<name>.schema.json``, parsed once per process."""
    text = resources.files("schemas").joinpath(f"{name}.schema.json").read_bytes()
    schema: dict[str, Any] = orjson.loads(text)
    return schema


@functools.cache
def validator(name: str, *, finite: bool = False) -> Any:
    """A compiled jsonschema validator for ``name`` (imported lazily: it is slow to import).

    ``finite``: a NaN or infinite float is not a number. JSON has none, but TOML (``nan``, ``inf``)
    and a flag's ``float()`` do, and NaN passes every ``minimum`` and ``maximum``.
    """
    import jsonschema

    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    if finite:
        cls = jsonschema.validators.extend(cls, {"type": _finite_type(cls.VALIDATORS["type"])})
    return cls(schema)


def _finite_type(check_type: Any) -> Any:
    """The "type" keyword, refusing a non-finite float where a number is allowed, in words a user reads."""
    from jsonschema.exceptions import ValidationError

    def check(validator: Any, types: Any, instance: Any, schema: Any) -> Any:
        numeric = {"number", "integer"} & set([types] if isinstance(types, str) else types)
        if numeric and isinstance(instance, float) and not math.isfinite(instance):
            yield ValidationError(f"{instance} is not a finite number")
        else:
            yield from check_type(validator, types, instance, schema)

    return check


def first_error(name: str, instance: Any) -> str | None:
    """One readable sentence for the most relevant violation, or None when valid."""
    import jsonschema.exceptions

    errors = list(validator(name).iter_errors(instance))
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    where = best.json_path if best.path else ""
    return f"{where}: {best.message}" if where else best.message
