"""The working list strategies act on, with the invariants enforced in one place.

Strategies never splice the list: they mark removals and rewrites here, and
the workspace keeps pinned messages untouched, keeps every call with its
results, keeps the running totals (so "under budget yet?" is O(1)) and writes
the ledger entry for every message it removes or rewrites.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.counting.counter import MessageCounter
from core.engine.budget import Budget
from core.engine.ledger import LedgerAction, LedgerEntry
from core.engine.policy import DEFAULT, Policy
from core.engine.seams import Seams, offload_items
from core.engine.structure import PinRules, Structure, analyse
from core.messages import ORIGINAL_KEY, Message, call_ids, content_handle, has_text, result_ids
from core.report import Action

# What the structure (turns, pairing) is read from: a rewrite that changes one of these, or which
# calls a message makes, is analysed again; one that changes text or arguments is not.
_STRUCTURAL_KEYS = ("role", "tool_call_id", "tool_call_ids")
# The message as the input had it (its bytes and count too), kept when a strategy first rewrites it.
_INPUT_MESSAGE = "input_message"


@dataclass
class StepOutcome:
    removed: int = 0
    rewritten: int = 0
    added: int = 0
    tokens_saved: int = 0
    detail: str = ""
    offloaded: int = 0

    @property
    def acted(self) -> bool:
        return self.removed > 0 or self.rewritten > 0 or self.added > 0

    def action(self, strategy: str, pass_number: int, error: str | None = None) -> Action:
        """The report's record of this step: which strategy or closing step, in which pass, what it did."""
        return Action(strategy, pass_number, messages_removed=self.removed, messages_changed=self.rewritten,
                      messages_added=self.added, messages_offloaded=self.offloaded, tokens_saved=self.tokens_saved,
                      detail=self.detail, error=error)


# However it is rewritten, a message kept in the result takes at least this many tokens (or its own).
MIN_KEPT_TOKENS = 8


def unchanged_prefix(original: Sequence[Message], result: Sequence[Message]) -> int:
    """How many messages ``result`` begins with that are the very same as ``original``'s."""
    prefix = 0
    for before, after in zip(original, result):
        if before is not after:
            break
        prefix += 1
    return prefix


