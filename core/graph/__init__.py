"""The working graph: model, validation, merge and import, caps, rendering.

Pure library code: nothing here prints, and jsonschema is imported only when a
snapshot actually needs it (on items the fast schema check cannot accept).

The public names (``core.graph.public`` lists them) load on first use, so
importing ``core.graph.options``, as the CLI does at start-up for its
choices, does not load the graph code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.graph.public import *  # what __getattr__ serves, for type checkers


def __getattr__(name: str) -> Any:
    public = importlib.import_module("core.graph.public")
    if name not in public.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(public, name)
    globals()[name] = value
    return value
