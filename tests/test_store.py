"""The offload store (core.store) and its commands, `compact recall` and `compact store stats`."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from core import store as store_module
from core.errors import CompactError
from core.store import OffloadItem, OffloadStore, StoreError, fts_query
from tests.conftest import ROOT
from tests.helpers import invoke


def item(text: str, *, line: int | None = 1, source: str = "t.jsonl", turn: int = 0, role: str = "user",
         **extra: Any) -> OffloadItem:
    return OffloadItem(source, line, turn, role, text, {"role": role, "content": text, **extra})


def counts(path: Path) -> dict[str, int]:
    """What the file holds, read with plain sqlite3 (not through the store)."""
    db = sqlite3.connect(path)
    try:
        return {
            "messages": db.execute("SELECT count(*) FROM messages").fetchone()[0],
            "sightings": db.execute("SELECT count(*) FROM sightings").fetchone()[0],
            "fts": db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'secret'").fetchone()[0],
            "bytes": db.execute("SELECT content_bytes FROM totals").fetchone()[0],
            "summaries": db.execute("SELECT count(*) FROM summaries").fetchone()[0],
        }
    finally:
        db.close()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


# -- round trip ---------------------------------------------------------------------


def test_offload_recall_get_and_stats_round_trip(path: Path) -> None:
    message = {"role": "assistant", "content": "The vault is in Lisbon", "x-extra": [1, {"b": 2, "a": 1}]}
    with OffloadStore.open(path) as store:
        [handle] = store.offload([OffloadItem("s.jsonl", 7, 3, "assistant", "The vault is in Lisbon", message)])
        digest = hashlib.sha256(orjson.dumps(message, option=orjson.OPT_SORT_KEYS)).hexdigest()
        assert handle == "off_" + digest[:16]
        [hit] = store.recall("vault")
        stored = hit.stored
        assert (stored.handle, stored.content_hash, stored.source, stored.line, stored.turn, stored.role) == (
            handle, digest, "s.jsonl", 7, 3, "assistant")
        assert stored.message == message and list(stored.message) == list(message)  # key order kept
        assert stored.text == "The vault is in Lisbon"
        assert datetime.fromisoformat(stored.created_at).utcoffset().total_seconds() == 0
        assert hit.snippet == "The [vault] is in Lisbon" and hit.score > 0
        assert store.get(handle) == stored
        stats = store.stats()
    assert stats["path"] == str(path) and stats["schema_version"] == store_module.SCHEMA_VERSION
    assert (stats["messages"], stats["sightings"], stats["sources"], stats["summaries"]) == (1, 1, 1, 0)
    assert stats["content_bytes"] == len(b"The vault is in Lisbon") + len(orjson.dumps(message))
    assert stats["bytes_on_disk"] > 0 and stats["max_bytes"] is None and stats["at_cap"] == "refuse"
    assert stats["oldest"] == stats["newest"] == stored.created_at
    with OffloadStore.open(path, create=False) as again:  # it persists
        assert again.get(handle) == stored


def test_the_same_content_keeps_one_row_and_records_each_sighting(path: Path) -> None:
    with OffloadStore.open(path) as store:
        first = store.offload([item("same words", line=2), item("same words", line=9)])
        second = store.offload([item("same words", line=4, source="other.jsonl"), item("same words", line=2)])
        assert len(set(first + second)) == 1
        assert [(s["source"], s["line"]) for s in store.sightings(first[0])] == [
            ("t.jsonl", 2), ("t.jsonl", 9), ("other.jsonl", 4)]
        stats = store.stats()
        assert (stats["messages"], stats["sightings"], stats["sources"]) == (1, 3, 2)
        assert store.get(first[0]).line == 2  # the first sighting is the message's own


def test_recall_is_best_first_and_limited(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item(f"deploy note {i}" + " deploy" * i, line=i) for i in range(1, 8)])
        hits = store.recall("deploy", limit=3)
        assert len(hits) == 3
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert store.recall("deploy", limit=0) == []


def test_all_words_first_then_any_word(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("The vault is in Lisbon", line=1), item("The vault moved to Paris", line=2)])
        assert [h.stored.line for h in store.recall("vault lisbon")] == [1]
        assert {h.stored.line for h in store.recall("vault")} == {1, 2}
        assert [h.stored.line for h in store.recall("lisbon madrid")] == [1]  # no message has both: OR
        assert store.recall("madrid") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ops@example.com", [2]),
        ("a.py", [3]),
        ("C++", [3]),
        ("owner: ops@example.com", [2]),
        ('say "hi"', []),
        ("\"unbalanced", []),
        ("AND OR NOT", [3]),  # operators are plain words: "and" is in line 3
        ("NEAR(vault", []),  # the phrase "near vault"
        ("vault*", [1]),
        ("-vault", [1]),
        ("^vault", [1]),
        ("text:vault", []),
        ("( ) * : ^ + - \"", []),
        ("", []),
        ("🎉", []),
    ],
)
def test_punctuation_in_a_query_is_literal_and_never_a_syntax_error(path: Path, query: str, expected: list[int]) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("The vault is in Lisbon", line=1), item("The owner is ops@example.com", line=2),
                       item("edit a.py and the C++ bindings", line=3)])
        assert [h.stored.line for h in store.recall(query)] == expected


def test_fts_query_quotes_each_word() -> None:
    assert fts_query('ops@example.com say "hi"') == '"ops@example.com" AND "say" AND """hi"""'
    assert fts_query("a b", any_term=True) == '"a" OR "b"'
    assert fts_query("-- ++ 🎉") is None


# -- handles -------------------------------------------------------------------------


def test_a_unique_prefix_of_eight_hex_digits_finds_a_message(path: Path) -> None:
    with OffloadStore.open(path) as store:
        [handle] = store.offload([item("prefix me")])
        stored = store.get(handle)
        assert stored is not None
        assert store.get(handle[:12]) == stored  # off_ + 8
        assert store.get(handle.upper().replace("OFF_", "off_")) == stored
        assert store.get("off_" + stored.content_hash) == stored
        assert store.get(handle[4:]) == stored  # "off_" may be left out
        other = "1" if stored.content_hash.startswith("0") else "0"
        assert store.get("off_" + other * 8) is None
        for bad in (handle[:11], "off_xyz12345", "", "off_"):
            with pytest.raises(StoreError, match="is not a handle"):
                store.get(bad)


def test_an_ambiguous_prefix_is_an_error(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("seed")])
    db = sqlite3.connect(path)
    for suffix in ("1", "2"):
        digest = "abcdef12" + suffix * 56
        db.execute(
            "INSERT INTO messages (content_hash, handle, source, line, turn, role, bytes, created_at, text, message)"
            " VALUES (?, ?, 's', 1, 0, 'user', 2, '2024-01-01T00:00:00Z', 'x', '{}')",
            (digest, "off_" + digest[:16]),
        )
    db.commit()
    db.close()
    with OffloadStore.open(path) as store:
        with pytest.raises(StoreError, match="more than one message"):
            store.get("off_abcdef12")
        assert store.get("off_abcdef121").content_hash.endswith("1")


# -- concurrency ---------------------------------------------------------------------

_WRITER = """
import sys, time
from pathlib import Path
from core.store import OffloadItem, OffloadStore

