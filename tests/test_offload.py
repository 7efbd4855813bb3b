"""Offload with the embedded store: nothing removed is lost, and failed writes change nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from core.store import OffloadStore
from tests.helpers import invoke, read_messages

SEED_ARGS = ("--max-messages", "6", "--context-window", "256", "--warn-fraction", "0.2", "--preset", "seed")


def test_seed_example_offloads_the_first_turns_and_recall_finds_the_vault(samples: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    report = tmp_path / "r.json"
    result = invoke(str(samples / "seed_example.jsonl"), *SEED_ARGS, "--strategy", "offload:turns=3",
                    "--store", str(store), "--report", str(report))
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    placeholders = [m["content"] for m in out if m["content"].startswith("[compact: turn")]
    # Two placeholders and the warning would not fit beside the pinned two: one stands for both turns.
    assert len(placeholders) == 1 and len(out) == 6
    assert placeholders[0].startswith("[compact: turns 1-2 offloaded (4 messages, lines 2-5); recall: compact recall --id off_")
    assert 'asked: "The vault is in Lisbon. Reply with: noted"' in placeholders[0]
    ledger = json.loads(report.read_text())["removed"]
    assert {e["line"] for e in ledger} == {2, 3, 4, 5}
    assert all(e["handle"].startswith("off_") for e in ledger)

    found = invoke("recall", "vault", "--store", str(store), "--format", "json")
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)
    assert hits[0]["text"] == "The vault is in Lisbon. Reply with: noted"
    assert hits[0]["line"] == 2 and hits[0]["source"].endswith("seed_example.jsonl")
    one = invoke("recall", "--id", ledger[0]["handle"], "--store", str(store), "--format", "json")
    assert json.loads(one.stdout) == {"role": "user", "content": "The vault is in Lisbon. Reply with: noted"}


def test_with_a_store_cleared_results_can_be_recalled(samples: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    report = tmp_path / "r.json"
    source = samples / "agent_session.jsonl"
    invoke(str(source), "--max-tokens", "8000", "--store", str(store), "--report", str(report),
           "--strategy", "clear_tool_results", "--strategy", "drop_observations")
    ledger = json.loads(report.read_text())["removed"]
    cleared = [e for e in ledger if e["strategy"] == "clear_tool_results"]
    assert cleared
    original_lines = source.read_text().splitlines()
    with OffloadStore.open(store) as opened:
        for entry in cleared[:20]:
            stored = opened.get(entry["handle"])
            assert stored is not None
            assert stored.message == json.loads(original_lines[entry["line"] - 1])


def test_a_failed_offload_leaves_the_transcript_as_it_was(samples: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    config = tmp_path / "c.toml"
    config.write_text(f'store = "{store}"\nstore_max_bytes = 4096\nstore_at_cap = "refuse"\n')
    report = tmp_path / "r.json"
    result = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "8000", "--config", str(config),
                    "--report", str(report))
    assert result.exit_code == 0, result.output
    assert result.stdout == (samples / "agent_session.jsonl").read_text()  # every step was rolled back
    data = json.loads(report.read_text())
    assert data["removed"] == [] and data["over_budget"] is True
    assert "store" in data["last_error"] or "cap" in data["last_error"]
    with OffloadStore.open(store) as opened:
        assert opened.stats()["messages"] == 0


def test_the_summary_cache_makes_a_rerun_ask_nothing(chat_server: Any, samples: Path, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    chat_server.default = lambda request: (
        '<summary topic="vault" compressed-from-turns="1-3">The vault is in Lisbon, the key rotates on friday, '
        "the owner is ops@example.com.</summary>\n## Preserved Kinds: decision, rationale")
    args = [str(samples / "seed_example.jsonl"), "--max-messages", "6", "--strategy", "summarize", "--store", str(store),
            "--summarizer", "openai", "--summarizer-url", chat_server.url, "--summarizer-model", "m"]
    first = invoke(*args)
    assert len(chat_server.requests) == 1
    second = invoke(*args)
    assert len(chat_server.requests) == 1  # answered from the store
    assert second.stdout == first.stdout


def test_placeholders_and_summaries_are_never_offloaded_or_summarized_again(samples: Path, tmp_path: Path) -> None:
    from tests.helpers import msg, write_messages

    messages = [msg("system", "s")]
    for turn in range(8):
        messages += [msg("user", f"ticket {turn} " * 30), msg("assistant", f"done {turn} " * 30)]
    source = write_messages(tmp_path / "in.jsonl", messages)
    store = tmp_path / "s.sqlite"
    args = ["--store", str(store), "--summarizer", "extractive", "--strategy", "offload:turns=2",
            "--strategy", "summarize:turns=3", "--keep", "match:^ticket 0 ", "--max-tokens", "600"]
    first = invoke(str(source), *args)
    out = read_messages(first.stdout)
    for message in out:
        assert not message["content"].startswith("[compact: turn") or '"[compact:' not in message["content"]
        assert "- note: CUCA summary" not in message["content"]
    again = tmp_path / "again.jsonl"
    again.write_text(first.stdout)
    second = invoke(str(again), *args)
    assert second.stdout == first.stdout  # a second run at the same budget changes nothing


def test_offload_placeholder_counts_every_message_that_went(samples: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    report = tmp_path / "r.json"
    result = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "60000", "--store", str(store),
                    "--strategy", "offload:turns=1", "--report", str(report))
    placeholder = next(m["content"] for m in read_messages(result.stdout) if m["content"].startswith("[compact: turn"))
    removed = [e for e in json.loads(report.read_text())["removed"] if e["strategy"] == "offload" and e["pass"] == 1]
    assert f"({len(removed)} messages, lines {min(e['line'] for e in removed)}-{max(e['line'] for e in removed)})" in placeholder


def test_a_lone_surrogate_is_offloaded_and_recalled_exactly(tmp_path: Path) -> None:
    # Half an emoji ("\ud83d", which truncated JavaScript strings leave) is valid JSON: a store
    # that refused it made every strategy fail, and the run came back uncompacted.
    source = tmp_path / "surrogate.jsonl"
    lines = [json.dumps({"role": "system", "content": "You are terse."})]
    for i in range(6):
        lines.append(json.dumps({"role": "user", "content": f"question {i} " + "words " * 80}))
        lines.append(json.dumps({"role": "assistant", "content": f"half an emoji X then answer {i} " + "more " * 80})
                     .replace("emoji X", "emoji \\ud83d"))
    lines.append(json.dumps({"role": "user", "content": "last question"}))
    source.write_text("\n".join(lines) + "\n")
    store, report = tmp_path / "s.sqlite", tmp_path / "r.json"
    outcome = invoke(str(source), "--max-tokens", "600", "--store", str(store), "--report", str(report), "-o",
                     str(tmp_path / "out.jsonl"))
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(report.read_text())
    assert data["last_error"] is None and not data["over_budget"]
    found = invoke("recall", "--store", str(store), "emoji")
    assert found.exit_code == 0, found.output
    handle = found.stdout.split()[0]
    recalled = invoke("recall", "--store", str(store), "--id", handle, "--format", "json")
    assert recalled.exit_code == 0, recalled.output
    assert "\\ud83d" in recalled.stdout  # the message itself, as its JSON holds it


def test_a_turn_whose_request_stays_pinned_is_not_said_to_have_asked_the_reply(tmp_path: Path) -> None:
    # The task statement stays (pinned); its turn's reply is offloaded alone. The placeholder said
    # 'asked: "OK."' of the assistant's reply, and "1 messages".
    source = tmp_path / "t.jsonl"
    turns = [{"role": "user", "content": "We are tuning app/config.py."}, {"role": "assistant", "content": "OK, reading it."}]
    for i in range(6):
        turns += [{"role": "user", "content": f"Step {i}: check the logs. " + "Quiet. " * 30},
                  {"role": "assistant", "content": f"Step {i} checked. " + "Quiet. " * 30}]
    source.write_text("".join(json.dumps(m) + "\n" for m in [*turns, {"role": "user", "content": "Now run the tests."}]))
    result = invoke(str(source), "--max-tokens", "400", "--store", str(tmp_path / "s.db"), "-s", "offload")
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    first = next(m["content"] for m in out if m["content"].startswith("[compact: turn 1 offloaded"))
    assert first.startswith("[compact: turn 1 offloaded (1 message, line 2);")
    assert 'assistant said: "OK, reading it."' in first and "asked:" not in first
    second = next(m["content"] for m in out if m["content"].startswith("[compact: turn 2 offloaded"))
    assert second.startswith("[compact: turn 2 offloaded (2 messages, lines 3-4);") and 'asked: "Step 0:' in second


def test_under_a_message_budget_the_offload_placeholders_fold_into_one(samples: Path, tmp_path: Path) -> None:
    """`--max-messages 4`: the system prompt, the task statement and the last question are pinned;
    one placeholder for the three turns that went fits beside them, three (one per turn) did not.
    Its turn numbers are the input's, and each handle it names brings its messages back."""
    store = tmp_path / "s.db"
    result = invoke(str(samples / "seed_example.jsonl"), "--max-messages", "4", "--strategy", "offload:turns=2",
                    "--store", str(store))
    assert result.exit_code == 0, result.output
    out = read_messages(result.stdout)
    assert len(out) == 4
    placeholder = out[1]["content"]
    assert placeholder.startswith("[compact: turns 1-3 offloaded (5 messages, lines 3-7); recall: compact recall --id off_")
    handles = re.findall(r"--id (off_[0-9a-f]{16})", placeholder)
    recalled: list[Any] = []
    for handle in handles:
        found = invoke("recall", "--id", handle, "--store", str(store), "--format", "json")
        assert found.exit_code == 0, found.output
        recalled += read_messages(found.stdout)  # a turn: its messages, one a line
    seed = read_messages((samples / "seed_example.jsonl").read_text())
    assert recalled == seed[2:7]


