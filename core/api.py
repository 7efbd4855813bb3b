"""The library entry points the CLI calls: one call per command."""

from __future__ import annotations

from typing import Any, BinaryIO

from core.config import MemoryConfig
from core.counting import CountCache, MessageCounter, default_cache_path
from core.pipeline import BUDGET, UNLIMITED, CompactionResult, GraphStep, compact
from core.seams import Seams
from core.tokens import EncoderChoice, load_counter
from core.transcript import read_transcript


def open_counter(config: MemoryConfig, *, use_cache: bool = True) -> tuple[MessageCounter, EncoderChoice]:
    counter, choice = load_counter(
        config.encoder_name,
        backend=config.backend,
        chars_per_token=config.chars_per_token,
        implied=config.encoder_implied,
    )
    # The heuristic is cheaper than any lookup; only real encoders use the persistent cache.
    cache = CountCache(default_cache_path()) if use_cache and choice.backend != "heuristic" else None
    return MessageCounter(counter, framing=config.framing, cache=cache), choice


def open_seams(config: MemoryConfig) -> Seams:
    """The store and summarizer the config asks for (each None when not configured)."""
    from core.summarizers import make_summarizer

    store = None
    if config.store:
        from core.store import OffloadStore

        store = OffloadStore.open(config.store, max_bytes=config.store_max_bytes, at_cap=config.store_at_cap)
    return Seams(store=store, summarizer=make_summarizer(config))


def compact_file(
    path: str,
    config: MemoryConfig,
    *,
    mode: str = BUDGET,
    repair: bool = False,
    skip_invalid: bool = False,
    use_cache: bool = True,
    seams: Seams | None = None,
    graph_step: GraphStep | None = None,
    stdin: BinaryIO | None = None,
) -> CompactionResult:
    """Read ``path`` (``-`` for stdin), compact it, and return the messages and the report."""
    transcript = read_transcript(path, skip_invalid=skip_invalid, stdin=stdin)
    counter, choice = open_counter(config, use_cache=use_cache)
    own_seams = seams is None
    if seams is None:
        seams = open_seams(config) if mode != UNLIMITED else Seams()
    try:
        return compact(
            transcript.messages,
            config,
            counter,
            encoder=choice,
            mode=mode,
            repair=repair,
            seams=seams,
            graph_step=graph_step,
            source=transcript.path,
            skipped_lines=transcript.skipped_lines,
        )
    finally:
        if counter.cache is not None:
            counter.cache.close()
        if own_seams and seams.store is not None:
            seams.store.close()


def count_file(path: str, config: MemoryConfig, *, use_cache: bool = True, stdin: BinaryIO | None = None) -> dict[str, Any]:
    """Usage of a transcript without compacting it: the report of an unlimited run."""
    result = compact_file(path, config, mode=UNLIMITED, use_cache=use_cache, stdin=stdin)
    return result.report
