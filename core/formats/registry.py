"""The format registry: one module per format, each declaring ``CODEC``, all listed here.

The table is built on first use (a run reading OpenAI chat imports no other
codec) and refuses a name registered twice, as the strategy registry does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.errors import InputError
from core.formats.base import Codec

_REGISTRY: dict[str, Codec] | None = None


def build(found: Iterable[Codec]) -> dict[str, Codec]:
    """The codecs by name, in the order given; a name registered twice is an error."""
    registry: dict[str, Codec] = {}
    for codec in found:
        if codec.name in registry:
            raise RuntimeError(f"format name {codec.name!r} registered twice")
        registry[codec.name] = codec
    return registry


def codecs() -> dict[str, Codec]:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = build(module.CODEC for module in _modules())
    return _REGISTRY


def _modules() -> tuple[Any, ...]:
    # Most specific first: detection picks the first whose evidence a line shows.
    from core.formats import (
        anthropic,
        claude_code,
        codex,
        codex_exec,
        dataset,
        gemini_chat,
        gemini_session,
        gemini_stream,
        openai_chat,
        pi,
        responses,
        sharegpt,
    )

    return (claude_code, codex, codex_exec, pi, gemini_stream, gemini_session, gemini_chat, responses, anthropic, sharegpt, dataset, openai_chat)


def names() -> list[str]:
    return list(codecs())


def get(name: str) -> Codec:
    found = codecs().get(name)
    if found is None:
        raise InputError(f"unknown format {name!r}", fix=f"use one of {', '.join(names())}")
    return found


def known_formats() -> str:
    return ", ".join(f"{c.title} ({c.name})" for c in codecs().values())
