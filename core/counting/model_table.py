"""Common models: their context windows and the encodings that count for them.

Anthropic and open-weight models have no public tiktoken encoding; their rows
use cl100k_base as an approximation (README, "Token counting").
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ENCODING = "cl100k_base"
KNOWN_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base", "r50k_base")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    window: int
    encoding: str
    approximate: bool = False


def _rows() -> dict[str, ModelInfo]:
    rows = [
        ("gpt-5", 400_000, "o200k_base"),
        ("gpt-5-mini", 400_000, "o200k_base"),
        ("gpt-5-nano", 400_000, "o200k_base"),
        ("gpt-4.1", 1_047_576, "o200k_base"),
        ("gpt-4.1-mini", 1_047_576, "o200k_base"),
        ("gpt-4.1-nano", 1_047_576, "o200k_base"),
        ("gpt-4o", 128_000, "o200k_base"),
        ("gpt-4o-mini", 128_000, "o200k_base"),
        ("o1", 200_000, "o200k_base"),
        ("o3", 200_000, "o200k_base"),
        ("o3-mini", 200_000, "o200k_base"),
        ("o4-mini", 200_000, "o200k_base"),
        ("gpt-4-turbo", 128_000, "cl100k_base"),
        ("gpt-4", 8_192, "cl100k_base"),
        ("gpt-4-32k", 32_768, "cl100k_base"),
        ("gpt-3.5-turbo", 16_385, "cl100k_base"),
    ]
    approximate = [
        # 1M natively (Anthropic's models overview and context-windows pages, 2026): the 5 family,
        # and Opus 4.6-4.8 and Sonnet 4.6; the other 4.x models keep 200k.
        ("claude-fable-5", 1_000_000),
        ("claude-mythos-5", 1_000_000),
        ("claude-opus-5", 1_000_000),
        ("claude-sonnet-5", 1_000_000),
        ("claude-haiku-5", 1_000_000),
        ("claude-opus-4-6", 1_000_000),
        ("claude-opus-4-7", 1_000_000),
        ("claude-opus-4-8", 1_000_000),
        ("claude-sonnet-4-6", 1_000_000),
        ("claude-opus-4", 200_000),
        ("claude-sonnet-4", 200_000),
        ("claude-haiku-4", 200_000),
        ("claude-3-7-sonnet", 200_000),
        ("claude-3-5-sonnet", 200_000),
        ("claude-3-5-haiku", 200_000),
        ("llama-3.1", 128_000),
        ("llama-3.3", 128_000),
        ("qwen2.5", 32_768),
        ("mistral-large", 128_000),
        ("gemini-2.5-pro", 1_048_576),
    ]
    table = {name: ModelInfo(name, window, enc) for name, window, enc in rows}
    for name, window in approximate:
        table[name] = ModelInfo(name, window, DEFAULT_ENCODING, approximate=True)
    return table


MODELS: dict[str, ModelInfo] = _rows()


def lookup_model(name: str) -> ModelInfo | None:
    """The row for ``name``, or for its longest known prefix (``gpt-4o-2024-08-06`` → gpt-4o)."""
    if name in MODELS:
        return MODELS[name]
    best: ModelInfo | None = None
    for known, info in MODELS.items():
        if name.startswith((known + "-", known + ".")) and (best is None or len(known) > len(best.name)):
            best = info
    return best


def nearest_models(name: str, count: int = 3) -> list[str]:
    """The known model names closest to ``name`` (difflib), for an unknown --model."""
    import difflib

    return difflib.get_close_matches(name.lower(), list(MODELS), n=count, cutoff=0.5)
