"""Offload{turns}: moves the oldest turns (never the current one) into the store.

Every message of an offloaded turn is written to the store (by the workspace,
in one transaction with the step: if the write fails, the turns stay where
they were) and the turn leaves a one-line placeholder with the handle to
recall it by and a short digest; `placeholder=false` leaves none.
"""

from __future__ import annotations

from core.engine.placeholders import PREFIX
from core.engine.workspace import Workspace
from core.messages import Message, content_text, has_text, wire_message, written_by_compact
from core.strategies.base import Param, StrategyInfo

DIGEST_CHARS = 80


def _digest(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DIGEST_CHARS else flat[: DIGEST_CHARS - 1] + "…"


def apply(workspace: Workspace, *, turns: int, placeholder: bool) -> str:
    starts = workspace.structure.user_positions
    moved = 0
    messages = 0
    for turn, start in enumerate(starts[:-1]):  # the last start is the current turn
        if moved >= turns or not workspace.should_continue():
            break
        end = starts[turn + 1]
        before = set(workspace.removed)
        for position in range(start, end):
            message = workspace.messages[position]
            # Placeholders and summaries compact wrote stay: offloading them would chain pointers.
            if workspace.alive(position) and not workspace.pinned(position) and not written_by_compact(message):
                workspace.remove([position], f"turn {turn + 1} offloaded to the store")
        gone = sorted(workspace.removed - before)  # with the calls and results paired to them
        if not gone:
            continue
        moved += 1
        messages += len(gone)
        if placeholder:
            workspace.insert(start, Message(data={"role": "system", "content": _placeholder(workspace, turn, gone)}))
    return f"offloaded {moved} turn(s), {messages} message(s), to the store"


def _placeholder(workspace: Workspace, turn: int, gone: list[int]) -> str:
    lines = [workspace.messages[p].line for p in gone if workspace.messages[p].line is not None]
    low, high = (min(lines), max(lines)) if lines else (None, None)  # type: ignore[type-var]
    where = "" if not lines else f", line {low}" if low == high else f", lines {low}-{high}"
    messages = [wire_message(workspace.messages[p].data) for p in gone if workspace.messages[p].data]
    # One handle for the whole turn: `compact recall --id` prints every message that went, in order.
    store = workspace.seams.store
    assert store is not None  # the strategy needs the store: without one it is skipped
    handle = store.stage_group(messages)
    said = [workspace.messages[p].data for p in gone if has_text(workspace.messages[p].data)]
    # The request, when it went too; else (the request stays pinned) the first thing said, and by whom.
    asked = next((data for data in said if data.get("role") == "user"), None)
    first = asked or (said[0] if said else None)
    gist = "" if first is None else f'; {"asked" if asked else str(first.get("role")) + " said"}: "{_digest(content_text(first))}"'
    return (f"{PREFIX} turn {turn + 1} offloaded ({len(gone)} message{'' if len(gone) == 1 else 's'}{where}); "
            f"recall: compact recall --id {handle}{gist}]")


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
