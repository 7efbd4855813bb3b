"""What Claude Code does with a compacted session on --resume: it loads the history after the last
``compact_boundary`` only, and sizes its context from the last assistant line's ``message.usage``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import invoke

SESSION = "claude-code/cctrace-phase0-investigation.jsonl"
CUT = 300  # the boundary goes after this line (Claude Code loads only what follows it)


def rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def with_boundary(realdata: Path, tmp_path: Path) -> tuple[Path, list[bytes], Path]:
    """cctrace with a compact_boundary and a summary after line CUT, as Claude Code's /compact writes them;
    also the live part alone, for comparison."""
    raw = (realdata / SESSION).read_bytes().splitlines(keepends=True)
    dead, live = raw[:CUT], raw[CUT:]
    first_live = json.loads(live[0])
    boundary = {"parentUuid": None, "logicalParentUuid": json.loads(dead[-1]).get("uuid"), "isSidechain": False,
                "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                "compactMetadata": {"trigger": "manual", "preTokens": 144501}, "level": "info",
                "uuid": "b0b0b0b0-0000-4000-8000-000000000001", "sessionId": first_live.get("sessionId"),
                "timestamp": "2026-01-06T10:00:00.000Z"}
    summary = {"parentUuid": boundary["uuid"], "isSidechain": False, "type": "user", "isCompactSummary": True,
               "isVisibleInTranscriptOnly": True, "sessionId": first_live.get("sessionId"),
               "message": {"role": "user", "content": "This session is being continued from a previous "
                                                      "conversation that ran out of context. Summary: cctrace."},
               "uuid": "b0b0b0b0-0000-4000-8000-000000000002", "timestamp": "2026-01-06T10:00:01.000Z"}
    added = [(json.dumps(boundary) + "\n").encode(), (json.dumps(summary) + "\n").encode()]
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(dead + added + live))
    alone = tmp_path / "live.jsonl"
    alone.write_bytes(b"".join(added + live))
    return path, dead, alone


def tokens(path: Path) -> int:
    run = invoke("count", str(path), "--format", "json")
    assert run.exit_code == 0, run.stderr
    return int(json.loads(run.stdout)["before"]["tokens"])


def test_only_the_history_after_the_last_compact_boundary_is_counted(realdata: Path, tmp_path: Path) -> None:
    path, _, alone = with_boundary(realdata, tmp_path)
    assert tokens(path) == tokens(alone)


def test_the_history_before_the_boundary_is_kept_as_it_is(realdata: Path, tmp_path: Path) -> None:
    path, dead, _ = with_boundary(realdata, tmp_path)
    out = tmp_path / "out.jsonl"
    run = invoke(str(path), "--max-tokens", "8000", "-o", str(out))
    assert run.exit_code == 0, run.stderr
    written = out.read_bytes().splitlines(keepends=True)
    assert written[:CUT] == dead


def usage_claude_code_reads(lines: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    """Claude Code sizes its context from the last assistant line with a usage (not a synthetic one)."""
    for position in range(len(lines) - 1, -1, -1):
        line = lines[position]
        message = line.get("message") or {}
        if line.get("type") == "assistant" and "usage" in message and message.get("model") != "<synthetic>":
            return position, message["usage"]
    return None


def test_the_usage_claude_code_reads_tells_the_truth_after_compaction(realdata: Path, tmp_path: Path) -> None:
    source = realdata / SESSION
    before = rows(source.read_text())
    run = invoke(str(source), "--max-tokens", "8000")
    assert run.exit_code == 0, run.stderr
    after = rows(run.stdout)
    original = {json.dumps(line, sort_keys=True) for line in before}
    first_change = next(i for i, line in enumerate(after) if json.dumps(line, sort_keys=True) not in original)
    found = usage_claude_code_reads(after)
    # Either no usage at all, or one from before the first change: the history it measured is unchanged.
    assert found is None or found[0] < first_change
    unlimited = invoke(str(source), "--unlimited")
    assert unlimited.stdout.encode() == source.read_bytes()  # nothing compacted: every usage stays
