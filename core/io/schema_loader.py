"""Loads the JSON Schemas shipped in the `schemas` package (the single source of truth)."""

from __future__ import annotations

import functools
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
def validator(name: str) -> Any:
    """A compiled jsonschema validator for ``name`` (imported lazily: it is slow to import)."""
    import jsonschema

    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def first_error(name: str, instance: Any) -> str | None:
    """One readable sentence for the most relevant violation, or None when valid."""
    import jsonschema.exceptions

    errors = list(validator(name).iter_errors(instance))
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    where = best.json_path if best.path else ""
    return f"{where}: {best.message}" if where else best.message
