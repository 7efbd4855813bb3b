"""The formats layer as a user meets it: detection, --from/--to, the report's format, datasets on the main command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.io.schema_loader import validator
from tests.helpers import assistant_calls, call, invoke, msg, read_messages, result, write_messages
from tests.test_dataset import validate_dataset_report


def chat(tmp_path: Path) -> Path:
    return write_messages(tmp_path / "chat.jsonl", [
        msg("system", "You are terse."),
        msg("user", "list the files"),
        assistant_calls(call("c1", "bash", command="ls")),
        result("c1", "a.txt\nb.txt " + "x " * 3000),
        msg("assistant", "Two files."),
        msg("user", "thanks"),
    ])


def test_a_chat_transcript_reports_its_format_and_the_report_validates(tmp_path: Path) -> None:
    path = chat(tmp_path)
    out = invoke(str(path), "--max-tokens", "500", "-o", str(tmp_path / "out.jsonl"), "--report", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["format"] == {"input": "openai", "output": "openai", "losses": []}
    validator("report").validate(report)


def test_to_openai_on_a_chat_transcript_changes_nothing(tmp_path: Path) -> None:
    path = chat(tmp_path)
    out = invoke(str(path), "--unlimited", "--to", "openai", "-o", str(tmp_path / "out.jsonl"))
    assert out.exit_code == 0, out.output
    assert (tmp_path / "out.jsonl").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--from", "yaml"], "unknown format 'yaml' (use one of "),
        (["--to", "xml"], "unknown format 'xml' (use one of "),
        (["--in-place", "--to", "openai"], "--in-place keeps the file's format"),
    ],
)
def test_bad_format_options_are_one_line_usage_errors(tmp_path: Path, args: list[str], expected: str) -> None:
    path = chat(tmp_path)
    out = invoke(str(path), *args)
    assert out.exit_code == 2
    assert expected in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_a_line_in_no_known_format_names_the_line_and_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('{"event": "click", "x": 3}\n', encoding="utf-8")
    out = invoke(str(path))
    assert out.exit_code == 2
    assert f"{path}:1: this line is not a message in any format compact reads" in out.output
    assert "OpenAI chat" in out.output and "--from FORMAT" in out.output


def test_a_file_mixing_two_formats_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = [msg("user", "hi"), msg("assistant", "hello"), {"id": 1, "messages": [msg("user", "hi")]}]
    write_messages(path, lines)
    out = invoke(str(path), "--max-tokens", "100")
    assert out.exit_code == 2
    assert f"{path}:3: this line is a conversation-per-line dataset but the lines before it are" in out.output
    assert not (tmp_path / "out.jsonl").exists()


def test_count_accepts_from_and_says_the_format(tmp_path: Path) -> None:
    path = chat(tmp_path)
    out = invoke("count", str(path), "--from", "openai", "--format", "json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["format"] == "openai"


# -- conversation-per-line datasets on the main command --------------------------------------


def dataset(tmp_path: Path) -> Path:
    long = [msg("system", "policy"), msg("user", "q1"), assistant_calls(call("c1", "lookup", id=1)),
            result("c1", "record " * 4000), msg("assistant", "found it"), msg("user", "q2")]
    short = [msg("user", "hello"), msg("assistant", "hi")]
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (
        {"task_id": 1, "messages": long, "reward": 1.0},
        {"task_id": 2, "messages": short, "reward": 0.0},
    )) + "\n", encoding="utf-8")
    return path


def test_a_dataset_is_compacted_conversation_by_conversation(tmp_path: Path) -> None:
    path = dataset(tmp_path)
    out = invoke(str(path), "--max-tokens", "1000", "-o", str(tmp_path / "out.jsonl"),
                 "--report", str(tmp_path / "r.json"), "--table")
    assert out.exit_code == 0, out.output
    first, second = read_messages((tmp_path / "out.jsonl").read_text())
    assert list(first) == ["task_id", "messages", "reward"] and first["task_id"] == 1
    assert len(json.dumps(first["messages"])) < len(json.dumps(json.loads(path.read_text().splitlines()[0])["messages"]))
    assert second == json.loads(path.read_text().splitlines()[1])  # the short one is untouched
    report = json.loads((tmp_path / "r.json").read_text())
    validate_dataset_report(report)
    assert report["conversations"] == 2 and report["changed"] == 1
    assert [row["line"] for row in report["rows"]] == [1, 2]
    assert "(dataset)" in out.output and "1 changed" in out.output


def test_options_for_one_transcript_are_refused_on_a_dataset(tmp_path: Path) -> None:
    path = dataset(tmp_path)
    out = invoke(str(path), "--max-tokens", "1000", "--dry-run")
    assert out.exit_code == 2
    assert "--dry-run works on one transcript" in out.output
    out = invoke(str(path), "--max-tokens", "1000", "--to", "anthropic")
    assert out.exit_code == 2
    assert "--to cannot convert a conversation-per-line dataset" in out.output


# -- counting the blocks other formats bring ------------------------------------------------


def test_thinking_reasoning_and_documents_are_counted_as_documented() -> None:
    from core.messages import countable_text, image_count

    content = [
        {"type": "thinking", "thinking": "weigh the options", "signature": "c2lnbmF0dXJl"},
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "checked the tests"}],
         "encrypted_content": "gAAAA"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "the spec"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
    ]
    text = countable_text({"role": "assistant", "content": content})
    assert text.split("\n") == ["weigh the options", "checked the tests", "the spec"]
    assert "ZW5jcnlwdGVk" not in text and "gAAAA" not in text and "c2lnbmF0dXJl" not in text
    assert image_count(content) == 2  # the PDF and the image; the text document is read as text


def test_skip_invalid_leaves_out_a_line_of_the_wrong_shape(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "formats" / "anthropic_all_blocks.jsonl"
    lines = fixture.read_text(encoding="utf-8").splitlines()
    lines.insert(2, '{"hello": 1}')
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = invoke(str(path), "--unlimited", "--from", "anthropic")
    assert out.exit_code == 2
    assert f"{path}:3: this line is not an Anthropic message" in out.output
    out = invoke(str(path), "--unlimited", "--from", "anthropic", "--skip-invalid", "-o", str(tmp_path / "o.jsonl"),
                 "--report", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.output
    assert (tmp_path / "o.jsonl").read_bytes() == fixture.read_bytes()
    assert json.loads((tmp_path / "r.json").read_text())["skipped_lines"] == [
        {"line": 3, "error": "this line is not an Anthropic message"}]


def test_the_chat_shortcut_of_detection_agrees_with_the_full_search(samples: Path, realdata: Path) -> None:
    from core import formats

    files = [*samples.glob("*.jsonl"), *(realdata / "openai-chat").glob("*.jsonl")]
    shortcut = 0
    for path in files:
        lines = formats.split_lines(path.read_bytes(), skip_invalid=True, path=str(path), limit=64)
        found = formats.detect(lines, str(path))
        assert found is formats.search(lines, str(path)), path.name
        shortcut += found.name == "openai"
    assert shortcut >= 3


@pytest.mark.parametrize("target", ["openai", "anthropic", "responses", "codex", "pi", "gemini-stream"])
def test_every_target_that_names_calls_leaves_out_a_parent_sessions_result_as_one_loss(target: str, tmp_path: Path) -> None:
    # A Claude Code sidechain's result answered in the parent session has no call here to name:
    # each target says so in the same words, and writes a file compact reads back.
    source = Path(__file__).parent / "fixtures" / "formats" / "claude_code_sidechain.jsonl"
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    assert invoke(str(source), "--unlimited", "--to", target, "-o", str(out), "--report", str(report)).exit_code == 0
    losses = {loss["what"]: loss["count"] for loss in json.loads(report.read_text())["format"]["losses"]}
    assert losses.get("tool results whose call is not in the transcript (a parent session's), left out") == 1
    assert invoke(str(out), "--unlimited", "-o", str(tmp_path / "again.jsonl")).exit_code == 0


def test_a_plain_chat_line_among_other_lines_is_named_as_chat(tmp_path: Path) -> None:
    # It fits several formats (a Codex 2025 rollout takes bare items too): the error names the plain one.
    path = tmp_path / "mixed.jsonl"
    write_messages(path, [{"id": 1, "messages": [msg("user", "hi")]}, msg("user", "stray")])
    out = invoke(str(path), "--max-tokens", "100")
    assert out.exit_code == 2
    assert f"{path}:2: this line is OpenAI chat but the lines before it are a conversation-per-line dataset" in out.output