path, name, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
(go.parent / f"ready-{name}").touch()
while not go.exists():
    time.sleep(0.001)
with OffloadStore.open(path) as store:
    for start in range(0, count, 10):
        batch = [OffloadItem(name, i, i // 2, "tool", f"{name} result {i} shared words",
                             {"role": "tool", "content": f"{name} result {i}"}) for i in range(start, start + 10)]
        store.offload(batch)
        store.put_summary(f"{name}-{start}", "summary", {"start": start})
        time.sleep(0.002)  # a compaction run does other work between writes
print("done")
"""


def test_two_processes_writing_at_once_both_succeed(path: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    count = 300
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, str(count), str(go)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in ("alpha", "beta")
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{name}").exists() for name in ("alpha", "beta")):
        assert time.monotonic() < deadline, "the writers did not start"
        time.sleep(0.01)
    go.touch()  # both start together, and race to create the store too
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert out.strip() == "done"
    with OffloadStore.open(path, create=False) as store:
        stats = store.stats()
        assert (stats["messages"], stats["sightings"], stats["sources"]) == (2 * count, 2 * count, 2)
        assert stats["summaries"] == 2 * count // 10
        for name in ("alpha", "beta"):
            for i in range(count):
                message = {"role": "tool", "content": f"{name} result {i}"}
                stored = store.get(store_module.handle_of(store_module.content_hash(message)))
                assert stored is not None and stored.line == i
            assert len(store.recall(f"{name} shared", limit=1000)) == count


def test_a_store_locked_past_the_timeout_is_a_one_line_error(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("before")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with OffloadStore.open(path, timeout=0.3) as store:
            started = time.monotonic()
            with pytest.raises(StoreError) as caught:
                store.offload([item("secret after")])
            assert time.monotonic() - started < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(caught.value) == (
        f"{path}: cannot offload the store: another process held it locked for over 0.3 s"
        " (rerun when the other compact run has finished)")
    assert counts(path)["messages"] == 1


# -- the size cap --------------------------------------------------------------------


def test_at_cap_refuse_writes_nothing(path: Path) -> None:
    first = item("a" * 100)
    size = 100 + len(orjson.dumps(first.message))
    with OffloadStore.open(path, max_bytes=size + 50) as store:
        store.offload([first])
        before = counts(path)
        with pytest.raises(StoreError, match=r"past its cap of \d+; nothing was written \(raise the cap"):
            store.offload([item("secret " * 20, line=2), item("b", line=3)])
        assert counts(path) == before
        assert store.last_evicted == []
        store.offload([first])  # a sighting only: nothing grows, so it is not refused
        store.offload([item("c", line=4)])  # still fits
        assert store.stats()["messages"] == 2


def test_at_cap_evict_oldest_deletes_the_oldest_until_the_new_ones_fit(path: Path) -> None:
    def sized(i: int) -> OffloadItem:
        return item(f"secret number {i:03d} " + "x" * 60, line=i)

    def run() -> OffloadStore:  # one connection is one compact run
        return OffloadStore.open(path, max_bytes=one * 5, at_cap="evict_oldest")

    one = 80 + len(orjson.dumps(sized(0).message))  # every item has the same size
    with run() as store:
        handles = store.offload([sized(i) for i in range(5)])
        assert store.last_evicted == []
    with run() as store:
        newer = store.offload([sized(i) for i in range(5, 8)])
        assert store.last_evicted == handles[:3]
        for handle in handles[:3]:
            assert store.get(handle) is None
        assert {h.stored.handle for h in store.recall("secret", limit=50)} == set(handles[3:] + newer)
        assert counts(path)["fts"] == 5 and counts(path)["sightings"] == 5
        assert store.stats()["content_bytes"] <= one * 5
        with OffloadStore.open(path, create=False) as reader:  # opened without a cap: the last offload's
            assert (reader.stats()["max_bytes"], reader.stats()["at_cap"]) == (one * 5, "evict_oldest")
    with run() as store:
        # A message this offload refers to again is never the one evicted.
        store.offload([sized(3), sized(8)])
        assert store.last_evicted == [handles[4]]
        assert store.get(handles[3]) is not None
    with run() as store:
        # New messages that cannot fit even in an empty store: refused, nothing written.
        before = counts(path)
        with pytest.raises(StoreError, match="even with every older message evicted .*; nothing was written"):
            store.offload([sized(i) for i in range(100, 106)])
        assert counts(path) == before
        assert store.last_evicted == []


def test_evict_oldest_never_takes_what_this_run_offloaded(path: Path) -> None:
    """The placeholders of a run point at what it offloaded: a later step of the same run is refused instead."""
    def sized(i: int) -> OffloadItem:
        return item(f"secret number {i:03d} " + "x" * 60, line=i)

    one = 80 + len(orjson.dumps(sized(0).message))
    with OffloadStore.open(path, max_bytes=one * 5, at_cap="evict_oldest") as store:
        handles = store.offload([sized(i) for i in range(4)])
        before = counts(path)
        with pytest.raises(StoreError, match="but those this run's placeholders point to"):
            store.offload([sized(i) for i in range(4, 7)])
        assert counts(path) == before
        assert all(store.get(handle) is not None for handle in handles)


def test_a_summary_cached_in_a_step_that_is_rolled_back_is_not_kept(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.begin_step()
        store.put_summary("undone", "a summary", {"by": "test"})
        assert store.get_summary("undone") is not None  # visible to the step itself
        store.discard_step()
        assert store.get_summary("undone") is None
        store.begin_step()
        store.put_summary("kept", "a summary", {"by": "test"})
        store.offload([item("the step's offload")])
    with OffloadStore.open(path, create=False) as reader:
        assert reader.get_summary("undone") is None
        assert reader.get_summary("kept") == {"text": "a summary", "meta": {"by": "test"}}


def test_bad_cap_settings_are_refused(path: Path) -> None:
    with pytest.raises(StoreError, match="unknown at-cap policy 'drop'"):
        OffloadStore.open(path, at_cap="drop")
    with pytest.raises(StoreError, match="at least 1 byte"):
        OffloadStore.open(path, max_bytes=0)
    assert not path.exists()


# -- failed writes leave nothing -------------------------------------------------------


def test_a_transaction_failing_midway_leaves_nothing(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("before")])
    db = sqlite3.connect(path)
    db.execute("CREATE TRIGGER boom BEFORE INSERT ON messages WHEN new.role = 'boom'"
               " BEGIN SELECT RAISE(ABORT, 'boom'); END")
    db.commit()
    db.close()
    before = counts(path)
    with OffloadStore.open(path) as store:
        with pytest.raises(StoreError, match="cannot offload the store: boom"):
            store.offload([item("secret one", line=2), item("secret two", line=3), item("secret", role="boom")])
        assert counts(path) == before
        assert store.recall("secret") == []
        store.offload([item("secret three", line=4)])  # the store still works
    assert counts(path)["messages"] == 2


def test_an_exception_in_the_middle_of_an_offload_rolls_back(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: Any) -> list[str]:
        raise RuntimeError("power cut")

    with OffloadStore.open(path) as store:
        store.offload([item("before")])
        before = counts(path)
        monkeypatch.setattr(OffloadStore, "_enforce_cap", explode)
        with pytest.raises(RuntimeError):
            store.offload([item("secret", line=2)])
        assert counts(path) == before


def test_a_full_disk_is_a_store_error_and_leaves_nothing(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("before")])
        before = counts(path)
        pages = store._conn().execute("PRAGMA page_count").fetchone()[0]
        store._conn().execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
        with pytest.raises(StoreError, match="the disk is full"):
            store.offload([item(f"secret {i} " + "y" * 4000, line=i) for i in range(2, 40)])
        assert counts(path) == before


def test_a_read_only_store_is_a_store_error(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item("before")])
        store._conn().execute("PRAGMA query_only = ON")
        with pytest.raises(StoreError, match="it is read-only"):
            store.offload([item("secret", line=2)])
    assert counts(path)["messages"] == 1


# -- files that are not stores ---------------------------------------------------------


def one_line(exc: CompactError) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


def test_a_file_that_is_not_sqlite(path: Path) -> None:
    path.write_text("this is not a database\n" * 200)
    with pytest.raises(StoreError) as caught:
        OffloadStore.open(path)
    assert one_line(caught.value) == f"{path}: not a SQLite database (give --store a new file name or a store compact created)"


def test_a_sqlite_file_of_something_else(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE people (name TEXT)")
    db.close()
    with pytest.raises(StoreError, match="a SQLite database, but not a compact store"):
        OffloadStore.open(path)


def test_a_corrupt_store(path: Path) -> None:
    with OffloadStore.open(path) as store:
        store.offload([item(f"word{i} " * 50, line=i) for i in range(200)])
    with path.open("r+b") as handle:
        handle.seek(4096 * 3)
        handle.write(b"\xa5" * 4096 * 4)
    with pytest.raises(StoreError, match=r"the store is corrupt .*move the file aside"), OffloadStore.open(path) as store:
        store.recall("word5")
        store.stats()


def test_a_store_of_a_newer_version(path: Path) -> None:
    OffloadStore.open(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(StoreError) as caught:
        OffloadStore.open(path)
    assert one_line(caught.value) == (
        f"{path}: the store has schema version 99, newer than this compact reads (1)"
        " (upgrade compact, or use another --store file)")


def test_paths_that_cannot_be_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a folder"):
        OffloadStore.open(tmp_path)
    with pytest.raises(StoreError, match="folder does not exist"):
        OffloadStore.open(tmp_path / "missing" / "s.sqlite")
    with pytest.raises(StoreError, match="no store here"):
        OffloadStore.open(tmp_path / "s.sqlite", create=False)
    assert list(tmp_path.iterdir()) == []


def test_sqlite_without_fts5_is_a_clear_error(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module.database, "_FTS5_PROBE", "CREATE VIRTUAL TABLE temp.probe USING no_such_fts(x)")
    with pytest.raises(StoreError, match=r"has no FTS5 .*use a Python whose SQLite is built with FTS5"):
        OffloadStore.open(path)


def test_a_closed_store_says_so(path: Path) -> None:
    store = OffloadStore.open(path)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="the store is closed"):
        store.recall("x")


# -- the summary cache ---------------------------------------------------------------


def test_the_summary_cache(path: Path) -> None:
    from core.strategies.summarize import _cache_key
    from core.summarizers.base import SummaryRequest

    class Model:
        def __init__(self, prompt: str) -> None:
            self.prompt = prompt

        def identity(self) -> str:
            return f"m:{self.prompt}"

    span = ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    key = _cache_key(Model("Summarise:"), SummaryRequest(span, 1, 1))
    reordered = tuple(dict(reversed(list(m.items()))) for m in span)
    assert key == _cache_key(Model("Summarise:"), SummaryRequest(reordered, 1, 1))
    assert key != _cache_key(Model("Summarise briefly:"), SummaryRequest(span, 1, 1))
    assert key != _cache_key(Model("Summarise:"), SummaryRequest(span[:1], 1, 1))
    with OffloadStore.open(path) as store:
        assert store.get_summary(key) is None
        store.put_summary(key, "a then b", {"model": "m", "tokens": 3})
        assert store.get_summary(key) == {"text": "a then b", "meta": {"model": "m", "tokens": 3}}
        store.put_summary(key, "a, b", {})
        assert store.get_summary(key) == {"text": "a, b", "meta": {}}
        with pytest.raises(StoreError, match="summary meta is not JSON"):
            store.put_summary("k", "t", {"when": object()})
    with OffloadStore.open(path) as again:
        assert again.get_summary(key) == {"text": "a, b", "meta": {}}
        assert again.stats()["summaries"] == 1


def test_the_summary_cache_keeps_the_newest_at_its_cap(path: Path) -> None:
    with OffloadStore.open(path, max_summaries=3) as store:
        for i in range(5):
            store.put_summary(f"k{i}", f"s{i}", {"i": i})
        assert [store.get_summary(f"k{i}") is not None for i in range(5)] == [False, False, True, True, True]


# -- the commands ----------------------------------------------------------------------


@pytest.fixture
def filled(path: Path) -> Path:
    with OffloadStore.open(path) as store:
        store.offload([
            OffloadItem("session.jsonl", 2, 0, "user", "The vault is in Lisbon. Reply with: noted",
                        {"role": "user", "content": "The vault is in Lisbon. Reply with: noted"}),
            OffloadItem("session.jsonl", 4, 1, "user", "The owner is ops@example.com",
                        {"role": "user", "content": "The owner is ops@example.com"}),
        ])
    return path


def test_compact_recall_finds_the_vault(filled: Path) -> None:
    result = invoke("recall", "vault", "--store", str(filled))
    assert result.exit_code == 0, result.stderr
    head, snippet = result.stdout.splitlines()
    assert head.startswith("off_") and "session.jsonl:2  user  turn 1  score " in head
    assert snippet.strip() == "The [vault] is in Lisbon. Reply with: noted"


def test_compact_recall_reads_compact_store_from_the_environment(filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPACT_STORE", str(filled))
    result = invoke("recall", "ops@example.com", "--format", "json")
    assert result.exit_code == 0, result.stderr
    [hit] = json.loads(result.stdout)
    assert set(hit) == {"handle", "content_hash", "source", "line", "turn", "role", "text", "message",
                        "created_at", "score", "snippet"}
    assert hit["line"] == 4 and hit["message"] == {"role": "user", "content": "The owner is ops@example.com"}
    assert hit["snippet"] == "The owner is [ops@example.com]"


def test_compact_recall_by_id(filled: Path) -> None:
    [hit] = json.loads(invoke("recall", "vault", "--store", str(filled), "-f", "json").stdout)
    text = invoke("recall", "--id", hit["handle"][:12], "--store", str(filled))
    assert text.exit_code == 0 and text.stdout == "The vault is in Lisbon. Reply with: noted\n"
    as_json = invoke("recall", "--id", hit["handle"], "--store", str(filled), "--format", "json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == hit["message"]
    assert as_json.stdout.count("\n") == 1  # one JSONL line, ready to paste back into a transcript


def test_compact_recall_finding_nothing_is_exit_1(filled: Path) -> None:
    result = invoke("recall", "madrid", "--store", str(filled))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"compact: no offloaded message matches 'madrid' in {filled}\n"
    missing = invoke("recall", "--id", "off_0000000000000000", "--store", str(filled))
    assert missing.exit_code == 1 and "no offloaded message has the handle off_0000000000000000" in missing.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["vault", "--id", "off_12345678"], "give a QUERY or --id HANDLE, not both"),
        ([], "nothing to recall (give a QUERY, or --id HANDLE)"),
        (["--id", "nope"], "'nope' is not a handle"),
    ],
)
def test_compact_recall_bad_usage_is_exit_2(filled: Path, args: list[str], message: str) -> None:
    result = invoke("recall", *args, "--store", str(filled))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("compact: error: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_compact_recall_never_creates_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "none.sqlite"
    result = invoke("recall", "vault", "--store", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"compact: error: {missing}: no store here (check the path or COMPACT_STORE; a store is created by offloading)\n"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.delenv("COMPACT_STORE", raising=False)
    no_store = invoke("recall", "vault")
    assert no_store.exit_code == 2 and "no store given (pass --store PATH or set COMPACT_STORE)" in no_store.stderr
    stats = invoke("store", "stats", "--store", str(missing))
    assert stats.exit_code == 2 and list(tmp_path.iterdir()) == []


def test_compact_store_stats(filled: Path) -> None:
    as_json = invoke("store", "stats", "--store", str(filled), "--format", "json")
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert data["messages"] == 2 and data["sources"] == 1 and data["path"] == str(filled)
    text = invoke("store", "stats", "--store", str(filled))
    assert text.exit_code == 0
    rows = dict(line.split("  ", 1) for line in text.stdout.splitlines())
    assert rows["messages"].strip() == "2" and rows["max bytes"].strip() == "none"
    assert rows["path"].strip() == str(filled)
    assert rows["bytes on disk"].strip() == f"{data['bytes_on_disk']:,}"  # (grouped, as every table's figures)
    assert rows["schema version"].strip() == str(data["schema_version"])


def test_an_empty_file_is_not_a_store_to_read(path: Path) -> None:
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="an empty file, not a compact store"):
        OffloadStore.open(path, create=False)
    assert path.read_bytes() == b""
    with OffloadStore.open(path) as store:  # offloading may start a store in it
        store.offload([item("first")])


def test_the_report_ledger_and_the_store_agree_on_handles(path: Path) -> None:
    import core.messages

    content_handle = getattr(core.messages, "content_handle", None)
    if content_handle is None:
        pytest.skip("core.messages.content_handle is not there in this checkout")
    message = {"role": "tool", "tool_call_id": "c1", "content": "ok", "z": {"b": 1, "a": 2}}
    with OffloadStore.open(path) as store:
        assert store.offload([OffloadItem("t", 1, 0, "tool", "ok", message)]) == [content_handle(message)]


@pytest.mark.parametrize(("damage", "command"), [
    ("UPDATE schema_version SET version = 'abc'", ["store", "stats"]),
    ("UPDATE messages SET message = '{not json'", ["recall", "vault"]),
])
def test_a_store_changed_outside_compact_is_one_line_not_a_traceback(damage: str, command: list[str],
                                                                      filled: Path) -> None:
    import sqlite3

    store = filled
    with sqlite3.connect(store) as db:
        db.execute(damage)
    result = invoke(*command, "--store", str(store))
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "the store holds a value of the wrong shape" in lines[0] and "Traceback" not in result.stderr


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Any:
    """A folder and its read-only view (a bind mount remounted read-only): what an archived or shared
    disk is. Mounting needs root; elsewhere the test is skipped."""
    source, view = tmp_path / "source", tmp_path / "view"
    source.mkdir()
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (needs root)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield source, view
    finally:
        subprocess.run(["umount", str(view)], capture_output=True)


def test_a_store_on_a_read_only_disk_is_still_recalled_and_counted(read_only_folder: Any, samples: Path) -> None:
    # A WAL store in a folder that cannot hold its -shm file: recall, stats and a dry run read it.
    source, view = read_only_folder
    made = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "2000", "--store", str(source / "s.sqlite"),
                  "-o", str(source / "out.jsonl"))
    assert made.exit_code == 0, made.output
    found = invoke("recall", "pytest", "--store", str(view / "s.sqlite"), "-n", "1")
    assert found.exit_code == 0, found.output
    assert "pytest" in found.stdout
    stats = invoke("store", "stats", "--store", str(view / "s.sqlite"), "--format", "json")
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["messages"] > 0
    dry = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "2000", "--store", str(view / "s.sqlite"),
                 "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert sorted(p.name for p in view.iterdir()) == ["out.jsonl", "s.sqlite"]  # nothing written beside it
    # The preview still says what the real run would meet.
    assert f"compact: warning: a real run could not write the store {view / 's.sqlite'}: its folder is read-only" \
        in dry.stderr
    inputs = source / "inputs"
    inputs.mkdir()
    (inputs / "a.jsonl").write_bytes((samples / "agent_session.jsonl").read_bytes())
    batch_dry = invoke("batch", str(view / "inputs"), "--out", str(source / "outs"), "--max-tokens", "2000",
                       "--store", str(view / "s.sqlite"), "--dry-run")
    assert batch_dry.exit_code == 0, batch_dry.output
    assert "a real run could not write the store" in batch_dry.stderr
    # A real run cannot write there, and says so in one line.
    run = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "2000", "--store", str(view / "s.sqlite"),
                 "-o", str(source / "again.jsonl"))
    assert run.exit_code == 2 and len(run.stderr.splitlines()) == 1
    assert "cannot write the store: its folder is read-only" in run.stderr


def test_a_read_only_store_with_unmerged_writes_is_an_error_not_a_stale_answer(read_only_folder: Any, samples: Path,
                                                                             tmp_path: Path) -> None:
    # Another connection holds the store open, so the second run's writes stay in its -wal file; a copy
    # of both files on a read-only disk cannot be read whole without a -shm file. Reading the main
    # file alone would answer from before the second run, and say nothing.
    source, view = read_only_folder
    live = tmp_path / "live"
    live.mkdir()
    store = live / "s.sqlite"
    first = invoke(str(samples / "agent_session.jsonl"), "--max-tokens", "2000", "--store", str(store), "-o", os.devnull)
    assert first.exit_code == 0, first.output
    holder = sqlite3.connect(store)
    try:
        holder.execute("SELECT count(*) FROM messages").fetchone()
        second = invoke(str(samples / "seed_example.jsonl"), "--max-messages", "4", "--store", str(store),
                        "-s", "offload", "-o", os.devnull)
        assert second.exit_code == 0, second.output
        assert (live / "s.sqlite-wal").stat().st_size > 0
        for name in ("s.sqlite", "s.sqlite-wal"):
            (source / name).write_bytes((live / name).read_bytes())
    finally:
        holder.close()
    found = invoke("recall", "vault", "--store", str(view / "s.sqlite"))
    assert found.exit_code == 2
    assert "writes not yet merged into it (its -wal file)" in found.stderr and len(found.stderr.splitlines()) == 1
