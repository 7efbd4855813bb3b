"""What a new user tripped on (issue 11): each case as the user met it, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import invoke, read_messages

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_transcripts"
SESSION = SAMPLES / "agent_session.jsonl"


def _dataset(tmp_path: Path) -> Path:
    lines = [
        {"task_id": 1, "messages": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}]},
        {"task_id": 2, "messages": [{"role": "user", "content": "book a flight"}]},
    ]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# -- compact count ----------------------------------------------------------------


def test_count_prints_its_table_on_stdout() -> None:
    result = invoke("count", str(SAMPLES / "short_chat.jsonl"))
    assert result.exit_code == 0, result.output
    assert "messages" in result.stdout and "tokens" in result.stdout
    assert result.stderr == ""


def test_count_on_a_dataset_shows_its_totals(tmp_path: Path) -> None:
    result = invoke("count", str(_dataset(tmp_path)))
    assert result.exit_code == 0, result.output
    assert "(dataset)" in result.stdout
    assert "now" in result.stdout and " 2 " in result.stdout  # two conversations


def test_count_json_on_a_dataset_has_a_row_per_conversation(tmp_path: Path) -> None:
    result = invoke("count", str(_dataset(tmp_path)), "--format", "json")
    assert result.exit_code == 0, result.output
    usage = json.loads(result.stdout)
    assert usage["format"] == "dataset"
    assert usage["conversations"] == 2
    assert [row["line"] for row in usage["rows"]] == [1, 2]
    assert [row["messages"] for row in usage["rows"]] == [2, 1]
    assert usage["before"]["messages"] == 3
    assert usage["before"]["tokens"] == sum(row["tokens"] for row in usage["rows"]) > 0


def test_count_reads_a_compacted_dataset_from_stdin(tmp_path: Path) -> None:
    compacted = invoke(str(_dataset(tmp_path)), "--max-tokens", "8000")
    assert compacted.exit_code == 0, compacted.output
    result = invoke("count", "-", "--format", "json", input=compacted.stdout)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["conversations"] == 2


# -- outputs ------------------------------------------------------------------------


def test_output_dash_is_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(str(SAMPLES / "short_chat.jsonl"), "--max-tokens", "8000", "-o", "-")
    assert result.exit_code == 0, result.output
    assert read_messages(result.stdout) == read_messages((SAMPLES / "short_chat.jsonl").read_text())
    assert list(tmp_path.iterdir()) == []  # no file named "-"


def test_a_second_in_place_run_keeps_the_first_backup(tmp_path: Path) -> None:
    source = tmp_path / "s.jsonl"
    original = SESSION.read_bytes()
    source.write_bytes(original)
    first = invoke(str(source), "--max-tokens", "20000", "--in-place")
    assert first.exit_code == 0, first.output
    once = source.read_bytes()
    assert once != original
    second = invoke(str(source), "--max-tokens", "8000", "--in-place")
    assert second.exit_code == 0, second.output
    assert (tmp_path / "s.jsonl.bak").read_bytes() == original  # the original is never lost
    assert (tmp_path / "s.jsonl.bak.1").read_bytes() == once
    assert "s.jsonl.bak.1" in second.stderr
    third = invoke(str(source), "--max-tokens", "4000", "--in-place")
    assert third.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "s.jsonl.bak", "s.jsonl.bak.1", "s.jsonl.bak.2"]


# -- a failed run leaves nothing ------------------------------------------------------


def test_a_missing_prompt_file_creates_no_store_and_no_output(tmp_path: Path) -> None:
    result = invoke(
        str(SESSION), "--max-tokens", "8000", "--store", str(tmp_path / "s.sqlite"), "--summarizer", "openai",
        "--summarizer-url", "http://127.0.0.1:9/v1", "--summarizer-model", "m",
        "--summary-prompt", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "out.jsonl"),
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("compact: error: ") and "missing.txt" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_missing_prompt_file_is_an_error_even_under_budget(tmp_path: Path) -> None:
    result = invoke(
        str(SAMPLES / "short_chat.jsonl"), "--max-tokens", "100000", "--store", str(tmp_path / "s.sqlite"),
        "--summarizer", "openai", "--summarizer-url", "http://127.0.0.1:9/v1", "--summarizer-model", "m",
        "--summary-prompt", str(tmp_path / "missing.txt"),
    )
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_a_bad_summarizer_url_creates_no_store(tmp_path: Path) -> None:
    result = invoke(
        str(SESSION), "--max-tokens", "8000", "--store", str(tmp_path / "s.sqlite"), "--summarizer", "openai",
        "--summarizer-url", "ftp://example.com", "--summarizer-model", "m", "-o", str(tmp_path / "out.jsonl"),
    )
    assert result.exit_code == 2
    assert "is not an http(s) URL" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("line:5-3", "keep rule 'line:5-3' is an empty line range"),
        ("line:0", "keep rule 'line:0' is an empty line range"),
        ("line:999", "keep rule 'line:999' starts past the last line (350)"),
        ("line:351-400", "keep rule 'line:351-400' starts past the last line (350)"),
    ],
)
def test_a_keep_rule_that_pins_nothing_is_an_error_before_anything_is_created(
    rule: str, says: str, tmp_path: Path
) -> None:
    result = invoke(str(SESSION), "--max-tokens", "8000", "--keep", rule, "--store", str(tmp_path / "s.sqlite"),
                    "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert says in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_keep_line_that_holds_no_message_is_an_error(realdata: Path, tmp_path: Path) -> None:
    """Line 1 of a Claude Code session is a queue-operation record, not a message: `-k line:1`
    would pin nothing. Said before anything runs, with the lines messages do start on."""
    session = realdata / "claude-code" / "claude-reliability-python-to-rust-port.jsonl"
    result = invoke(str(session), "--max-tokens", "2000", "-k", "line:1", "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "keep rule 'line:1' holds no message" in result.stderr, result.stderr
    assert "messages start on lines 2, 3, 4, …" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []
    pinned = invoke(str(session), "--max-tokens", "2000", "-k", "line:1-2", "-o", str(tmp_path / "out.jsonl"))
    assert pinned.exit_code == 0, pinned.stderr  # a range holding a message pins it


def test_a_keep_range_reaching_past_the_end_still_pins_its_lines(tmp_path: Path) -> None:
    result = invoke(str(SESSION), "--max-tokens", "8000", "--keep", "line:349-400", "--report", str(tmp_path / "r.json"),
                    "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output


# -- the table ------------------------------------------------------------------------


def test_after_repair_the_table_says_what_was_repaired_not_to_repair(tmp_path: Path) -> None:
    result = invoke(str(SAMPLES / "errors" / "orphan_call.jsonl"), "--max-tokens", "8000", "--repair", "--table",
                    "-o", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    assert "--repair drops them" not in result.stderr
    assert "repaired: --repair dropped 1 tool call(s) without a result" in result.stderr
    plain = invoke(str(SAMPLES / "errors" / "orphan_call.jsonl"), "--max-tokens", "8000", "--table",
                   "-o", str(tmp_path / "out2.jsonl"))
    assert "--repair drops them" in plain.stderr


def test_the_table_speaks_plainly() -> None:
    result = invoke(str(SESSION), "--max-tokens", "8000", "--table")
    assert result.exit_code == 0
    table = " ".join(result.stderr.split())
    assert "window resolved" not in table
    assert "cached again" not in table
    assert "the window size comes from --context-window or its default, not from a model" in table
    # The system prompt and the pinned task statement lead the output unchanged.
    assert ("the 2 message(s) before line 3 are unchanged (1,773 tokens a provider can reuse from its cache)"
            in table)
    resolved = invoke(str(SESSION), "--max-tokens", "8000", "--model", "gpt-4o", "--table")
    assert "the window size is the model's" in " ".join(resolved.stderr.split())


def test_an_unknown_model_warns_with_the_nearest_names() -> None:
    result = invoke(str(SAMPLES / "short_chat.jsonl"), "--max-tokens", "8000", "--model", "gpt4o")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        ("compact: warning: unknown model 'gpt4o': using a 128,000-token window and the cl100k_base encoder "
        "(did you mean gpt-4o, gpt-4, gpt-4.1?)")
    ]
    known = invoke(str(SAMPLES / "short_chat.jsonl"), "--max-tokens", "8000", "--model", "gpt-4o-2024-08-06")
    assert known.stderr == ""


# -- help ---------------------------------------------------------------------------


HELP_COMMANDS = [
    ["run"], ["count"], ["stats"], ["diff"], ["validate"], ["batch"], ["recall"], ["config"], ["config", "show"],
    ["store", "stats"], ["graph"], ["graph", "validate"], ["graph", "merge"], ["graph", "import"],
    ["graph", "render"],
]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=" ".join)
def test_help_shows_no_python_type_placeholders(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    for placeholder in ("<str>", "<int", "<float", "<list[", "<file>", "<path>", "{FILE}", "{SNAPSHOT}", "{BASE}",
                        "GRAPH_README"):
        assert placeholder not in result.stdout, (placeholder, result.stdout)


def test_run_help_is_short_lists_every_exit_code_and_every_format() -> None:
    text = invoke("run", "--help").stdout
    lines = text.splitlines()
    # The panels cost a heading and a blank line each; what most runs need is on the first screen.
    assert len(lines) <= 95 and lines.index("Output:") < 30
    flat = " ".join(text.split())
    assert "1 --check-for" in flat and "3 still over budget" in flat
    assert "--from FORMAT" in flat and "dataset" in flat.split("--from FORMAT", 1)[1].split("--to", 1)[0]
    assert "--check-for openai|anthropic|responses" in flat
    assert "--backend auto|tiktoken|bpe" in flat


def test_format_options_show_their_choices() -> None:
    assert "--format table|json" in invoke("count", "--help").stdout
    assert "--format text|json|github" in " ".join(invoke("graph", "validate", "--help").stdout.split())


def test_config_help_says_what_it_does() -> None:
    text = invoke("config", "--help").stdout
    assert "Show or check" not in text
    assert "Print the effective configuration" in text


# -- the recall handle of an offloaded turn ---------------------------------------------


def test_the_handle_a_placeholder_prints_recalls_the_whole_turn(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    result = invoke(str(SESSION), "--max-tokens", "8000", "--store", str(store), "-s", "offload:turns=1")
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    placeholder = next(m["content"] for m in out if str(m["content"]).startswith("[compact: turn 1 offloaded"))
    count = int(placeholder.split("(", 1)[1].split(" messages", 1)[0])
    assert count > 1
    handle = placeholder.split("recall: compact recall --id ", 1)[1].split(";", 1)[0]
    recalled = invoke("recall", "--id", handle, "--store", str(store), "--format", "json")
    assert recalled.exit_code == 0, recalled.output
    messages = read_messages(recalled.stdout)
    assert len(messages) == count
    original = read_messages(SESSION.read_text())
    lines = [int(n) for n in placeholder.split("lines ", 1)[1].split(")", 1)[0].split("-")]
    assert messages == original[lines[0] - 1 : lines[1]]  # the turn, in order, as it was
    text = invoke("recall", "--id", handle, "--store", str(store))
    assert text.exit_code == 0
    assert text.stdout.count(f"{SESSION}:") == count


def test_a_refused_offload_records_no_turn(tmp_path: Path) -> None:
    from core.store import OffloadStore, StoreError

    store = OffloadStore.open(tmp_path / "s.sqlite", max_bytes=10)
    turn = [{"role": "user", "content": "x" * 100}, {"role": "assistant", "content": "y"}]
    handle = store.stage_group(turn)
    from core.store import OffloadItem

    items = [OffloadItem(source="t", line=i + 1, turn=0, role=m["role"], text=m["content"], message=m)
             for i, m in enumerate(turn)]
    with pytest.raises(StoreError):
        store.offload(items)
    assert store.get_group(handle) is None
    store.close()
    roomy = OffloadStore.open(tmp_path / "t.sqlite")
    handle = roomy.stage_group(turn)
    roomy.offload(items)
    messages, gone = roomy.get_group(handle)  # type: ignore[misc]
    assert [m.message for m in messages] == turn and gone == 0
    roomy.close()


# -- batch and config show --------------------------------------------------------------


def test_batch_labels_an_input_nothing_changed_unchanged(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "small.jsonl").write_bytes((SAMPLES / "short_chat.jsonl").read_bytes())
    (inputs / "big.jsonl").write_bytes(SESSION.read_bytes())
    result = invoke("batch", str(inputs), "--out", str(tmp_path / "out"), "--max-tokens", "8000", "--jobs", "1",
                    "--report", "-")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    statuses = {Path(r["input"]).name: r["status"] for r in report["rows"]}
    assert statuses == {"small.jsonl": "unchanged", "big.jsonl": "compacted"}
    assert (report["totals"]["compacted"], report["totals"]["unchanged"]) == (1, 1)
    table = invoke("batch", str(inputs), "--out", str(tmp_path / "out2"), "--max-tokens", "8000", "--jobs", "1")
    row = next(line for line in table.stdout.splitlines() if line.startswith("small.jsonl"))
    assert "unchanged" in row and "compacted" not in row


def test_batch_names_the_output_of_a_json_array_input_jsonl(tmp_path: Path) -> None:
    source = tmp_path / "in" / "glaive.json"
    source.parent.mkdir()
    source.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    result = invoke("batch", str(source), "--out", str(tmp_path / "out"), "--max-tokens", "8000", "--jobs", "1",
                    "--report", "-")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".glaive.jsonl.compact.json", "glaive.jsonl"]
    assert read_messages((tmp_path / "out" / "glaive.jsonl").read_text()) == json.loads(source.read_text())
    assert json.loads(result.stdout)["rows"][0]["output"].endswith("glaive.jsonl")


def test_batch_refuses_two_inputs_that_would_write_one_output(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (folder / "a.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    result = invoke("batch", str(folder / "a.json"), str(folder / "a.jsonl"), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "would both be written to" in result.stderr


def test_config_show_lists_each_strategy_with_its_effective_parameters() -> None:
    result = invoke("config", "show", "-s", "clear_tool_results", "-s", "sliding_window:keep_messages=5")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["strategies"] == [
        {"kind": "clear_tool_results", "keep_pairs": 3, "keep_recent": 0.5},
        {"kind": "sliding_window", "keep_messages": 5},
    ]


# -- compact graph validate ---------------------------------------------------------------


def _validate(*args: str) -> object:
    return invoke("graph", "validate", *args)


def test_a_duplicate_key_makes_a_snapshot_invalid(tmp_path: Path) -> None:
    snapshot = tmp_path / "g.json"
    snapshot.write_text('{"nodes": [{"id": "a"}], "relationships": [], "nodes": []}')
    result = _validate(str(snapshot))
    assert result.exit_code == 1  # type: ignore[attr-defined]
    assert result.stdout == (  # type: ignore[attr-defined]
        f"{snapshot}: $.nodes: key 'nodes' appears more than once in this object; readers keep only the last "
        "value (keep one of them, merging their values)\n"
    )


def test_a_duplicate_key_inside_an_item_is_named_by_its_path(tmp_path: Path) -> None:
    snapshot = tmp_path / "g.json"
    snapshot.write_text('{"nodes": [{"id": "a"}, {"id": "b", "labels": ["X"], "id": "c"}], "relationships": []}')
    result = _validate(str(snapshot), "--format", "json")
    document = json.loads(result.stdout)  # type: ignore[attr-defined]
    problems = document["files"][0]["problems"]
    assert [(p["code"], p["path"]) for p in problems] == [("duplicate-key", "$.nodes[1].id")]


def test_invalid_utf8_is_reported_at_its_line_and_column(tmp_path: Path) -> None:
    snapshot = tmp_path / "g.json"
    snapshot.write_bytes(b'{"nodes": [],\n "relationships": [], "x\xff": 1}\n')
    result = _validate(str(snapshot))
    assert result.exit_code == 1  # type: ignore[attr-defined]
    assert result.stdout == (  # type: ignore[attr-defined]
        f"{snapshot}:2:25: invalid UTF-8 (byte 0xff) (re-encode the file as UTF-8)\n"
    )


def test_github_annotations_carry_the_line_of_content_problems() -> None:
    result = _validate(str(SAMPLES / "graph" / "invalid.json"), "--format", "github")
    lines = result.stdout.splitlines()  # type: ignore[attr-defined]
    assert lines and all(",line=" in line for line in lines), lines
    text = (SAMPLES / "graph" / "invalid.json").read_text().splitlines()
    for annotation in lines:
        line = int(annotation.split(",line=", 1)[1].split(",", 1)[0])
        column = int(annotation.split(",col=", 1)[1].split(",", 1)[0])
        path = annotation.split("::", 2)[2].split(":", 1)[0]  # $.nodes[1].lables
        last = path.rsplit(".", 1)[-1].split("[", 1)[0]
        if not path.endswith("]"):
            assert text[line - 1][column - 1 :].startswith(f'"{last}"'), (annotation, text[line - 1])


def test_batch_fails_an_input_a_keep_rule_pins_nothing_in(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "short.jsonl").write_bytes((SAMPLES / "short_chat.jsonl").read_bytes())
    (folder / "long.jsonl").write_bytes(SESSION.read_bytes())
    result = invoke("batch", str(folder), "--out", str(tmp_path / "out"), "--keep", "line:100", "--jobs", "1",
                    "--max-tokens", "8000", "--report", "-")
    assert result.exit_code == 1
    rows = {Path(r["input"]).name: r for r in json.loads(result.stdout)["rows"]}
    assert rows["short.jsonl"]["status"] == "failed"
    assert "keep rule 'line:100' starts past the last line (7)" in rows["short.jsonl"]["error"]
    assert rows["long.jsonl"]["status"] == "compacted"


def test_the_formats_run_help_lists_are_the_registered_ones() -> None:
    from cli.commands import FORMATS
    from core import formats

    assert sorted(FORMATS.split(", ")) == sorted(formats.names())


def test_on_an_80_column_terminal_each_strategy_name_and_what_it_did_stay_readable() -> None:
    """A narrow terminal squeezed "what it did" into a ten-character column and cut the names."""
    import io

    from rich.console import Console

    from cli.render import usage_table

    result = invoke(str(SESSION), "--max-tokens", "8000", "--report", "-", "-o", "/dev/null")
    report = json.loads(result.stdout)
    buffer = io.StringIO()
    Console(file=buffer, width=80, no_color=True, color_system=None).print(usage_table(report))
    table = buffer.getvalue()
    assert max(len(line) for line in table.splitlines()) <= 80
    for action in report["actions"]:
        assert action["strategy"] in table  # whole, not cut to "deduplicate_fil…"
    assert "replaced 46 older file-read result(s) with a pointer to the newer read or change" in " ".join(table.split())
