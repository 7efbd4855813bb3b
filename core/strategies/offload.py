"""Offload{turns}: moves the oldest turns (never the current one) into the store.

Every message of an offloaded turn is written to the store (by the workspace,
in one transaction with the step: if the write fails, the turns stay where
they were) and the turn leaves a one-line placeholder with the handle to
recall it by and a short digest; `placeholder=false` leaves none. Under a
message budget that one placeholder per turn would exceed, the run's offloads
leave one placeholder between them (naming each step's handle), or none when
the pinned messages alone leave no room for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.engine.budget import MESSAGES
from core.engine.placeholders import PREFIX
from core.engine.workspace import Workspace
from core.messages import (
    Message,
    content_text,
    has_text,
    one_line,
    wire_message,
    written_by_compact,
)
from core.strategies.base import Param, StrategyInfo

DIGEST_CHARS = 80
# ``Message.extra`` key of an offload placeholder: the turns it stands for, to fold it into a later one.
OFFLOADED = "offloaded"


@dataclass(frozen=True)
class _Part:
    """What one placeholder stands for: input turns, lines and messages, the handle, the digest."""

    turns: tuple[int, ...]
    lines: tuple[int, ...]
    count: int
    handle: str
    gist: str


def _digest(text: str) -> str:
    return one_line(text, DIGEST_CHARS)


def apply(workspace: Workspace, *, turns: int, placeholder: bool) -> str:
    starts = workspace.structure.user_positions
    by_count = placeholder and workspace.budget.trigger == MESSAGES
    moved = 0
    messages = 0
    gone_by_turn: list[tuple[int, list[int]]] = []  # (where the placeholder goes, what went)
    for turn, start in enumerate(starts[:-1]):  # the last start is the current turn
        # (under a message budget, the placeholders are placed once the turns are gone: one is reserved)
        if moved >= turns or not (workspace.full or workspace.over_budget(0, int(by_count and moved > 0))):
            break
        end = starts[turn + 1]
        before = set(workspace.removed)
        for position in range(start, end):
            message = workspace.messages[position]
            # Placeholders and summaries compact wrote stay: offloading them would chain pointers.
            if workspace.alive(position) and not workspace.pinned(position) and not written_by_compact(message):
                workspace.remove([position], f"turn {workspace.turn_number(start)} offloaded to the store")
        gone = sorted(workspace.removed - before)  # with the calls and results paired to them
        if not gone:
            continue
        moved += 1
        messages += len(gone)
        if by_count:
            gone_by_turn.append((start, gone))
        elif placeholder:
            _place_one(workspace, start, gone)
    also = _place_within_count(workspace, gone_by_turn) if gone_by_turn else ""
    return f"offloaded {moved} turn(s), {messages} message(s), to the store{also}"


def _place_within_count(workspace: Workspace, gone_by_turn: list[tuple[int, list[int]]]) -> str:
    """One placeholder per turn when they fit the message budget; else one for every turn this run
    offloaded (the earlier placeholders folded in); none when the pinned messages leave no room.
    Returns what the step's detail adds."""
    if not workspace.over_budget(0, len(gone_by_turn)):
        for start, gone in gone_by_turn:
            _place_one(workspace, start, gone)
        return ""
    earlier = [p for p, m in enumerate(workspace.messages)
               if workspace.alive(p) and workspace.is_own(p) and m.extra.get(OFFLOADED)]
    parts = [part for p in earlier for part in workspace.messages[p].extra[OFFLOADED]]
    for position in earlier:
        workspace.remove_own(position, "folded into one offload placeholder")
    if workspace.budget.over(workspace.floor()[0] - len(earlier) + 1, 0):
        # The pinned messages fill the budget: the report's ledger says what went.
        return "; no placeholder: the pinned messages fill the message budget"
    gone = [p for _, turn in gone_by_turn for p in turn]
    parts.append(_part(workspace, gone, _stage(workspace, gone)))
    workspace.insert(min([*earlier, gone_by_turn[0][0]]), _placeholder(parts))
    return f"; one placeholder for them{f' and the {len(earlier)} earlier' if earlier else ''}"


def _place_one(workspace: Workspace, start: int, gone: list[int]) -> None:
    """The placeholder of one turn's messages (``gone``), before the turn's start."""
    workspace.insert(start, _placeholder([_part(workspace, gone, _stage(workspace, gone))]))


def _stage(workspace: Workspace, gone: list[int]) -> str:
    """The handle that recalls every message of ``gone``, in order (written with the step's offload)."""
    store = workspace.seams.store
    assert store is not None  # the strategy needs the store: without one it is skipped
    return store.stage_group([wire_message(workspace.messages[p].data) for p in gone if workspace.messages[p].data])


def _part(workspace: Workspace, gone: list[int], handle: str) -> _Part:
    said = [workspace.messages[p].data for p in gone if has_text(workspace.messages[p].data)]
    # The request, when it went too; else (the request stays pinned) the first thing said, and by whom.
    asked = next((data for data in said if data.get("role") == "user"), None)
    first = asked or (said[0] if said else None)
    gist = "" if first is None else f'{"asked" if asked else str(first.get("role")) + " said"}: "{_digest(content_text(first))}"'
    turns = sorted({workspace.turn_number(p) for p in gone} - {0})
    lines = [line for p in gone if (line := workspace.messages[p].line) is not None]
    return _Part(tuple(turns), tuple(lines), len(gone), handle, gist)


def _placeholder(parts: Sequence[_Part]) -> Message:
    lines = [line for part in parts for line in part.lines]
    count = sum(part.count for part in parts)
    low, high = (min(lines), max(lines)) if lines else (None, None)
    where = "" if not lines else f", line {low}" if low == high else f", lines {low}-{high}"
    turns = sorted({turn for part in parts for turn in part.turns})
    # One handle per step: `compact recall --id` prints every message it moved, in order.
    recall = parts[0].handle if len(parts) == 1 else ", --id ".join(
        f"{part.handle} ({_turns_text(part.turns)})" for part in parts)
    # What was asked, before what was said in reply (a turn whose request stays pinned).
    gists = sorted((part.gist for part in parts if part.gist), key=lambda gist: not gist.startswith("asked"))
    gist = f"; {gists[0]}" if gists else ""
    text = (f"{PREFIX} {_turns_text(turns)} offloaded ({count} message{'' if count == 1 else 's'}{where}); "
            f"recall: compact recall --id {recall}{gist}]")
    extra: dict[str, Any] = {OFFLOADED: tuple(parts)}
    return Message(data={"role": "system", "content": text}, extra=extra)


def _turns_text(turns: Sequence[int]) -> str:
    """ "turn 2", "turns 1-3", "turns 1, 3-4"."""
    if not turns:
        return "turn ?"
    runs: list[list[int]] = []
    for turn in turns:
        if runs and turn == runs[-1][-1] + 1:
            runs[-1].append(turn)
        else:
            runs.append([turn])
    said = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
    return f"turn{'s' if len(turns) > 1 else ''} {said}"


STRATEGY = StrategyInfo(
    name="offload",
    alias="Offload",
    summary="move the oldest turns into the store (needs --store)",
    params=(
        Param("turns", int, 10, "how many of the oldest turns to move"),
        Param("placeholder", bool, True, "leave a one-line placeholder with the recall handle"),
    ),
    apply=apply,
    needs="store",
)
