"""Reading and writing: every field kept, untouched lines byte for byte, atomic outputs."""

from __future__ import annotations

import json
from pathlib import Path

from core.io.transcript import read_transcript
from tests.helpers import invoke, read_messages

ODD_LINES = [
    '{"role":"system","content":"S","x-extra":{"nested":[1,2.50,"\\u00e9"]}}',
    '{"role": "user",   "content": [{"type": "text", "text": "spaced  out"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}',
    '{"content":null,"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"custom":true}',
    '{"role":"tool","tool_call_id":"c1","content":"r\\u2026esult"}',
    '{"role":"user","content":"last one \\ud83d\\ude00"}',
]


def test_unlimited_round_trip_is_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(ODD_LINES) + "\n")
    result = invoke(str(source), "--unlimited")
    assert result.exit_code == 0
    assert result.stdout == source.read_text()


def test_untouched_messages_keep_their_bytes_when_others_change(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [*ODD_LINES[:3], '{"role":"tool","tool_call_id":"c1","content":"' + "long output " * 400 + '"}', ODD_LINES[4]]
    source.write_text("\n".join(lines) + "\n")
    result = invoke(str(source), "--full", "--strategy", "clear_tool_results:keep_pairs=0")
    out = result.stdout.splitlines()
    assert out[0] == lines[0] and out[1] == lines[1] and out[2] == lines[2] and out[4] == lines[4]
    assert json.loads(out[3])["content"].startswith("[compact: tool result of f cleared")
    assert json.loads(out[3])["tool_call_id"] == "c1"  # every other field kept


def test_blank_lines_crlf_and_bom_are_tolerated(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'\xef\xbb\xbf{"role":"user","content":"a"}\r\n\r\n{"role":"assistant","content":"b"}\r\n')
    transcript = read_transcript(str(source))
    assert [m.line for m in transcript.messages] == [1, 3]


def test_stdin_to_stdout(tmp_path: Path) -> None:
    data = "\n".join(ODD_LINES) + "\n"
    result = invoke("-", "--unlimited", input=data.encode())
    assert result.exit_code == 0
    assert result.stdout == data


def test_output_file_and_report_to_stdout(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(ODD_LINES) + "\n")
    target = tmp_path / "out.jsonl"
    result = invoke(str(source), "--max-messages", "3", "-o", str(target), "--report", "-")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["after"]["messages"] == len(read_messages(target.read_text()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temp file left


def test_in_place_keeps_a_backup(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    original = "\n".join(ODD_LINES) + "\n"
    source.write_text(original)
    result = invoke(str(source), "--max-messages", "3", "--in-place", "--preset", "seed")
    assert result.exit_code == 0
    assert (tmp_path / "in.jsonl.bak").read_text() == original
    # Three would split the call on line 3 from its result: the exchange goes whole.
    assert len(read_messages(source.read_text())) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "in.jsonl.bak"]


def test_in_place_leaves_a_file_it_would_not_change_alone(tmp_path: Path) -> None:
    """A transcript already under its budget comes out byte for byte the same: rewriting it would
    only pile up FILE.bak, FILE.bak.1, ... copies of the same bytes (a hook running after each turn)."""
    source = tmp_path / "in.jsonl"
    original = "\n".join(ODD_LINES) + "\n"
    source.write_text(original)
    before = source.stat().st_mtime_ns
    for _ in range(2):
        result = invoke(str(source), "--max-tokens", "100000", "--in-place")
        assert result.exit_code == 0
        assert "unchanged" in result.stderr and result.stdout == ""
    assert source.read_text() == original and source.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_skip_invalid_leaves_bad_lines_out_and_reports_them(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"role":"user","content":"a"}\n{not json\n{"role":"assistant","content":"b"}\n')
    report = tmp_path / "r.json"
    result = invoke(str(source), "--unlimited", "--skip-invalid", "--report", str(report))
    assert result.exit_code == 0
    assert result.stdout == '{"role":"user","content":"a"}\n{"role":"assistant","content":"b"}\n'
    skipped = json.loads(report.read_text())["skipped_lines"]
    assert [s["line"] for s in skipped] == [2]
    assert skipped[0]["error"].startswith("malformed JSON")


def test_lines_split_across_read_blocks_keep_their_numbers_and_bytes(tmp_path: Path, monkeypatch) -> None:
    import core.io.rawinput as rawinput_module

    monkeypatch.setattr(rawinput_module, "READ_BLOCK", 64)
    source = tmp_path / "in.jsonl"
    lines = ['{"role":"system","content":"' + "s" * 150 + '"}', "", "   ", '{"role":"user","content":"u"}', "",
             '{"role":"assistant","content":"' + "a" * 90 + '"}', '{"role":"user","content":"last"}']
    source.write_text("\n".join(lines))  # no newline at the end either
    transcript = read_transcript(str(source))
    assert [m.line for m in transcript.messages] == [1, 4, 6, 7]
    assert [bytes(m.to_bytes()).decode() for m in transcript.messages] == [lines[0], lines[3], lines[5], lines[6]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:6], "{oops", lines[6]]) + "\n")
    result = invoke(str(bad), "--unlimited")
    assert ":7:" in result.stderr
    # A line too long, blocks after the start: the error still names its line.
    import pytest

    from core.errors import InputError

    long = tmp_path / "long.jsonl"
    long.write_text("\n".join([*lines[:6], '{"role":"user","content":"' + "x" * 400 + '"}']) + "\n")
    with pytest.raises(InputError) as raised:
        read_transcript(str(long), max_line_bytes=300)
    assert raised.value.line == 7
