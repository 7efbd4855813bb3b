"""The library entry points the CLI calls: one call per command."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from core.config import MemoryConfig
from core.counting.counter import (
    CountCache,
    MessageCounter,
    Progress,
    default_cache_path,
    run_memo_enabled,
)
from core.counting.tokenizers import EncoderChoice, TokenCounter, bpe_available, load_counter
from core.engine.pipeline import BUDGET, FULL, UNLIMITED, CompactionResult, compact
from core.engine.seams import Seams
from core.errors import CheckFailed, ConfigError
from core.io import jsonio
from core.io.staged import is_regular_file
from core.io.transcript import LineRef, open_input, serialise
from core.messages import Message, countable_text, held_message
from core.report import CompressionReport, DatasetReport, FormatReport
from core.run_cache import RunCache, run_key

if TYPE_CHECKING:  # reading a transcript loads the formats; --help and a run memo hit need not
    from core.formats.base import Decoded

OPENAI = "openai"  # = core.formats.OPENAI (imported lazily there)
DATASET = "dataset"  # = core.formats.DATASET


@functools.lru_cache(maxsize=8)
def _token_counter(encoder: str, backend: str, chars_per_token: float, implied: bool) -> tuple[TokenCounter, EncoderChoice]:
    """The encoder, loaded once per process (a batch worker compacts many inputs with it)."""
    return load_counter(encoder, backend=backend, chars_per_token=chars_per_token, implied=implied)


def open_counter(config: MemoryConfig, *, use_cache: bool = True) -> tuple[MessageCounter, EncoderChoice]:
    counter, choice = _token_counter(config.encoder_name, config.backend, config.chars_per_token,
                                     config.encoder_implied)
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
    from core.store.database import DEFAULT_TIMEOUT, connect, missing_folder

    real = Path(config.store)
    with tempfile.TemporaryDirectory(prefix="compact-dry-run-") as folder:
        copy = Path(folder) / "store.sqlite"
        if real.exists():
            # The real run's checks (a bad store is an error), then a copy read as recall reads it.
            OffloadStore.open(real, read_only=True).close()
            source = connect(str(real), timeout=DEFAULT_TIMEOUT, create=False, read_only=True)
            target = sqlite3.connect(copy)
            try:
                source.backup(target)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the store: {exc}", path=str(real)) from None
            finally:
                source.close()
                target.close()
        elif not real.parent.is_dir():
            raise missing_folder(real)
        yield dataclasses.replace(config, store=str(copy))


@dataclass(frozen=True)
class GraphOptions:
    """--graph and its companions: the working graph rendered into each result (plain, picklable data)."""

    snapshot: str
    merge: str | None = None
    policy: str = "merge"
    weights: str = "incoming"
    max_nodes: int = 64
    max_relationships: int = 128

    def digest(self) -> dict[str, Any]:
        """The options and the blake2b of the files they name: what the rendered graph depends on."""
        files = [path for path in (self.snapshot, self.merge) if path is not None]
        return {**dataclasses.asdict(self), "blake2b": [file_digest(path) for path in files]}


@dataclass(frozen=True)
class RunOptions:
    """How to compact one source, besides its settings: plain data, its combinations checked once, before any work."""

    mode: str = BUDGET
    repair: bool = False
    skip_invalid: bool = False
    use_cache: bool = True
    memo_ok: bool = True  # False: never answer from, nor store in, the run memo
    source_format: str | None = None  # --from: read as this format instead of detecting it
    target_format: str | None = None  # --to: write in this format (the input's otherwise)
    check_for: str | None = None  # refuse a result this provider would reject
    graph: GraphOptions | None = None
    dry_run: bool = False  # the store is a throwaway copy; the caller writes nothing
    # batch: a `tool:` keep rule that pins nothing in this input is noted on the result, not an error
    note_unpinned_tools: bool = False

    def __post_init__(self) -> None:
        from core.analysis.provider_check import PROVIDERS

        if self.check_for is not None and self.check_for not in PROVIDERS:  # before a summarizer may cost money
            raise ConfigError(f"unknown provider {self.check_for!r} for --check-for",
                              fix=f"use one of {', '.join(PROVIDERS)}")
        check_formats(self.source_format, self.target_format)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        graph = data.get("graph")
        return cls(**{**data, "graph": GraphOptions(**graph) if graph is not None else None})

    @staticmethod
    def mode_of(*, full: bool, unlimited: bool) -> str:
        if full and unlimited:
            raise ConfigError("--full and --unlimited are mutually exclusive", fix="give one of them")
        return FULL if full else UNLIMITED if unlimited else BUDGET

    def one_transcript_option(self) -> str | None:
        """The option given that works on one transcript only (a dataset is refused under it)."""
        return ("--dry-run" if self.dry_run else "--check-for" if self.check_for is not None
                else "--graph" if self.graph is not None else None)


def check_formats(*given: str | None) -> None:
    """Each format named (None: not given) is one compact reads and writes."""
    from core import formats

    for name in given:
        if name is not None and name not in formats.names():
            raise ConfigError(f"unknown format {name!r}", fix=f"use one of {', '.join(formats.names())}")


class ProviderRejected(CheckFailed):
    """--check-for: the provider would reject the result, whose problems these are; nothing was written."""

    def __init__(self, provider: str, problems: list[Any]) -> None:
        from core.analysis.provider_check import REPAIRABLE

        first = problems[0]
        repair = "; --repair drops orphan calls and results" if any(p.code in REPAIRABLE for p in problems) else ""
        super().__init__(f"the compacted transcript would be rejected by {provider} ({len(problems)} problem(s)); "
                         "nothing was written", fix=f"first, {first.in_result()}: {first.message}{repair}")
        self.provider = provider
        self.problems = problems


Write = Callable[[Iterable[bytes | memoryview]], None]


def compact_source(
    source: str,
    config: MemoryConfig,
    options: RunOptions | None = None,
    *,
    write: Write | None = None,
    seams: Seams | None = None,
    stdin: BinaryIO | None = None,
    progress: Progress | None = None,
) -> CompactionResult:
    """The one way through: read ``source`` (``-`` for stdin) in any format, compact it, return the result.

    ``compact FILE``, ``count``, ``--dry-run`` and every ``compact batch`` worker call this. With
    ``write``, the output is handed to it here (a dataset in a regular file is then streamed, one
    conversation in memory at a time); otherwise the caller writes ``result.chunks()``.
    """
    options = options or RunOptions()
    memo = _memo(source, config, options) if seams is None and write is None else None
    if isinstance(memo, CompactionResult):
        return memo
    with contextlib.ExitStack() as stack:
        if memo is not None:
            stack.callback(memo[0].close)
        transcript = _read(source, config, options, stdin, stream=write is not None)
        unpinned = _check_keep_rules(config, transcript, options)
        given_store = config.store
        if options.dry_run:
            config = stack.enter_context(scratch_store(config))
        counter, choice = open_counter(config, use_cache=options.use_cache)
        counter.progress = progress
        if counter.cache is not None:
            stack.callback(counter.cache.close)
        if seams is None:
            seams = open_seams(config) if options.mode != UNLIMITED else Seams()
            if seams.store is not None:
                stack.callback(seams.store.close)
                if given_store:  # (a dry run's copy names the real store in what it writes)
                    seams.store.shown_path = given_store
        if transcript is None or transcript.format == DATASET:
            if options.target_format == DATASET:  # (a dataset written as a dataset: no conversion)
                options = dataclasses.replace(options, target_format=None)
            return _compact_dataset(source, transcript, config, counter, choice, options, seams, write)
        result = _compact_transcript(transcript, config, counter, choice, options, seams)
        result.unpinned_rules = unpinned
        if memo is not None:
            _remember(memo, transcript, options, result)
        if options.check_for is not None:
            _check_provider(result, options.check_for)
        if write is not None:
            stack.callback(_close_source, result.messages)
            write(result.chunks())
        return result
    raise AssertionError("unreachable")  # (mypy: ExitStack may swallow an exception)


def compact_file(path: str, config: MemoryConfig, *, seams: Seams | None = None, stdin: BinaryIO | None = None,
                 progress: Progress | None = None, **options: Any) -> CompactionResult:
    """:func:`compact_source` with the :class:`RunOptions` given as keywords (mode=, repair=, ...)."""
    return compact_source(path, config, RunOptions(**options), seams=seams, stdin=stdin, progress=progress)


def _read(source: str, config: MemoryConfig, options: RunOptions, stdin: BinaryIO | None,
          *, stream: bool) -> Decoded | None:
    """The decoded transcript, or None for a dataset to stream from the file; refuses what cannot run."""
    from core import formats

    streamed = stream and source != "-" and is_regular_file(source)  # a dataset here is read as it is written
    given = options.source_format
    if streamed and given is None:
        given = formats.sniff(source, max_line_bytes=config.max_line_bytes, skip_invalid=options.skip_invalid)[2].name
    transcript = None
    if not (streamed and given == DATASET):
        transcript = formats.read(source, source_format=given, skip_invalid=options.skip_invalid, stdin=stdin,
                                  max_line_bytes=config.max_line_bytes)
    if transcript is not None and transcript.format != DATASET:
        if options.target_format == DATASET:
            raise ConfigError("--to dataset writes only a conversation-per-line dataset that was read as one",
                              fix="leave out --to, or name a transcript format")
        return transcript
    if options.target_format not in (None, DATASET):
        raise ConfigError("--to cannot convert a conversation-per-line dataset", fix="leave out --to")
    option = options.one_transcript_option()
    if option is not None:
        raise ConfigError(f"{option} works on one transcript, and {source} is a conversation-per-line dataset",
                          fix="leave it out, or compact the conversations one file each")
    return transcript


def _compact_transcript(transcript: Decoded, config: MemoryConfig, counter: MessageCounter, choice: EncoderChoice,
                        options: RunOptions, seams: Seams) -> CompactionResult:
    from core import formats

    step = None
    if options.graph is not None:
        from core.graph.context import graph_step

        step = graph_step(working_graph(options.graph), config.graph_marker)
    result = compact(
        transcript.messages, config.run_settings(), counter, encoder=choice, mode=options.mode, repair=options.repair,
        seams=seams, graph_step=step, source=transcript.path, skipped_lines=transcript.skipped_lines,
        turn_boundary=bool({transcript.format, options.target_format} & formats.USER_FIRST),
        recorded_model=formats.recorded_model(transcript),
    )
    target = options.target_format or transcript.format
    losses: list[dict[str, Any]] = []
    if target != transcript.format or options.target_format and formats.get(target).renders_anew(transcript):
        items, losses = formats.convert(transcript, result.messages, target)
        _refuse_empty_conversion(items, losses, target, transcript.path, result.messages)
        result.writer = lambda _messages: formats.serialise_lines(items)
    elif transcript.format != OPENAI:
        result.writer = lambda messages: formats.write(transcript, messages)
    if result.compression is None:  # (compact always reports; only a dataset's result has no CompressionReport)
        raise AssertionError("compact returned no report")
    # The pipeline cannot know the formats: it completes the report here, before anything reads it.
    result.compression = dataclasses.replace(result.compression,
                                             format=FormatReport(transcript.format, target, losses,
                                                                 formats.live_part(transcript)))
    return result


def _refuse_empty_conversion(items: list[Any], losses: list[dict[str, Any]], target: str, path: str,
                             messages: Sequence[Message]) -> None:
    """A conversion whose output compact could not read back (no message left in it) is refused, nothing
    written; a transcript with nothing to send converts to an empty file, as it should."""
    from core.formats.conversion import reads_no_message

    if any(countable_text(m.data).strip() for m in messages) and reads_no_message(items, target):
        lost = "; ".join(f"{loss['what']}: {loss['count']:,}" for loss in losses)
        raise ConfigError(f"--to {target} would write no message (left out: {lost})", path=path,
                          fix="convert to another format, or leave out --to")


def working_graph(options: GraphOptions) -> Any:
    """The working graph of --graph (merged with --graph-merge), loaded once per process while its files stay as they are."""
    stamps = []
    for path in (options.snapshot, options.merge):
        if path is not None:
            with contextlib.suppress(OSError):  # the loader reports a missing file properly
                info = os.stat(path)
                stamps.append((path, info.st_mtime_ns, info.st_size))
    return _load_working_graph(options, tuple(stamps))


@functools.lru_cache(maxsize=2)
def _load_working_graph(options: GraphOptions, _stamps: tuple[Any, ...]) -> Any:
    from core.graph import GraphContextConfig
    from core.graph.context import load_working_graph

    context = GraphContextConfig(max_nodes=options.max_nodes, max_relationships=options.max_relationships)
    return load_working_graph(options.snapshot, merge=options.merge, policy=options.policy,
                              weights=options.weights, context=context)


def _check_provider(result: CompactionResult, provider: str) -> None:
    """Judge the transcript about to be written as ``compact validate --for`` would."""
    from core.analysis.provider_requests import validate_bytes

    written_as = result.compression.format.output if result.compression and result.compression.format else OPENAI
    verdicts = validate_bytes(b"".join(result.chunks()), written_as, provider)
    problems = [p for v in verdicts for p in v.problems]
    if problems:
        raise ProviderRejected(provider, problems)


def _close_source(messages: Iterable[Message]) -> None:
    """Close the transcript file the untouched lines are read back from (one per transcript)."""
    for message in messages:
        if isinstance(message.source, LineRef):
            message.source.file.close()
            return


def _check_keep_rules(config: MemoryConfig, transcript: Decoded | None, options: RunOptions) -> dict[str, str]:
    """A `line:` or `tool:` keep rule that pins nothing in a transcript is an error, before anything runs;
    the `tool:` rules that pin nothing, each with why, when ``options.note_unpinned_tools`` (a batch
    input). A dataset's conversations are checked as they are compacted."""
    from core.config import check_keep_lines
    from core.engine.structure import ToolRuleTally

    if transcript is None or transcript.format == DATASET:
        return {}
    messages = transcript.messages
    check_keep_lines(config, [m.line for m in messages], transcript.path,
                     other_lines=[s["line"] for s in transcript.skipped_lines])
    tally = ToolRuleTally(config.keep_rules())
    tally.add(messages)
    if not options.note_unpinned_tools:
        tally.raise_unpinned(transcript.path)
    return tally.reasons()