def test_offload_placeholders_name_the_input_turns_across_passes(tmp_path: Path) -> None:
    """One turn per pass, five passes: each placeholder names its own turn of the input (from the
    third on they all said "turn 2": the turns were counted in what was left)."""
    turns = [{"role": "system", "content": "You are terse."}]
    for i in range(5):
        turns += [{"role": "user", "content": f"Step {i}: check the logs. " + "Quiet. " * 30},
                  {"role": "assistant", "content": f"Step {i} checked. " + "Quiet. " * 30}]
    source = tmp_path / "t.jsonl"
    source.write_text("".join(json.dumps(m) + "\n" for m in [*turns, {"role": "user", "content": "Now run the tests."}]))
    result = invoke(str(source), "--max-tokens", "400", "--strategy", "offload:turns=1", "--store", str(tmp_path / "s.db"))
    assert result.exit_code == 0, result.output
    said = [m["content"] for m in read_messages(result.stdout) if m["content"].startswith("[compact: turn")]
    assert [re.match(r"\[compact: (turns? [\d-]+) offloaded \(([^)]*)\)", s).groups() for s in said] == [
        ("turn 1", "1 message, line 3"), *((f"turn {n}", f"2 messages, lines {2 * n}-{2 * n + 1}") for n in range(2, 6))]


def test_no_placeholder_when_the_pinned_messages_fill_the_message_budget(samples: Path, tmp_path: Path) -> None:
    """`--max-messages 2` with the system prompt and the last question pinned: no room for any
    placeholder, so none is left (the budget is met); the turns are in the store all the same."""
    store, report = tmp_path / "s.db", tmp_path / "r.json"
    result = invoke(str(samples / "seed_example.jsonl"), "--max-messages", "2", "--preset", "seed",
                    "--strategy", "offload:turns=2", "--store", str(store), "--report", str(report))
    assert result.exit_code == 0, result.output
    assert [m["role"] for m in read_messages(result.stdout)] == ["system", "user"]
    assert json.loads(report.read_text())["over_budget"] is False
    found = invoke("recall", "vault", "--store", str(store), "--format", "json")
    assert json.loads(found.stdout)[0]["text"] == "The vault is in Lisbon. Reply with: noted"
