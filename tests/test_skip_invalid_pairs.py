"""--skip-invalid: an invalid line left out of a block of parallel tool results does not split pairs.

The shape of a real pi session: an assistant message with 10 toolCall blocks, its 10
results on the next lines, one of them invalid JSON. At every budget, each call kept
has its results, and each result kept has its call.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

BROKEN = '{"type":"message","id":"e0009","parentId": BROKEN'


def pi_session(current_turn: bool) -> str:
    lines = [json.dumps({"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T10:00:00.000Z",
                         "cwd": "/x"})]
    parent = None
    number = 0

    def entry(message: dict) -> None:
        nonlocal parent, number
        number += 1
        entry_id = f"e{number:04d}"
        lines.append(json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                                 "timestamp": "2025-01-01T10:00:00.000Z", "message": message}))
        parent = entry_id

    entry({"role": "user", "content": "first task " + "x " * 50})
    calls = [{"type": "toolCall", "id": f"t{i}", "name": "read", "arguments": {"path": f"f{i}"}} for i in range(10)]
    entry({"role": "assistant", "content": [{"type": "text", "text": "reading"}, *calls]})
    for i in range(10):
        if i == 6:  # this result is the invalid line
            lines.append(BROKEN)
            number += 1
            parent = f"e{number:04d}"
            continue
        entry({"role": "toolResult", "toolCallId": f"t{i}", "toolName": "read",
               "content": [{"type": "text", "text": f"result {i} " + "y " * 300}], "isError": False})
    if not current_turn:
        entry({"role": "assistant", "content": [{"type": "text", "text": "done " + "z " * 100}]})
        entry({"role": "user", "content": "next please"})
        entry({"role": "assistant", "content": [{"type": "text", "text": "ok " + "w " * 50}]})
    return "\n".join(lines) + "\n"


def kept_pairs(output: str) -> tuple[set[str], set[str]]:
    calls: set[str] = set()
    results: set[str] = set()
    for line in output.splitlines():
        if line == BROKEN:
            continue
        message = json.loads(line).get("message") or {}
        if message.get("role") == "toolResult":
            results.add(message["toolCallId"])
        elif isinstance(message.get("content"), list):
            calls.update(b["id"] for b in message["content"] if b.get("type") == "toolCall")
    return calls, results


@pytest.mark.parametrize("current_turn", [False, True], ids=["earlier-turn", "current-turn"])
@pytest.mark.parametrize("budget", [600, 800, 1200, 1500, 2200, 3000])
def test_pairs_on_both_sides_of_an_invalid_result_stay_whole(tmp_path: Path, current_turn: bool, budget: int) -> None:
    source = tmp_path / "session.jsonl"
    source.write_text(pi_session(current_turn))
    process = subprocess.run(["compact", str(source), "--skip-invalid", "--max-tokens", str(budget), "-q"],
                             capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, process.stderr
    assert BROKEN not in process.stdout.splitlines()  # left out: the output is all JSON
    entries = [json.loads(line) for line in process.stdout.splitlines()]
    ids = {entry["id"] for entry in entries}
    assert all(entry.get("parentId") in ids | {None} for entry in entries)  # the entry after it links past it
    calls, results = kept_pairs(process.stdout)
    assert results == calls - {"t6"}, (sorted(calls), sorted(results))
    again = subprocess.run(["compact", "-", "--unlimited", "-q"], input=process.stdout, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and again.stdout == process.stdout, again.stderr  # pi's one branch, read whole


def test_a_line_of_no_format_first_is_left_out_with_the_others_and_the_output_reads_back(tmp_path: Path) -> None:
    # --skip-invalid leaves such a line out wherever it is: detection skips it too instead of
    # refusing the file.
    source = tmp_path / "t.jsonl"
    chat = [{"role": "user", "content": "first question " * 50}, {"role": "assistant", "content": "answer " * 80},
            {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]
    source.write_text("\n".join([json.dumps({"note": "not a message"}), *map(json.dumps, chat)]) + "\n")
    refused = subprocess.run(["compact", str(source), "-q"], capture_output=True, text=True)
    assert refused.returncode == 2 and f"{source}:1: this line is not a message" in refused.stderr
    out = tmp_path / "out.jsonl"
    done = subprocess.run(["compact", str(source), "--skip-invalid", "--max-tokens", "40", "--summarizer", "none",
                           "-o", str(out), "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [chat[2], chat[3]]  # the line of no format left out with the turns compacted away
    again = subprocess.run(["compact", str(out), "--unlimited", "-q"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert [json.loads(line) for line in again.stdout.splitlines()] == lines
