"""Bad input: one readable line naming file and line, exit 2, nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import invoke

ERRORS = Path(__file__).resolve().parent.parent / "sample_transcripts" / "errors"

CASES = [
    ("bad_json.jsonl", r":3:\d+: malformed JSON"),
    ("unknown_role.jsonl", r":2: unknown role 'robot' \(expected one of system, developer, user, assistant, tool"),
    ("invalid_utf8.jsonl", (r":2:\d+: invalid UTF-8 \(byte 0x[0-9a-f]{2}\) \(re-encode the file as UTF-8; "
                            r"--skip-invalid leaves bad lines out\)")),
    ("empty.jsonl", r": the file is empty; a transcript needs at least one message"),
    ("not_an_object.jsonl", r":2: an array, not a message object"),
    ("missing_role.jsonl", r":\d+: message has no role"),
]


@pytest.mark.parametrize(("name", "pattern"), CASES)
def test_bad_input_is_one_line_exit_2_and_nothing_written(name: str, pattern: str, tmp_path: Path) -> None:
    source = ERRORS / name
    target = tmp_path / "out.jsonl"
    result = invoke(str(source), "--max-tokens", "100", "-o", str(target), "--report", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"compact: error: {source}")
    assert re.search(pattern, lines[0]), lines[0]
    assert not target.exists()
    assert not (tmp_path / "r.json").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind either


def test_missing_file(tmp_path: Path) -> None:
    result = invoke(str(tmp_path / "nope.jsonl"), "--max-tokens", "100")
    assert result.exit_code == 2
    assert result.stderr == f"compact: error: {tmp_path / 'nope.jsonl'}: no such file (check the path)\n"


def test_error_does_not_overwrite_an_existing_output(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("precious\n")
    result = invoke(str(ERRORS / "bad_json.jsonl"), "--max-tokens", "100", "-o", str(target))
    assert result.exit_code == 2
    assert target.read_text() == "precious\n"


def test_transcript_text_never_breaks_the_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role": "user", "content": "ok"}\n{"role": "user\n  \n')
    result = invoke(str(bad), "--max-tokens", "100")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("config_text", "suffix", "pattern"),
    [
        ("max_tokens = 100\nmax_fraction = 0.5\n", ".toml", r"max_tokens and max_fraction are both set"),
        ("max_tokenz = 100\n", ".toml", r"unknown key 'max_tokenz' \(did you mean 'max_tokens'\?\)"),
        ("max_tokens = [\n", ".toml", r"malformed TOML"),
        ('{"warn_fraction": 2}', ".json", r"warn_fraction: 2 is greater than the maximum of 1"),
        ('[[strategies]]\nkind = "sliding_windw"\n', ".toml", r"strategies\[0\]\.kind"),
        ('[[strategies]]\nkind = "sliding_window"\nkeep = 3\n', ".toml", r"strategies\[0\]"),
    ],
)
def test_bad_config_is_refused_before_anything_runs(
    config_text: str, suffix: str, pattern: str, samples: Path, tmp_path: Path
) -> None:
    config = tmp_path / f"config{suffix}"
    config.write_text(config_text)
    target = tmp_path / "out.jsonl"
    result = invoke(str(samples / "short_chat.jsonl"), "--config", str(config), "-o", str(target))
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1
    assert str(config) in result.stderr
    assert re.search(pattern, result.stderr), result.stderr
    assert not target.exists()


def test_unknown_strategy_suggests_the_right_name(samples: Path) -> None:
    result = invoke(str(samples / "short_chat.jsonl"), "--strategy", "sliding_windo:keep_messages=3")
    assert result.exit_code == 2
    assert "unknown strategy 'sliding_windo' (did you mean 'sliding_window'?" in result.stderr


def test_unknown_strategy_parameter(samples: Path) -> None:
    result = invoke(str(samples / "short_chat.jsonl"), "--strategy", "sliding_window:keep=3")
    assert result.exit_code == 2
    assert "strategy sliding_window has no parameter 'keep' (it takes keep_messages)" in result.stderr


def test_unknown_encoder_suggests_a_fix(samples: Path) -> None:
    result = invoke(str(samples / "short_chat.jsonl"), "--encoder", "cl100k_bas")
    assert result.exit_code == 2
    assert "unknown encoder 'cl100k_bas' (did you mean 'cl100k_base'?" in result.stderr


def test_report_to_stdout_needs_the_transcript_in_a_file(samples: Path) -> None:
    result = invoke(str(samples / "short_chat.jsonl"), "--report", "-")
    assert result.exit_code == 2
    assert "--report - needs the transcript in a file" in result.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cli.app import app
    from core.errors import InputError

    result = CliRunner().invoke(app, [str(tmp_path / "nope.jsonl"), "--debug"])
    assert isinstance(result.exception, InputError)
