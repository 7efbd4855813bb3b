"""The library entry points the CLI calls: one call per command."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from core.config import MemoryConfig
from core.counting.counter import (
    CountCache,
    MessageCounter,
    Progress,
    default_cache_path,
    run_memo_enabled,
)
from core.counting.tokenizers import EncoderChoice, bpe_available, load_counter
from core.engine.pipeline import BUDGET, UNLIMITED, CompactionResult, GraphStep, compact
from core.engine.seams import Seams
from core.io import jsonio
from core.io.transcript import serialise
from core.messages import Message
from core.report import CompressionReport, FormatReport
from core.run_cache import RunCache, run_key


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

    # The summarizer first: its checks (prompt file, URL, model) fail before a store file is created.
    summarizer = make_summarizer(config)
    store = None
    if config.store:
        from core.store import OffloadStore

        store = OffloadStore.open(config.store, max_bytes=config.store_max_bytes, at_cap=config.store_at_cap,
                                  timeout=config.store_timeout)
        try:
            store.check_writable()  # a read-only, full or locked store fails the run here, once
        except BaseException:
            store.close()
            raise
    return Seams(store=store, summarizer=summarizer)


@contextlib.contextmanager
def scratch_store(config: MemoryConfig) -> Iterator[MemoryConfig]:
    """For a dry run: the same config, its store replaced by a throwaway copy (the real one is not written)."""
    if not config.store:
        yield config
        return
    from core.store import OffloadStore, StoreError

    real = Path(config.store)
    with tempfile.TemporaryDirectory(prefix="compact-dry-run-") as folder:
        copy = Path(folder) / "store.sqlite"
        if real.exists():
            OffloadStore.open(real, create=False).close()  # the real run's checks: a bad store is an error
            source = sqlite3.connect(f"{real.resolve().as_uri()}?mode=ro", uri=True)
            target = sqlite3.connect(copy)
            try:
                source.backup(target)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the store: {exc}", path=str(real)) from None
            finally:
                source.close()
                target.close()
        elif not real.parent.is_dir():
            raise StoreError("the store's folder does not exist", path=str(real), fix="create the folder first")
        yield dataclasses.replace(config, store=str(copy))


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
    progress: Progress | None = None,
    memo_ok: bool = True,
    source_format: str | None = None,
    target_format: str | None = None,
) -> CompactionResult:
    """Read ``path`` (``-`` for stdin) in any format, compact it, and return the messages and the report.

    ``source_format`` forces the input's format (detected otherwise);
    ``target_format`` converts the output (the input's format otherwise).
    """
    from core import formats

    memo: tuple[RunCache, bytes] | None = None  # where to store this run's result
    if (
        use_cache
        and memo_ok
        and run_memo_enabled()
        and seams is None
        and graph_step is None
        and path != "-"
        and os.path.isfile(path)  # a pipe would be used up by hashing it
        and not (config.store or config.summarizer_in_use == "openai")
    ):
        found = _memo_lookup(path, config, mode=mode, repair=repair, skip_invalid=skip_invalid,
                             formats=(source_format, target_format))
        if isinstance(found, CompactionResult):
            return found
        memo = found
    transcript = formats.read(path, source_format=source_format, skip_invalid=skip_invalid, stdin=stdin,
                              max_line_bytes=config.max_line_bytes)
    if transcript.format != formats.DATASET:
        _check_keep_lines(config, transcript.messages, transcript.skipped_lines, transcript.path)
    if transcript.format == formats.DATASET and target_format not in (None, formats.DATASET):
        from core.errors import ConfigError

        raise ConfigError("--to cannot convert a conversation-per-line dataset", fix="leave out --to")
    counter, choice = open_counter(config, use_cache=use_cache)
    counter.progress = progress
    own_seams = seams is None
    if seams is None:
        seams = open_seams(config) if mode != UNLIMITED else Seams()
    try:
        if transcript.format == formats.DATASET:
            return _compact_dataset(transcript, config, counter, choice, mode=mode, repair=repair,
                                    skip_invalid=skip_invalid, seams=seams)
        result = compact(
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
            turn_boundary=bool({transcript.format, target_format} & formats.USER_FIRST),
        )
        target = target_format or transcript.format
        losses: list[dict[str, Any]] = []
        if target != transcript.format:
            items, losses = formats.convert(transcript, result.messages, target)
            result.writer = lambda _messages: formats.serialise_lines(items)
        elif transcript.format != formats.OPENAI:
            result.writer = lambda messages: formats.write(transcript, messages)
        report = result.compression
        if report is None:  # (compact always reports; only a dataset's result has no CompressionReport)
            raise AssertionError("compact returned no report")
        # The pipeline cannot know the formats: it completes the report here, before anything reads it.
        report = result.compression = dataclasses.replace(
            report, format=FormatReport(transcript.format, target, losses)
        )
        if transcript.format == target == formats.OPENAI and memo is not None and not report.skipped_lines:
            cache, key = memo
            cache.put(key, b"".join(bytes(chunk) for chunk in serialise(result.messages)), report.to_dict())
        return result
    finally:
        if memo is not None:
            memo[0].close()
        if counter.cache is not None:
            counter.cache.close()
        if own_seams and seams.store is not None:
            seams.store.close()


def _check_keep_lines(config: MemoryConfig, messages: Any, skipped: Any, path: str) -> None:
    from core.config import check_keep_lines

    check_keep_lines(config, [m.line for m in messages] + [s["line"] for s in skipped], path)


def _compact_dataset(decoded: Any, config: MemoryConfig, counter: MessageCounter, choice: Any, *, mode: str,
                     repair: bool, skip_invalid: bool, seams: Seams) -> CompactionResult:
    """Each conversation of a dataset compacted on its own budget; the report has a row per conversation."""
    from core.batch.dataset_run import DatasetCompactor

    compactor = DatasetCompactor(decoded.path, config, counter=counter, encoder=choice, mode=mode, repair=repair,
                                 skip_invalid=skip_invalid, seams=seams)
    output = [compactor.line(line.number, line.to_bytes()) for line in decoded.lines]
    return CompactionResult(messages=[], dataset_report=compactor.report(),
                            writer=lambda _messages: (chunk for line in output for chunk in (line, b"\n")))


def _memo_lookup(
    path: str, config: MemoryConfig, *, mode: str, repair: bool, skip_invalid: bool,
    formats: tuple[str | None, str | None] = (None, None),
) -> CompactionResult | tuple[RunCache, bytes] | None:
    """A stored result for this exact run, or the cache and key to store it under (canonical runs only)."""
    try:
        settings = {"config": config.to_dict(), "mode": mode, "repair": repair, "skip_invalid": skip_invalid,
                    "bpe": bpe_available(), "formats": list(formats)}
        key = run_key(path, settings)
    except OSError:
        return None  # the reader reports a missing or unreadable file properly
    cache = RunCache(default_cache_path())
    hit = cache.get(key)
    if hit is None:
        return cache, key
    output, stored = hit
    try:
        report = CompressionReport.from_dict(stored)
    except (TypeError, KeyError):  # a report of another shape (an older version wrote it): run again
        return cache, key
    cache.close()
    messages = [Message(data=jsonio.loads(line), line=None, source=line) for line in output.splitlines()]
    return CompactionResult(messages=messages, compression=report, workspace=None)


def count_file(path: str, config: MemoryConfig, *, use_cache: bool = True, stdin: BinaryIO | None = None) -> dict[str, Any]:
    """Usage of a transcript without compacting it: the report of an unlimited run."""
    result = compact_file(path, config, mode=UNLIMITED, use_cache=use_cache, stdin=stdin)
    return result.report