@dataclass
class DatasetResult(CompactionResult):
    """A conversation-per-line dataset's result: no messages of its own, the typed dataset report."""

    dataset: DatasetReport | None = None

    @property
    def report(self) -> dict[str, Any]:
        return self.dataset.to_dict() if self.dataset is not None else {}

    @property
    def over_budget(self) -> bool:
        return bool(self.dataset and self.dataset.over_budget)  # conversations still over budget


def _compact_dataset(source: str, decoded: Decoded | None, config: MemoryConfig, counter: MessageCounter,
                     choice: EncoderChoice, options: RunOptions, seams: Seams, write: Write | None) -> DatasetResult:
    """Each conversation of a dataset compacted on its own budget; the report has a row per conversation."""
    from core.batch.dataset_run import DatasetCompactor, compact_dataset_lines

    compactor = DatasetCompactor(decoded.path if decoded else source, config, counter=counter, encoder=choice,
                                 mode=options.mode, repair=options.repair, skip_invalid=options.skip_invalid,
                                 seams=seams, note_unpinned_tools=options.note_unpinned_tools)
    output: list[bytes] = []
    if decoded is None:  # a regular file, streamed to ``write`` a conversation at a time
        assert write is not None
        with open(source, "rb") as stream:
            write(compact_dataset_lines(stream, compactor))
    else:
        compacted = (compactor.line(line.number, line.to_bytes()) for line in decoded.lines)
        output = [line for line in compacted if line is not None]
        compactor.finish()
        if write is not None:
            write(chunk for line in output for chunk in (line, b"\n"))
    return DatasetResult(messages=[], dataset=compactor.report(), unpinned_rules=compactor.unpinned_rules(),
                         writer=lambda _messages: (chunk for line in output for chunk in (line, b"\n")))


