"""Which of a digest's lines to keep first when not all of them fit: the most worth per token.

A line is worth what it tells of the names the span keeps coming back to (each name weighs the
messages that name it, the newer half twice: salience.Mentions.recurrence) that the lines before
it do not name already, and, when it states a finding (a fact or an error holding a name, a
number or an id), a finding's own worth: a value stated once (a deploy token, a port) is what
someone asks for later though nobody repeats it. A path counts by its parts (its folders and its
file's name), not once more whole. What the agent read, ran or remarked is worth half as much as
what it found and changed: an LLM's summary leads with those too. Per token, a line under
SHORTEST_COST tokens counted at that, so a short remark is not worth more for being short. The
requests come first, as ranked.

Chosen greedily: a line's worth falls as the lines chosen before it name what it names, so the
digest does not spend its room saying one function's name five times and another's never. Then
``fitting`` takes, in that order, what fits the room.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from core.counting.counter import MessageCounter
from core.summarizers.call_lines import CHANGE, REQUEST
from core.summarizers.salience import names_in

# What stating a finding is worth, in the weight of names: about a name two messages of the
# newer half named, four times over.
FINDING_WORTH = 15
SHORTEST_COST = 20
# What a read, a command or a remark is worth beside a finding or a change naming as much.
ACCOUNT_SHARE = 0.5


class Line(Protocol):
    @property
    def priority(self) -> int: ...
    @property
    def text(self) -> str: ...


Ranked = TypeVar("Ranked", bound=Line)


def by_worth(ranked: Sequence[Ranked], weights: Mapping[str, int], counter: MessageCounter,
             finding: Callable[[Ranked], bool]) -> list[Ranked]:
    """``ranked`` (the digest's own order, which breaks ties) reordered: the requests first, then
    the rest by worth per token, each line's worth counted without the names the lines before it
    (the requests among them) name. ``weights``: each recurring name's weight; ``finding``:
    whether a line states a finding."""
    requests = [line for line in ranked if line.priority == REQUEST]
    rest = [line for line in ranked if line.priority != REQUEST]
    counted = {name: weight for name, weight in weights.items() if "/" not in name}
    held = [names_in(line.text) for line in rest]
    recurring = [names & counted.keys() for names in held]
    own = [FINDING_WORTH if names and finding(line) else 0 for line, names in zip(rest, held, strict=True)]
    shares = [1.0 if line.priority <= CHANGE else ACCOUNT_SHARE for line in rest]
    costs = [max(SHORTEST_COST, tokens + 1) for tokens in counter.count_texts([line.text for line in rest])]
    said: set[str] = set()
    for line in requests:
        said |= names_in(line.text)

    def worth(index: int) -> float:
        return shares[index] * (own[index] + sum(counted[name] for name in recurring[index] - said)) / costs[index]

    # A line's worth only falls as lines are chosen: one whose worth, counted again, still tops
    # the heap is the best of all (lazy greedy).
    heap = [(-worth(index), index) for index in range(len(rest))]
    heapq.heapify(heap)
    chosen: list[Ranked] = []
    while heap:
        _, index = heapq.heappop(heap)
        current = worth(index)
        if heap and current < -heap[0][0]:
            heapq.heappush(heap, (-current, index))
            continue
        chosen.append(rest[index])
        said |= recurring[index]
    return requests + chosen


def fitting(ordered: Sequence[Line], room: int, counter: MessageCounter, *, held_after: int,
            request_share: float) -> list[int]:
    """The positions in ``ordered`` of the lines that fit ``room``, taken in that order; past the
    first ``held_after`` requests, the requests take at most ``request_share`` of the room while
    other lines want it, then what is left."""
    chosen: set[int] = set()
    used = 0
    for capped in (True, False):  # the second pass gives what is left to the requests held back
        requests = asked = 0
        for index, line in enumerate(ordered):
            if room - used < 8:
                break  # full: counting the rest would only find they do not fit
            if line.priority == REQUEST:
                requests += 1
            if index in chosen or len(line.text) // 8 > room - used:
                continue  # chosen, or far too long for what is left: a token is rarely over 8 characters
            cost = counter.count_text(line.text) + 1
            held_back = capped and line.priority == REQUEST and requests > held_after \
                and asked + cost > room * request_share
            if used + cost <= room and not held_back:
                chosen.add(index)
                used += cost
                asked += cost if line.priority == REQUEST else 0
    return sorted(chosen)
