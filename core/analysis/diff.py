"""What changed between two transcripts (``compact diff BEFORE AFTER``): removed, rewritten, added.

Compaction keeps the order of messages, so aligning is a few near-linear walks:

1. **kept** — an AFTER message that is the same JSON value as a BEFORE message.
   Values found once on each side anchor the alignment (the longest chain of
   them in order, as patience diff does); between anchors, identical messages
   are paired from the end, so of repeated messages the newest are kept, as
   compaction removes oldest first. A system message that starts both files
   is paired first: compaction pins it.
2. Between kept messages, the same matching pairs messages that kept a trace
   of themselves — the call a tool result answers, a tool call id, or their
   text (an assistant message that lost its calls): those were **rewritten**.
3. In what is left, an AFTER message takes the next BEFORE message of the
   same kind — same role, same tool_call_id, same compact marker (warning,
   graph) if it starts with one: also **rewritten** (a clamped message).
   BEFORE messages left over were **removed**; AFTER messages left over were
   **added** (the context warning, a new graph message).

Hash maps, monotone cursors and one O(n log n) longest-chain step: a 10,000
message pair aligns in milliseconds.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import defaultdict, deque
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from core.analysis.stats import encoder_dict
from core.config import MemoryConfig
from core.counting.tokenizers import EncoderChoice
from core.io import jsonio
from core.messages import (
    SYSTEM_ROLES,
    Message,
    call_ids,
    content_text,
    result_ids,
    starts_with_marker,
)

DIFF_VERSION = 1
KEPT = "kept"
REMOVED = "removed"
REWRITTEN = "rewritten"
ADDED = "added"
CHANGE_KINDS = (REMOVED, REWRITTEN, ADDED)


@dataclass(frozen=True)
class Change:
    """One removed, rewritten or added message, with its lines and tokens on each side (0 when absent)."""

    change: str
    role: str
    before_line: int | None
    after_line: int | None
    tokens_before: int
    tokens_after: int

    def to_dict(self) -> dict[str, Any]:
        return vars(self).copy()


@dataclass(frozen=True)
class Side:
    path: str
    messages: int
    tokens: int


@dataclass
class TranscriptDiff:
    before: Side
    after: Side
    encoder: EncoderChoice
    changes: list[Change]
    kept_messages: int
    kept_lines: list[int]  # the BEFORE lines of the kept messages, in order (where a run of removals ends)
    kept_tokens: int
    left_out: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)  # (path, lines the reader left out)

    def summary(self) -> dict[str, dict[str, int]]:
        """Messages and tokens (each side) per kind of change, kept included."""
        kept = self.kept_tokens
        totals = {
            KEPT: {"messages": self.kept_messages, "tokens_before": kept, "tokens_after": kept}
        }
        for kind in CHANGE_KINDS:
            totals[kind] = {"messages": 0, "tokens_before": 0, "tokens_after": 0}
        for change in self.changes:
            row = totals[change.change]
            row["messages"] += 1
            row["tokens_before"] += change.tokens_before
            row["tokens_after"] += change.tokens_after
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": DIFF_VERSION,
            "before": vars(self.before).copy(),
            "after": vars(self.after).copy(),
            "encoder": encoder_dict(self.encoder),
            "summary": self.summary(),
            "changes": [c.to_dict() for c in self.changes],
        }


def diff_files(
    before_path: str,
    after_path: str,
    config: MemoryConfig,
    *,
    use_cache: bool = True,
    stdin: BinaryIO | None = None,
) -> TranscriptDiff:
    """Read and count both transcripts (one of them may be ``-``) and align them."""
    from core.api import open_counter
    from core.formats import read_one

    before = read_one(before_path, stdin=stdin, command="compact diff")
    after = read_one(after_path, stdin=stdin, command="compact diff")
    counter, choice = open_counter(config, use_cache=use_cache)
    try:
        counted_before = counter.count_messages(before.messages)
        counted_after = counter.count_messages(after.messages)
    finally:
        if counter.cache is not None:
            counter.cache.close()
    markers = (config.warning_marker, config.graph_marker)
    changes, kept = diff_messages(counted_before, counted_after, markers=markers)
    priming = counter.reply_priming()
    return TranscriptDiff(
        before=_side(before.path, counted_before, config.graph_marker, priming),
        after=_side(after.path, counted_after, config.graph_marker, priming),
        encoder=choice,
        changes=changes,
        kept_messages=len(kept),
        kept_lines=sorted(line for i, _ in kept if (line := counted_before[i].line) is not None),
        kept_tokens=sum(counted_after[j].tokens for _, j in kept),
        left_out=[(side.path, side.skipped_lines) for side in (before, after) if side.skipped_lines],
    )


def _side(path: str, messages: Sequence[Message], graph_marker: str, priming: int) -> Side:
    """Totals as ``compact count`` gives them: the graph message is not counted."""
    counted = [m for m in messages if m.data and not starts_with_marker(m.data, graph_marker)]
    return Side(path, len(counted), sum(m.tokens for m in counted) + priming)


def diff_messages(
    before: Sequence[Message], after: Sequence[Message], *, markers: Sequence[str] = ()
) -> tuple[list[Change], list[tuple[int, int]]]:
    """The changes from ``before`` to ``after`` in transcript order, and the kept (before, after) pairs."""
    values_before = [[value_key(m)] for m in before]
    values_after = [[value_key(m)] for m in after]
    # Compaction pins the first system message: when both files start with it, it is that one.
    pinned = bool(before and after) and before[0].role in SYSTEM_ROLES
    head = [(0, 0)] if pinned and values_before[0] == values_after[0] else []
    start = len(head)
    kept = head + match_keys(
        values_before, values_after, range(start, len(before)), range(start, len(after))
    )
    before_traces = [trace_keys(m) for m in before]
    after_traces = [trace_keys(m) for m in after]
    before_kinds = [kind_key(m, markers) for m in before]
    after_kinds = [kind_key(m, markers) for m in after]
    changes: list[Change] = []
    for gap_before, gap_after, _ in between(kept, range(len(before)), range(len(after))):
        # A message that kept its text, or its calls, or answers the same call, was rewritten in place.
        traced = match_keys(before_traces, after_traces, gap_before, gap_after)
        for left_before, left_after, pair in between(traced, gap_before, gap_after):
            for kind, i, j in align_gap(left_before, left_after, before_kinds, after_kinds):
                changes.append(_change(kind, before, after, i, j))
            if pair is not None:
                changes.append(_change(REWRITTEN, before, after, *pair))
    return changes, kept


def between(
    pairs: Sequence[tuple[int, int]], before_range: range, after_range: range
) -> Iterator[tuple[range, range, tuple[int, int] | None]]:
    """The stretches of both sides before each pair (then the pair), and the stretch after the last one."""
    low_b, low_a = before_range.start, after_range.start
    for b, a in pairs:
        yield range(low_b, b), range(low_a, a), (b, a)
        low_b, low_a = b + 1, a + 1
    yield range(low_b, before_range.stop), range(low_a, after_range.stop), None


def value_key(message: Message) -> bytes:
    """A digest of the message's JSON value (key order does not matter)."""
    return _digest(jsonio.dumps(message.data, sort_keys=True))


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def trace_keys(message: Message) -> list[Hashable]:
    """What survives a rewrite by compaction: the call a result answers, a call id, or the text itself."""
    data = message.data
    if message.role == "tool":
        return [("result", tuple(result_ids(data)))]
    keys: list[Hashable] = [("call", cid) for cid in call_ids(data)]
    text = content_text(data)
    if text.strip():
        keys.append(("text", message.role, _digest(text.encode("utf-8", "surrogatepass"))))
    return keys