class Workspace:
    def __init__(
        self,
        messages: Sequence[Message],
        *,
        budget: Budget,
        counter: MessageCounter,
        pins: PinRules | None = None,
        full: bool = False,
        offload_turns: int = 2,
        seams: Seams | None = None,
        source: str = "<stdin>",
        policy: Policy = DEFAULT,
    ) -> None:
        self.seams = seams or Seams()
        self.pins = pins or PinRules()
        # The preset's rules: whether removals leave a trace, the shares of the budget to aim for, ...
        self.policy = policy
        # Each message's slot: the input's messages are numbered 0..n-1 in order, each message compact
        # adds the next number; a rewrite keeps its message's slot. (``slots`` runs beside ``messages``.)
        self.slots: list[int] = list(range(len(messages)))
        self._next_slot = len(messages)
        # The slots of the summaries and traces this run wrote: pinned for the rest of the run, so a
        # later strategy does not delete the record of what an earlier one removed.
        self.own: set[int] = set()
        # Set by the pipeline before each step: messages before this position cannot stay within the
        # token budget whatever is rewritten, and a later step keeps only the newest that fit.
        self.must_go_before = 0
        self.step_open = False  # between begin() and end() or rollback()
        self._rewritten_in_step: dict[int, int] = {}  # position -> the number of its entry this step
        self.source = source
        self.budget = budget
        self.counter = counter
        self.full = full
        self.offload_turns = offload_turns
        # The ledger's entries by their number, in the order they were written (an entry is
        # replaced under its number when a step rewrites or removes its message again).
        self._entries: dict[int, LedgerEntry] = {}
        self._next_entry = 0
        self._step_first_entry = 0  # entries numbered from here were written by the current step
        # The numbers of the ledger's rewrite entries by the slot of the message they describe (not its
        # line: messages decoded from one line, a Gemini chat's or a Claude Code line's results, share it).
        self._rewrites: dict[int, list[int]] = {}
        self._ledger_before: dict[int, LedgerEntry] = {}
        self._rewrites_before: list[tuple[int, list[int]]] = []
        self.strategy = ""
        self.pass_number = 0
        self._set_messages(list(messages), self.slots)
        self._input = tuple(self.messages)  # (rewrites replace items of self.messages in place)
        # Turn numbers as the input has them (1-based): removals renumber the structure's turns.
        self.input_turn = {m.line: t + 1 for m, t in zip(self.messages, self.structure.turn_of) if m.line is not None}

    # -- state -------------------------------------------------------------

    @property
    def ledger(self) -> list[LedgerEntry]:
        """One entry for every message removed or rewritten, in the order they were written."""
        return list(self._entries.values())

    def _set_messages(self, messages: list[Message], slots: list[int]) -> None:
        self.messages = messages
        self.slots = slots
        own = frozenset(p for p, slot in enumerate(slots) if slot in self.own) if self.own else frozenset()
        self.structure: Structure = analyse(messages, self.pins, own)
        self.removed: set[int] = set()
        counted = self.structure.counted
        self.live_messages = sum(counted)
        self.live_tokens = sum(m.tokens for m, c in zip(messages, counted) if c) + self.counter.reply_priming()

    def alive(self, position: int) -> bool:
        return position not in self.removed

    def rewritten_in_place(self, position: int) -> bool:
        """Whether the message at ``position`` is the input's message at that position, rewritten."""
        message = self.messages[position]
        return position < len(self._input) and bool(message.extra) and message.extra.get(_INPUT_MESSAGE) is self._input[position]

    def first_change(self) -> int | None:
        """The position of the first message that differs from the input (rewritten, added, or the
        first after a removal); None when the messages are the input's, or only lost some at the end."""
        prefix = unchanged_prefix(self._input, self.messages)
        return None if prefix >= len(self.messages) else prefix  # (a change only after the end: none to see)

    def pinned(self, position: int) -> bool:
        return self.structure.pinned[position]

    def over_budget(self, reserve_tokens: int = 0, reserve_messages: int = 0) -> bool:
        """Over budget, or would be after adding what is reserved (a trace or summary still to come)."""
        return self.budget.over(self.live_messages + reserve_messages, self.live_tokens + reserve_tokens)

    def should_continue(self) -> bool:
        """Removing strategies stop as soon as the budget is met, unless asked to act fully."""
        return self.full or self.over_budget()

    def oldest_that_can_stay(self) -> int:
        """The oldest position whose message can be in a result within the token budget: however a
        message is rewritten it keeps at least MIN_KEPT_TOKENS (or its own size), a pinned one all."""
        limit = self.budget.token_limit
        if self.full or limit is None:
            return 0
        counted = self.structure.counted
        floor = 0
        for position in range(len(self.messages) - 1, -1, -1):
            if position in self.removed or not counted[position]:
                continue
            tokens = self.messages[position].tokens
            floor += tokens if self.structure.pinned[position] else min(tokens, MIN_KEPT_TOKENS)
            if floor > limit:
                return position + 1
        return 0

    def recent_start(self, share: float) -> int:
        """The first position of the newest messages that together take ``share`` of a token budget
        (the length of the list when there is no token budget, or in a --full run)."""
        limit = self.budget.token_limit
        if self.full or limit is None or share <= 0:
            return len(self.messages)
        room = limit * share
        used = 0
        counted = self.structure.counted
        for position in range(len(self.messages) - 1, -1, -1):
            if not self.alive(position) or not counted[position]:
                continue
            used += self.messages[position].tokens
            if used > room:
                return position + 1
        return 0

    def must_go(self, position: int) -> bool:
        """Rewriting this message is wasted: it must go for the run to reach the budget (unpinned)."""
        return position < self.must_go_before and not self.structure.pinned[position]

    def floor(self) -> tuple[int, int]:
        """Messages and tokens no strategy may remove: pinned messages and what they hold paired."""
        keep: set[int] = set()
        for i, pinned in enumerate(self.structure.pinned):
            if pinned:
                keep.update(self.structure.group(i))
        counted = self.structure.counted
        tokens = sum(self.messages[i].tokens for i in keep if counted[i]) + self.counter.reply_priming()
        return sum(1 for i in keep if counted[i]), tokens

    def append(self, message: Message) -> None:
        """Add a message compact wrote itself (the warning) at the end."""
        self._set_messages([*self.messages, message], [*self.slots, self._new_slot()])

    def _new_slot(self) -> int:
        self._next_slot += 1
        return self._next_slot - 1

    # -- one strategy step ----------------------------------------------------

    def begin(self, strategy: str, pass_number: int) -> None:
        self.step_open = True
        self.strategy = strategy
        self.pass_number = pass_number
        self._outcome = StepOutcome()
        self._originals: dict[int, tuple[Message, int]] = {}  # position -> (message before the step, turn)
        self._inserted: dict[int, list[tuple[Message, int]]] = {}  # position -> (message, its slot)
        # Rewrites of content alone keep the structure; only removals, insertions and rewrites
        # of roles or tool calls make end() recompute it.
        self._reshaped = False
        self._snapshot = list(self.messages)
        self._slots_snapshot = list(self.slots)
        self._own_snapshot = set(self.own)
        self._rewritten_in_step = {}
        self._ledger_before = dict(self._entries)  # (restore() deletes earlier lines: a rollback puts them back)
        self._step_first_entry = self._next_entry
        self._rewrites_before = []
        if self.seams.store is not None:
            self.seams.store.begin_step()  # its summary-cache writes land with the step or not at all

    def rollback(self) -> None:
        """Undo the current step: a strategy that failed leaves the messages as they were."""
        self.step_open = False
        self._entries = self._ledger_before
        for key, numbers in reversed(self._rewrites_before):  # (the first pop of a key is what it held)
            self._rewrites[key] = numbers
        first = self._step_first_entry  # (the entries this step wrote are undone)
        for numbers in self._rewrites.values():
            numbers[:] = [n for n in numbers if n < first]
        self.own = self._own_snapshot
        self._rewritten_in_step = {}
        if self.seams.store is not None:
            self.seams.store.discard_step()
        self._set_messages(self._snapshot, self._slots_snapshot)
        self._outcome = StepOutcome()
        self._originals = {}
        self._inserted = {}
        self._reshaped = False

    def restart_step(self) -> None:
        """Undo what the current step did so far and go on with it afresh (another plan)."""
        self.rollback()
        self.begin(self.strategy, self.pass_number)

    def end(self, detail: str = "") -> StepOutcome:
        """Apply the marks: the list shrinks to the survivors and the structure is recomputed.

        With a store, everything this step removed or rewrote is offloaded first, in one
        transaction; if that fails the error propagates and the caller rolls the step back.
        """
        outcome = self._outcome
        outcome.detail = detail
        if self.seams.store is not None:  # also writes the summaries the step cached
            self.seams.store.offload(offload_items(list(self._originals.values()), self.source))
            outcome.offloaded = len(self._originals)
        if self.removed or self._inserted or self._reshaped:
            self._set_messages(*self._survivors())
        self.step_open = False  # (not before: a store refusing the offload above leaves it to roll back)
        return outcome

    def _survivors(self) -> tuple[list[Message], list[int]]:
        """The messages not removed, with those inserted before their positions, and their slots."""
        survivors: list[Message] = []
        slots: list[int] = []
        for i, (message, slot) in enumerate(zip(self.messages, self.slots)):
            for inserted, inserted_slot in self._inserted.get(i, ()):
                survivors.append(inserted)
                slots.append(inserted_slot)
            if i not in self.removed:
                survivors.append(message)
                slots.append(slot)
        for inserted, inserted_slot in self._inserted.get(len(self.messages), ()):
            survivors.append(inserted)
            slots.append(inserted_slot)
        return survivors, slots

    def insert(self, position: int, message: Message, *, pin: bool = True) -> Message:
        """Add a message compact wrote (a placeholder, a summary) before ``position``; pinned from now on."""
        counted = self.counter.count_message(message)
        slot = self._new_slot()
        if pin:
            self.own.add(slot)
        self._inserted.setdefault(position, []).append((counted, slot))
        self.live_messages += 1
        self.live_tokens += counted.tokens
        self._outcome.added += 1
        self._outcome.tokens_saved -= counted.tokens
        return counted

    def removal_set(self, positions: Iterable[int]) -> set[int] | None:
        """``positions`` with every call and result paired to them, or None if any is pinned."""
        closure: set[int] = set()
        for position in positions:
            closure.update(self.structure.group(position))
        closure -= self.removed
        if any(self.structure.pinned[i] for i in closure):
            return None
        return closure

    def remove(self, positions: Iterable[int], reason: str) -> bool:
        """Remove ``positions`` with their pairs; refuses (False) when that would touch a pinned message."""
        closure = self.removal_set(positions)
        if not closure:
            return False
        for i in sorted(closure):
            self._drop(i, reason)
        return True

    def remove_pair(self, owner: int, call_id: str, reason: str) -> bool:
        """Remove one tool call (of the message at ``owner``) and its results.

        The calling message is rewritten without the call; a result message
        answering several calls takes those calls with it; an assistant
        message left with neither text nor calls goes too.
        """
        structure = self.structure
        if owner in self.removed or structure.pinned[owner]:
            return False
        keys = {(owner, call_id)}
        results = {r for r in structure.results_of_call.get((owner, call_id), []) if r not in self.removed}
        for r in list(results):
            keys.update(structure.answered_by.get(r, []))
        if any(other != owner for other, _ in keys):
            return False  # a result shared with another message's call: leave the exchange whole
        results.update(r for key in keys for r in structure.results_of_call.get(key, []) if r not in self.removed)
        if any(structure.pinned[r] for r in results):
            return False
        ids = {cid for _, cid in keys}
        owner_data = self.messages[owner].data
        remaining = [c for c in owner_data.get("tool_calls") or [] if str(c.get("id")) not in ids]
        for r in sorted(results):
            self._drop(r, reason)
        if not remaining and not has_text(owner_data):
            self._drop(owner, reason)
        else:
            data = dict(owner_data)
            if remaining:
                data["tool_calls"] = remaining
            else:
                data.pop("tool_calls", None)
            self.rewrite(owner, data, reason)
        return True

    def restorable(self, position: int) -> Message | None:
        """The input's version of a message a strategy rewrote, when putting it back keeps every call
        with its results (the rewrite changed content, not which calls and results it holds)."""
        message = self.messages[position]
        original = message.extra.get(_INPUT_MESSAGE) if message.extra else None
        if original is None or original is message or position in self.removed or self.is_own(position):
            return None
        if (original.role != message.role or call_ids(original.data) != call_ids(message.data)
                or result_ids(original.data) != result_ids(message.data)):
            return None
        return original

    def restore(self, position: int, original: Message, data: dict[str, Any] | None = None, reason: str = "") -> None:
        """Put back the input's version of a rewritten message; its ledger lines go. With ``data``,
        what is put back is the input's message rewritten to ``data`` (one ledger line, ``reason``)."""
        message = self.messages[position]
        self.messages[position] = original
        added = original.tokens - message.tokens
        if self.structure.counted[position]:
            self.live_tokens += added
        slot = self.slots[position]
        popped = self._rewrites.pop(slot, [])
        self._rewrites_before.append((slot, popped))
        for number in popped:
            if self._entries[number].action == "rewritten":
                del self._entries[number]
        self._rewritten_in_step.pop(position, None)  # (a rewrite after this one writes its own entry)
        self._outcome.tokens_saved -= added
        if data is None:
            self._outcome.rewritten += 1
        else:
            self._rewrite(position, data, reason)

    def turn_number(self, position: int) -> int:
        """The input's turn number of a message (0 for the preamble, before the first user message)."""
        line = self.messages[position].line
        return max(self.input_turn.get(line, 0), 0) if line is not None else 0

    def is_own(self, position: int) -> bool:
        """A message this run wrote (its summary or a trace)."""
        return self.slots[position] in self.own

    def rewrite_own(self, position: int, data: dict[str, Any], reason: str) -> int:
        """Rewrite a summary folding in more (this run's, or an earlier run's it takes over): it is this
        run's own, pinned, from now on."""
        saved = self._rewrite(position, data, reason)
        self.own.add(self.slots[position])
        self._reshaped = True  # the structure's pins follow the new message
        return saved

    def remove_own(self, position: int, reason: str) -> None:
        """Remove a message this run wrote (a placeholder folded into a newer one)."""
        self.own.discard(self.slots[position])
        self._drop(position, reason)
        self._reshaped = True  # the structure's pins follow

    def rewrite_pinned(self, position: int, data: dict[str, Any], reason: str) -> int:
        """Rewrite a pinned message: only the last resort of a budget its pins alone exceed. One this
        run wrote is no longer its own once cut (as when own messages were told apart by identity)."""
        self.own.discard(self.slots[position])
        return self._rewrite(position, data, reason)

    def rewrite(self, position: int, data: dict[str, Any], reason: str) -> int:
        """Replace a message's content; returns the tokens saved (may be 0). Pinned messages are refused."""
        if self.structure.pinned[position]:
            raise ValueError("a pinned message cannot be rewritten")
        return self._rewrite(position, data, reason)

    def _rewrite(self, position: int, data: dict[str, Any], reason: str) -> int:
        before = self.messages[position]
        self._originals.setdefault(position, (before, self.structure.turn_of[position]))
        # What the message said before any strategy touched it: a later summary describes that.
        before.extra.setdefault(ORIGINAL_KEY, before.data)
        before.extra.setdefault(_INPUT_MESSAGE, before)
        if any(before.data.get(key) != data.get(key) for key in _STRUCTURAL_KEYS) or (
                before.data.get("tool_calls") is not data.get("tool_calls") and call_ids(before.data) != call_ids(data)):
            self._reshaped = True
        after = self.counter.count_message(before.rewritten(data))
        self.messages[position] = after
        saved = before.tokens - after.tokens
        if self.structure.counted[position]:
            self.live_tokens -= saved
        self._outcome.rewritten += 1
        self._outcome.tokens_saved += saved
        earlier = self._rewritten_in_step.get(position)
        if earlier is not None:  # rewritten twice in one step: the entry keeps the first "before"
            self._entries[earlier] = replace(self._entries[earlier], tokens_after=after.tokens, reason=reason)
            self._outcome.rewritten -= 1
            return saved
        number = self._record(before, "rewritten", after.tokens, reason)
        self._rewritten_in_step[position] = number
        self._rewrites.setdefault(self.slots[position], []).append(number)
        return saved

    def rewritten_by(self, position: int) -> set[str]:
        """The strategies whose rewrites of the message at ``position`` the ledger holds."""
        entries = (self._entries[n] for n in self._rewrites.get(self.slots[position], ()))
        return {e.strategy for e in entries if e.action == "rewritten"}

    def _drop(self, position: int, reason: str) -> None:
        message = self.messages[position]
        self._originals.setdefault(position, (message, self.structure.turn_of[position]))
        self.removed.add(position)
        if self.structure.counted[position]:
            self.live_messages -= 1
            self.live_tokens -= message.tokens
        self._outcome.removed += 1
        self._outcome.tokens_saved += message.tokens
        earlier = self._rewritten_in_step.pop(position, None)
        if earlier is not None:  # rewritten earlier in this step, now removed: one ledger line says so
            self._entries[earlier] = replace(self._entries[earlier], action="removed", tokens_after=0, reason=reason)
            self._outcome.rewritten -= 1
            return
        self._record(message, "removed", 0, reason)

    def _record(self, message: Message, action: LedgerAction, tokens_after: int, reason: str) -> int:
        """Write the ledger's entry for ``message``; returns its number."""
        handle = content_handle(message.data) if self.seams.store is not None else None
        number = self._next_entry
        self._next_entry += 1
        self._entries[number] = LedgerEntry(message.line, message.role, self.strategy, self.pass_number, action,
                                            message.tokens, tokens_after, reason, handle)
        return number
