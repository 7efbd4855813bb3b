"""The memo a step keeps of each message between the summaries it composes of overlapping spans."""

from __future__ import annotations

from core.summarizers.span_memo import SpanMemo


def test_a_memo_finds_a_value_for_the_very_same_message_only() -> None:
    """An equal message that is another object (a rewrite, or a dict that took a freed one's place in
    memory) is read again: the memo never answers for what it did not see."""
    memo: SpanMemo[str] = SpanMemo()
    message = {"role": "user", "content": "fix the parser"}
    memo.put(message, "read once")
    assert memo.get(message) == "read once"
    assert memo.get(dict(message)) is None


def test_a_renewed_memo_holds_the_last_span_only() -> None:
    memo: SpanMemo[int] = SpanMemo()
    first, second = {"content": "a"}, {"content": "b"}
    memo.put(first, 1)
    earlier = memo.renewed()
    assert memo.get(first) is None and earlier.get(first) == 1
    memo.put(second, 2)
    assert memo.renewed().get(second) == 2 and memo.get(second) is None