def kind_key(message: Message, markers: Sequence[str]) -> Hashable:
    """What a rewrite keeps at the least: the role, the call a result answers, the compact marker it starts with."""
    marker = next((k for k, mk in enumerate(markers) if starts_with_marker(message.data, mk)), None)
    return (message.role, tuple(result_ids(message.data)), marker)


Keys = Sequence[Sequence[Hashable]]
PATIENCE_DEPTH = 2


def match_keys(
    before_keys: Keys, after_keys: Keys, before_range: range, after_range: range
) -> list[tuple[int, int]]:
    """Pairs (before index, after index) sharing a key, increasing on both sides.

    Patience first: keys found once on each side are anchors, and the longest
    chain of anchors in order is kept, so a chance duplicate far away (an
    assistant text repeated word for word) cannot drag the alignment off
    course. Within the stretches between anchors this repeats once, then the
    rest is paired from the end (``match_from_end``).
    """
    return _match(before_keys, after_keys, before_range, after_range, PATIENCE_DEPTH)


def _match(
    before_keys: Keys, after_keys: Keys, before_range: range, after_range: range, depth: int
) -> list[tuple[int, int]]:
    if not before_range or not after_range:
        return []
    if depth == 0:
        return match_from_end(before_keys, after_keys, before_range, after_range)
    anchors = longest_chain(unique_pairs(before_keys, after_keys, before_range, after_range))
    if not anchors:
        return match_from_end(before_keys, after_keys, before_range, after_range)
    pairs: list[tuple[int, int]] = []
    for gap_before, gap_after, anchor in between(anchors, before_range, after_range):
        pairs += _match(before_keys, after_keys, gap_before, gap_after, depth - 1)
        if anchor is not None:
            pairs.append(anchor)
    return pairs


