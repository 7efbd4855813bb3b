"""A JSON text of records (GitHub review comments) cut to fit: field by field, not through its line."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.counting.counter import MessageCounter
from core.engine.clamp import clamp_text
from tests.helpers import shared_counter


def review_comment(number: int) -> dict:
    """One record as `gh api repos/o/r/pulls/7/comments` gives it: a long diff hunk, a user with
    a dozen links, _links repeating the record's own, reactions all zero."""
    comment_id = 2738972000 + number
    api = f"https://api.github.com/repos/entireio/cli/pulls/comments/{comment_id}"
    html = f"https://github.com/entireio/cli/pull/112#discussion_r{comment_id}"
    hunk = "@@ -99,24 +128,517 @@ func runExplain(w io.Writer) error {\n" + "".join(
        f"+\tfiller{i} := strings.Repeat(\"-\", {i})\n" for i in range(120)) + f"+\treturn explainCheckpoint{number}(w)"
    login = "khaong"
    return {
        "url": api, "pull_request_review_id": 3719578000 + number, "id": comment_id,
        "node_id": f"PRRC_kwDOQyo98M6jQ{number:03d}", "diff_hunk": hunk, "path": f"cmd/entire/cli/explain{number}.go",
        "commit_id": "9e64962ed3da0b1351aefa81cb6e2f2849a819d5",
        "user": {"login": login, "id": 42, "url": f"https://api.github.com/users/{login}",
                 **{f"{what}_url": f"https://api.github.com/users/{login}/{what}" for what in
                    ("followers", "following", "gists", "starred", "subscriptions", "organizations", "repos", "events")},
                 "type": "User", "site_admin": False},
        "body": f"Fixed in 36ff9a9: explainCheckpoint{number} now checks the prefix before the lookup.",
        "created_at": "2026-01-27T10:00:00Z", "html_url": html,
        "_links": {"self": {"href": api}, "html": {"href": html}},
        "reactions": {"url": f"{api}/reactions", "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "heart": 0},
        "start_line": None, "line": 300 + number, "in_reply_to_id": 2734651300 + number, "side": "RIGHT",
    }


def counter() -> MessageCounter:
    return MessageCounter(shared_counter()[0])


def test_a_one_line_json_array_of_review_comments_keeps_every_record_id_path_and_link() -> None:
    """`gh api …/pulls/N/comments` answers with one line of JSON. Cut through that line, head and
    tail kept the first record's diff hunk and the last record's reactions; the agent lost the
    ids and links it builds its next `gh api …/comments/ID/replies` from. Cut record by record,
    each keeps its id, path, line, reply-to id, body and links, and the marker says what went."""
    comments = [review_comment(n) for n in range(6)]
    text = json.dumps(comments, separators=(",", ":"))
    assert "\n" not in text
    clamped = clamp_text(text, 1600, counter())  # (of 14k tokens)
    assert clamped is not None and counter().count_text(clamped) <= 1600
    records, marker = clamped.rsplit("\n", 1)
    kept = json.loads(records)  # what is kept is JSON still
    assert [r["id"] for r in kept] == [c["id"] for c in comments]
    for record, comment in zip(kept, comments, strict=True):
        for key in ("path", "line", "in_reply_to_id", "html_url", "url", "commit_id"):
            assert record[key] == comment[key]
        assert record["user"] == {"login": "khaong"}
        assert record["body"].startswith("Fixed in 36ff9a9")
        # a diff hunk keeps its header and the lines it ends on: those the comment is about
        assert record["diff_hunk"].startswith("@@ -99,24 +128,517 @@")
        assert record["diff_hunk"].endswith(comment["diff_hunk"].rsplit("\n", 1)[1])
        assert "_links" not in record and "reactions" not in record and "start_line" not in record
    assert marker.startswith("[… compact: ") and "tokens cut" in marker
    for said in ("diff_hunk", "user", "_links", "reactions", "null"):
        assert said in marker, marker


def test_one_record_in_a_small_room_keeps_its_ids_and_links() -> None:
    """The answer to one reply (`gh api -X POST …/replies`) in the room of a cleared result's cut."""
    comment = review_comment(1)
    clamped = clamp_text(json.dumps(comment, separators=(",", ":")), 160, counter())
    assert clamped is not None and counter().count_text(clamped) <= 160
    record = json.loads(clamped.rsplit("\n", 1)[0])
    for key in ("id", "path", "line", "in_reply_to_id", "html_url"):
        assert record[key] == comment[key]
    assert "diff_hunk" not in record and "diff_hunk" in clamped.rsplit("\n", 1)[1]  # said as cut


def test_records_beyond_the_room_are_dropped_whole_and_counted() -> None:
    comments = [review_comment(n) for n in range(40)]
    clamped = clamp_text(json.dumps(comments, separators=(",", ":")), 700, counter())
    assert clamped is not None and counter().count_text(clamped) <= 700
    records, marker = clamped.rsplit("\n", 1)
    kept = json.loads(records)
    assert 1 <= len(kept) < 40 and [r["id"] for r in kept] == [c["id"] for c in comments[: len(kept)]]
    assert f"{40 - len(kept)} more records" in marker, marker


def test_text_that_is_not_json_records_is_cut_as_before() -> None:
    """A broken JSON line, or a list of numbers, keeps its head and tail."""
    broken = json.dumps([review_comment(n) for n in range(3)], separators=(",", ":"))[:-5]
    clamped = clamp_text(broken, 300, counter())
    assert clamped is not None and clamped.startswith(broken[:40]) and "tokens cut …]" in clamped
    numbers = json.dumps(list(range(3000)))
    clamped = clamp_text(numbers, 300, counter())
    assert clamped is not None and clamped.startswith("[0, 1, 2") and "tokens cut …]" in clamped


def test_records_cut_again_are_cut_record_by_record_and_the_marker_adds_up() -> None:
    """A later step cuts a result already cut here into a smaller room: the records are cut again
    (not through their lines and marker), and the marker counts both cuts and every field dropped."""
    comments = [review_comment(n) for n in range(6)]
    text = json.dumps(comments, separators=(",", ":"))
    first = clamp_text(text, 1600, counter())
    again = clamp_text(first, 700, counter())
    assert again is not None and counter().count_text(again) <= 700
    records, marker = again.rsplit("\n", 1)
    assert [r["id"] for r in json.loads(records)] == [c["id"] for c in comments]
    assert "_links" in marker and "reactions" in marker and marker.count("[… compact:") == 1
    cut = int(marker.split("compact: ")[1].split(" ")[0].replace(",", ""))
    assert cut == counter().count_text(text) - counter().count_text(records)


def test_in_the_least_room_one_record_keeps_its_naming_fields_beside_a_brief_marker() -> None:
    """A few dozen tokens (what a result keeps when clearing it whole would overshoot): its id,
    path, line and link, and a marker naming one dropped field and counting the rest."""
    comment = review_comment(2)
    clamped = clamp_text(json.dumps(comment, separators=(",", ":")), 80, counter())
    assert clamped is not None and counter().count_text(clamped) <= 80
    record, marker = clamped.rsplit("\n", 1)
    assert {k: v for k, v in json.loads(record).items()} == {k: comment[k] for k in ("id", "path", "html_url", "line")}
    assert marker.startswith("[… compact: ") and " more" in marker, marker


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                     st.text(max_size=400), st.sampled_from(["https://github.com/o/r/pull/1#discussion_r1", "9e64962ed3"]))
_records = st.lists(st.dictionaries(st.sampled_from(["id", "path", "body", "html_url", "diff_hunk", "user", "line",
                                                     "state", "reactions", "node_id", "extra"]),
                                    st.one_of(_scalars, st.dictionaries(st.sampled_from(["login", "url", "n"]), _scalars,
                                                                        max_size=3)),
                                    min_size=3, max_size=11), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_records, room=st.integers(16, 900), as_lines=st.booleans())
@example(records=[{"id": None, "path": None, "body": None, "html_url": None, "diff_hunk": "\x85"}], room=24, as_lines=True)
def test_a_record_cut_never_exceeds_its_room_and_its_records_stay_json(records: list[dict], room: int,
                                                                        as_lines: bool) -> None:
    """Whatever the records and the room, a cut text fits the room, and the records it kept (every
    line before its marker) are JSON, in their order: a model can still read each one."""
    text = "\n".join(json.dumps(r) for r in records) if as_lines else json.dumps(records)
    cut = clamp_text(text, room, counter())
    if cut is None:
        assert counter().count_text(text) <= room
        return
    assert counter().count_text(cut) <= room
    kept, _, marker = cut.rpartition("\n")
    if marker.startswith("[… compact: ") and " tokens cut from " in marker:
        values = [json.loads(line) for line in kept.split("\n")] if as_lines else [json.loads(kept)]
        assert values
