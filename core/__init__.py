"""compact's library: read, count and compact LLM transcripts. Never prints.

The names below load on first use (PEP 562): `import core.errors`, which every command does,
then costs nothing, and `compact --help` does not import the whole engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.api import RunOptions, compact_file, compact_source, count_file, open_counter
    from core.config import MemoryConfig, StrategySpec, load_config
    from core.engine.pipeline import CompactionResult, Seams, compact
    from core.errors import CompactError
    from core.io.transcript import read_transcript, write_transcript
    from core.messages import Message

_HOMES = {
    "RunOptions": "core.api",
    "compact_file": "core.api",
    "compact_source": "core.api",
    "count_file": "core.api",
    "open_counter": "core.api",
    "MemoryConfig": "core.config",
    "StrategySpec": "core.config",
    "load_config": "core.config",
    "CompactionResult": "core.engine.pipeline",
    "Seams": "core.engine.pipeline",
    "compact": "core.engine.pipeline",
    "CompactError": "core.errors",
    "read_transcript": "core.io.transcript",
    "write_transcript": "core.io.transcript",
    "Message": "core.messages",
}

__all__ = [
    "CompactError",
    "CompactionResult",
    "MemoryConfig",
    "Message",
    "RunOptions",
    "Seams",
    "StrategySpec",
    "compact",
    "compact_file",
    "compact_source",
    "count_file",
    "load_config",
    "open_counter",
    "read_transcript",
    "write_transcript",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
