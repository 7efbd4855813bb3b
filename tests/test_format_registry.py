"""The format registry: one codec per format module, each name once, as the strategy registry is."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import formats
from core.errors import InputError
from core.formats import registry
from core.formats.anthropic import CODEC as ANTHROPIC
from core.formats.openai_chat import CODEC as CHAT
from core.formats.pi import CODEC as PI


def test_a_format_name_registered_twice_is_refused() -> None:
    with pytest.raises(RuntimeError, match="format name 'anthropic' registered twice"):
        registry.build([ANTHROPIC, PI, ANTHROPIC])


def test_the_registry_lists_every_format_once_most_specific_first() -> None:
    assert formats.names() == ["claude-code", "codex", "codex-exec", "pi", "gemini-stream", "gemini-session", "gemini-chat",
                               "responses",
                               "anthropic", "sharegpt", "dataset", "openai"]
    assert registry.build(formats.codecs().values()) == formats.codecs()


def test_an_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(InputError) as caught:
        formats.get("jsonl")
    assert "unknown format 'jsonl'" in str(caught.value) and "claude-code" in str(caught.value)


def test_the_canonical_codec_decodes_lines_as_the_transcript_reader_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"role":"user","content":"hi"}\n\n{"role":"assistant","content":"yo"}\r\n')
    read = formats.read(str(path))
    decoded = CHAT.decode(formats.split_lines(path.read_bytes(), skip_invalid=False, path=str(path)), str(path))
    assert read.format == "openai"
    assert [(m.line, m.data, bytes(m.to_bytes())) for m in decoded] == \
        [(m.line, m.data, bytes(m.to_bytes())) for m in read.messages]
