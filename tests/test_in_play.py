"""The summary's line of the names a span came back to most, each under the file that held them."""

from __future__ import annotations

from core.counting.counter import MessageCounter
from core.messages import pair_calls
from core.summarizers.call_lines import FACT, REMARK, REQUEST
from core.summarizers.extractive import _Line
from core.summarizers.in_play import IN_PLAY, NamesSource, with_names_in_play
from core.summarizers.salience import Mentions
from tests.helpers import assistant_calls, call, msg, result, shared_counter


def _span(edits: int) -> list[dict]:
    """A request, then edits of explain.go, each naming getBranchCheckpoints and walkFirstParentCommits."""
    span = [msg("user", "Fix the branch walk. My account id is KX-4471-QP.")]
    for i in range(edits):
        span += [assistant_calls(call(f"e{i}", "Edit", file_path="/repo/internal/checkpoints/explain.go",
                                      old_string=f"step{i}()",
                                      new_string=f"getBranchCheckpoints(repo)\nwalkFirstParentCommits(repo, {i})")),
                 result(f"e{i}", "The file /repo/internal/checkpoints/explain.go has been updated successfully."),
                 msg("assistant", f"Looking closer at how the walk handles merges and what it skips on the way, "
                     f"round {'abcdefgh'[i]}.")]
    return span


def _chosen(span: list[dict]) -> list[_Line]:
    lines = [_Line(REQUEST, 0, "- user asked (turn 1): Fix the branch walk. My account id is KX-4471-QP.")]
    lines += [_Line(REMARK, p, f"- assistant: {m['content']}") for p, m in enumerate(span) if m["role"] == "assistant"
              and isinstance(m.get("content"), str) and m["content"]]
    lines.append(_Line(FACT, 99, "- assistant: The server listens on port 8443."))
    return lines


def _fit(span: list[dict], room: int) -> tuple[list[_Line], str, int]:
    counter = MessageCounter(shared_counter()[0])
    source = NamesSource(span, pair_calls(span), Mentions(span))
    return with_names_in_play(_chosen(span), source, room, counter, full=True)


def test_names_the_span_came_back_to_take_the_room_of_the_oldest_remarks_under_their_file() -> None:
    """A full digest: the names every edit of explain.go wrote go under explain.go, in the room of
    the oldest of the assistant's remarks, and the whole still fits."""
    span = _span(7)
    counter = MessageCounter(shared_counter()[0])
    room = sum(counter.count_text(line.text) + 1 for line in _chosen(span))  # (no room left)
    kept, line, gave_way = _fit(span, room)
    assert line.startswith(IN_PLAY + "explain.go: ")
    assert "getBranchCheckpoints" in line and "walkFirstParentCommits" in line
    assert "internal" not in line and "checkpoints," not in line  # (the folders of its path: the file lists say them)
    assert gave_way >= 1 and "round a." not in "\n".join(k.text for k in kept)  # the oldest remark went first
    assert sum(counter.count_text(k.text) + 1 for k in kept) + counter.count_text(line) + 1 <= room


def test_what_the_user_said_and_a_stated_value_never_give_way() -> None:
    span = _span(5)
    kept, _, _ = _fit(span, 60)
    texts = "\n".join(k.text for k in kept)
    assert "KX-4471-QP" in texts and "8443" in texts


def test_a_name_only_one_message_wrote_is_not_listed_and_one_two_wrote_is() -> None:
    _, line, gave_way = _fit(_span(1), 200)
    assert (line, gave_way) == ("", 0)
    _, line, _ = _fit(_span(2), 200)
    assert "getBranchCheckpoints" in line


def test_a_digest_that_left_nothing_out_keeps_every_line_and_names_only_in_the_room_left() -> None:
    """When every line fits, none gives way: the names take only the room the lines left (here none)."""
    span = _span(7)
    counter = MessageCounter(shared_counter()[0])
    room = sum(counter.count_text(line.text) + 1 for line in _chosen(span))
    source = NamesSource(span, pair_calls(span), Mentions(span))
    kept, line, gave_way = with_names_in_play(_chosen(span), source, room, counter, full=False)
    assert (len(kept), line, gave_way) == (len(_chosen(span)), "", 0)
    _, roomier, _ = with_names_in_play(_chosen(span), source, room + 60, counter, full=False)
    assert "getBranchCheckpoints" in roomier


def test_words_joined_by_hyphens_and_dunders_are_not_listed_as_names() -> None:
    """"re-running" and `__name__` recur in an agent's writes like names but name nothing to look up."""
    span = [msg("user", "Fix the walk.")]
    for i in range(5):
        span += [assistant_calls(call(f"e{i}", "Edit", file_path="/repo/walk.py", old_string=f"x{i}",
                                      new_string=f"if __name__: walk_commits(re-running, {i})")),
                 result(f"e{i}", "ok"), msg("assistant", f"Looking again at the walk and what it skips, round {i}.")]
    counter = MessageCounter(shared_counter()[0])
    line = with_names_in_play([], NamesSource(span, pair_calls(span), Mentions(span)), 200, counter, full=True)[1]
    assert "walk_commits" in line and "re-running" not in line and "__name__" not in line