def _remember(memo: tuple[RunCache, bytes], transcript: Decoded, options: RunOptions,
              result: CompactionResult) -> None:
    """Store a canonical run's output and report in the run memo (a transcript read and written as OpenAI JSONL)."""
    report = result.compression
    if report is not None and not report.skipped_lines and transcript.format == OPENAI == (
            options.target_format or OPENAI):
        memo[0].put(memo[1], b"".join(bytes(c) for c in serialise(result.messages)), report.to_dict())


def _memo(source: str, config: MemoryConfig, options: RunOptions) -> CompactionResult | tuple[RunCache, bytes] | None:
    """A stored result for this exact run, or where to store it; None when this run is not memoized."""
    if not (options.use_cache and options.memo_ok and options.check_for is None and options.graph is None
            and run_memo_enabled() and source != "-"
            and os.path.isfile(source)  # a pipe would be used up by hashing it
            and not (config.store or config.summarizer_calls_a_model)):
        return None
    return _memo_lookup(source, config, mode=options.mode, repair=options.repair, skip_invalid=options.skip_invalid,
                        formats=(options.source_format, options.target_format))


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
    messages = [Message(data=held_message(jsonio.loads(line)), line=None, source=line) for line in output.splitlines()]
    return CompactionResult(messages=messages, compression=report, workspace=None)


def count_file(path: str, config: MemoryConfig, *, use_cache: bool = True, skip_invalid: bool = False,
               source_format: str | None = None, stdin: BinaryIO | None = None) -> CompactionResult:
    """Usage of a transcript (or dataset) without compacting it: the result of an unlimited run."""
    options = RunOptions(mode=UNLIMITED, use_cache=use_cache, skip_invalid=skip_invalid, source_format=source_format)
    return compact_source(path, config, options, stdin=stdin)


def file_digest(path: str) -> str:
    """The blake2b of a file's bytes (batch sidecars, graph options)."""
    digest = hashlib.blake2b(digest_size=32)
    with open_input(path) as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
