"""Summarizers for the summarize strategy: an offline extractive digest, or an OpenAI-compatible model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.summarizers.base import Summarizer


def make_summarizer(config: Any) -> Summarizer | None:
    """The summarizer a MemoryConfig asks for, or None."""
    # A prompt file that cannot be read is a mistake whichever summarizer runs today: said now, not
    # on the day the model summarizer is turned on.
    prompt = _read_prompt(config.summary_prompt_file) if config.summary_prompt_file else None
    if config.summarizer_in_use is None:
        return None
    if config.summarizer_in_use == "extractive":
        from core.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    from core.summarizers.chat_client import ChatClient
    from core.summarizers.llm import LLMSummarizer
    from core.summarizers.prompt import DEFAULT_PROMPT

    client = ChatClient(
        base_url=config.summarizer_url,
        model=config.summarizer_model,
        api_key_env=config.api_key_env,
        timeout=config.summarizer_timeout,
        retries=config.summarizer_retries,
    )
    return LLMSummarizer(
        client=client,
        prompt=prompt if prompt is not None else DEFAULT_PROMPT,
        quality_retry=config.quality_retry,
        require_preserved_kinds=tuple(config.require_preserved_kinds),
    )


def _read_prompt(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the summary prompt: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read the summary prompt: not UTF-8 text (byte {exc.start})", path=path) from None
