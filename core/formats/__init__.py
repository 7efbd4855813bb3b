"""Transcript formats: detection, reading into canonical messages, writing back.

One module per format (each declares ``CODEC``, listed in :mod:`core.formats.registry`);
the jobs around them each in their own module: :mod:`~core.formats.detection`,
:mod:`~core.formats.reading`, :mod:`~core.formats.decoding`,
:mod:`~core.formats.conversion`, and the raw input in :mod:`core.io.rawinput`.
This package re-exports what callers use.

``read`` detects the format from the file's first lines (or takes ``--from``),
reads it into a :class:`~core.formats.base.Decoded`, and ``write`` turns the
compacted messages back into lines: in the input's format by default, or
converted with ``--to``. OpenAI chat, the canonical format, keeps the plain
transcript reader's fast path (lines copied back from the file untouched).

Datasets. A file whose lines are whole conversations (``{"messages": [...]}``
or ShareGPT ``{"conversations": [...]}``, the two may be mixed) is the
``dataset`` format when it holds more than one: core.batch.dataset_run compacts each
line on its own budget. A single ShareGPT conversation line stays the
``sharegpt`` format (it is one transcript); a single ``messages`` line is a
dataset of one, as before.

JSON documents. A file whose first line is a lone ``{`` is one pretty-printed
object (Gemini CLI's saved chat): it is read as a single "line" whose source
is the whole file, so an untouched document is written back byte for byte
(each codec's ``serialise`` decides how its output is laid out).

JSON arrays. A file whose first non-blank byte is ``[`` is parsed whole (a
pretty-printed ``[{"conversations": ...}, ...]`` as LLaMA-Factory ships its
data sets, or ``[{"role": ...}, ...]`` chat messages) and read as if each
element were one line of a JSONL file: element N is "line" N in the report
and in errors, and detection runs on the elements. It is written back as
JSONL, one element per line: a pretty-printed array cannot be copied back byte
for byte, and one element per line keeps the "untouched lines are copied"
rule (with ``--unlimited`` the output holds the same JSON values, element by
element). An array of anything but objects is a one-line error naming the file.
"""

from __future__ import annotations

from core.formats.base import Codec, Decoded, Line, Losses, live_part, number, serialise_lines
from core.formats.conversion import convert, write
from core.formats.detection import DATASET, OPENAI, SHAREGPT, detect, search, sniff
from core.formats.reading import read, read_one
from core.formats.registry import codecs, get, known_formats, names
from core.io.rawinput import STDIN, array_lines, document_line, parse_array, split_lines

# Formats whose provider refuses a conversation that does not open with a user message.
USER_FIRST = frozenset({"anthropic", "claude-code"})
# Formats whose assistant lines record the model that wrote them (in ``message.model``).
MODEL_RECORDED = frozenset({"claude-code", "pi"})


def recorded_model(decoded: Decoded) -> str | None:
    """The model a Claude Code or pi session records for its newest reply (None elsewhere)."""
    if decoded.format not in MODEL_RECORDED:
        return None
    for line in reversed(decoded.lines):
        message = line.data.get("message") if line.data is not None else None
        model = message.get("model") if isinstance(message, dict) and message.get("role") == "assistant" else None
        if isinstance(model, str) and model != "<synthetic>":  # (Claude Code's own lines say "<synthetic>")
            return model
    return None

__all__ = [
    "DATASET", "OPENAI", "SHAREGPT", "STDIN", "USER_FIRST", "Codec", "Decoded", "Line", "Losses", "array_lines",
    "codecs", "convert", "detect", "document_line", "get", "known_formats", "live_part", "names", "number", "parse_array",
    "read", "read_one", "recorded_model", "search", "serialise_lines", "sniff", "split_lines", "write",
]