def unique_pairs(
    before_keys: Keys, after_keys: Keys, before_range: range, after_range: range
) -> list[tuple[int, int]]:
    """(before, after) for every key that occurs exactly once in each range."""
    seen_before: dict[Hashable, int] = {}
    for i in before_range:
        for key in before_keys[i]:
            seen_before[key] = -1 if key in seen_before else i
    seen_after: dict[Hashable, int] = {}
    for j in after_range:
        for key in after_keys[j]:
            seen_after[key] = -1 if key in seen_after else j
    return sorted(
        {
            (i, seen_after[k])
            for k, i in seen_before.items()
            if i >= 0 and seen_after.get(k, -1) >= 0
        }
    )


def longest_chain(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence increasing on both sides (pairs sorted by before index); O(n log n)."""
    ordered = sorted(pairs, key=lambda p: (p[0], -p[1]))  # equal befores cannot both be taken
    tails: list[int] = []  # tails[k]: after index ending the best chain of length k + 1
    tail_at: list[int] = []  # the position in ``ordered`` of that pair
    back: list[int] = [-1] * len(ordered)
    for position, (_, j) in enumerate(ordered):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(position)
        else:
            tails[k] = j
            tail_at[k] = position
        back[position] = tail_at[k - 1] if k else -1
    chain: list[tuple[int, int]] = []
    position = tail_at[-1] if tail_at else -1
    while position >= 0:
        chain.append(ordered[position])
        position = back[position]
    chain.reverse()
    return chain


def match_from_end(
    before_keys: Sequence[Sequence[Hashable]],
    after_keys: Sequence[Sequence[Hashable]],
    before_range: range | None = None,
    after_range: range | None = None,
) -> list[tuple[int, int]]:
    """Pairs (before index, after index) sharing a key, increasing on both sides, matched from the end.

    Each AFTER message takes the latest BEFORE message that shares one of its
    keys and lies before the previous match: of identical messages the newest
    are paired, as compaction removes oldest first. Linear: every position
    enters and leaves each of its key lists once.
    """
    before_range = range(len(before_keys)) if before_range is None else before_range
    after_range = range(len(after_keys)) if after_range is None else after_range
    positions: dict[Hashable, list[int]] = defaultdict(list)
    for i in before_range:
        for key in before_keys[i]:
            positions[key].append(i)
    pairs: list[tuple[int, int]] = []
    cursor = before_range.stop
    for j in reversed(after_range):
        best = -1
        for key in after_keys[j]:
            candidates = positions.get(key)
            while candidates and candidates[-1] >= cursor:
                candidates.pop()
            if candidates and candidates[-1] > best:
                best = candidates[-1]
        if best >= 0:
            cursor = best
            pairs.append((best, j))
    pairs.reverse()
    return pairs


def align_gap(
    before_range: range,
    after_range: range,
    before_kinds: Sequence[Hashable],
    after_kinds: Sequence[Hashable],
) -> Iterator[tuple[str, int | None, int | None]]:
    """(change, before index, after index) for the messages between two kept ones, in order."""
    slots: dict[Hashable, deque[int]] = defaultdict(deque)
    for i in before_range:
        slots[before_kinds[i]].append(i)
    pointer = before_range.start
    added: list[int] = []  # shown after the removed messages they stand among
    for j in after_range:
        queue = slots.get(after_kinds[j])
        while queue and queue[0] < pointer:
            queue.popleft()
        if not queue:
            added.append(j)
            continue
        i = queue.popleft()
        yield from _removed_then_added(range(pointer, i), added)
        yield REWRITTEN, i, j
        pointer = i + 1
    yield from _removed_then_added(range(pointer, before_range.stop), added)


def _removed_then_added(
    removed: range, added: list[int]
) -> Iterator[tuple[str, int | None, int | None]]:
    for i in removed:
        yield REMOVED, i, None
    for j in added:
        yield ADDED, None, j
    added.clear()


def _change(
    kind: str, before: Sequence[Message], after: Sequence[Message], i: int | None, j: int | None
) -> Change:
    old = before[i] if i is not None else None
    new = after[j] if j is not None else None
    shown = old if old is not None else new
    assert shown is not None, "a change has at least one side"
    return Change(
        change=kind,
        role=shown.role,
        before_line=old.line if old is not None else None,
        after_line=new.line if new is not None else None,
        tokens_before=old.tokens if old is not None else 0,
        tokens_after=new.tokens if new is not None else 0,
    )
