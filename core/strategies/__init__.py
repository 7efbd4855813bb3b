"""The strategy registry: one module per strategy, all listed here."""

from __future__ import annotations

import difflib

from core.errors import ConfigError
from core.strategies import (
    clamp_oversized_messages,
    clear_tool_results,
    deduplicate_file_reads,
    drop_observations,
    drop_old_thinking,
    drop_turns,
    offload,
    sliding_window,
    summarize,
    supersede_plans,
)
from core.strategies.base import Param, StrategyInfo

_MODULES = (
    offload,
    summarize,
    deduplicate_file_reads,
    supersede_plans,
    clear_tool_results,
    clamp_oversized_messages,
    sliding_window,
    drop_observations,
    drop_turns,
    drop_old_thinking,
)


def _build() -> dict[str, StrategyInfo]:
    registry: dict[str, StrategyInfo] = {}
    for module in _MODULES:
        info: StrategyInfo = module.STRATEGY
        for key in (info.name, info.alias):
            if key in registry:
                raise RuntimeError(f"strategy name {key!r} registered twice")
            registry[key] = info
    return registry


REGISTRY = _build()
NAMES = tuple(m.STRATEGY.name for m in _MODULES)


def get(name: str) -> StrategyInfo:
    """The strategy called ``name`` (snake_case, or the seed's CamelCase alias)."""
    try:
        return REGISTRY[name]
    except KeyError:
        near = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise ConfigError(f"unknown strategy {name!r}", fix=f"{hint}known: {', '.join(NAMES)}") from None


__all__ = ["NAMES", "REGISTRY", "Param", "StrategyInfo", "get"]
