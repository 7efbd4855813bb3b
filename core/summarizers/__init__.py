"""Summarizers for the summarize strategy: an offline extractive digest, or an OpenAI-compatible model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.errors import ConfigError


def make_summarizer(config: Any) -> Any:
    """The summarizer a MemoryConfig asks for, or None."""
    if config.summarizer_in_use is None:
        return None
    if config.summarizer_in_use == "extractive":
        from core.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    from core.summarizers.chat_client import ChatClient
    from core.summarizers.llm import LLMSummarizer
    from core.summarizers.prompt import DEFAULT_PROMPT

    prompt = DEFAULT_PROMPT
    if config.summary_prompt_file:
        try:
            prompt = Path(config.summary_prompt_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the summary prompt: {exc.strerror}", path=config.summary_prompt_file) from None
    client = ChatClient(
        base_url=config.summarizer_url,
        model=config.summarizer_model,
        api_key_env=config.api_key_env,
        timeout=config.summarizer_timeout,
        retries=config.summarizer_retries,
    )
    return LLMSummarizer(
        client=client,
        prompt=prompt,
        quality_retry=config.quality_retry,
        require_preserved_kinds=tuple(config.require_preserved_kinds),
    )
