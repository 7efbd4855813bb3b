"""Summarize{turns}: replaces the oldest turns (never the current one) with one summary message.

The summary carries the files read and changed (tracked from the tool
calls' arguments) across compactions: a later run folds the previous
summary in — it is handed to the summarizer as the previous summary and its
file lists are united — rather than summarizing a summary blindly. Identifiers
the summarizer lost are appended verbatim. With a store, summaries are cached
by a hash of the span and the prompt, so a rerun asks the model nothing.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.engine import fit
from core.engine.budget import MESSAGES
from core.engine.workspace import Workspace
from core.errors import StrategySkipped
from core.io import jsonio
from core.messages import (
    FAILED,
    SUMMARY_MARKER,
    Message,
    content_text,
    is_provider_record,
    is_summary,
    original_data,
    written_by_compact,
)
from core.strategies.base import Param, StrategyInfo
from core.summarizers.base import Summarizer, SummaryRequest
from core.summarizers.extractive import OMITTED
from core.summarizers.facts import MAX_FACTS, extract_facts, missing_facts
from core.summarizers.span_memo import SpanMemo
from core.summarizers.summary_files import (
    FACTS,
    FILES_CHANGED,
    FILES_READ,
    Touches,
    last_touches,
    names_that_fit,
    newest_files,
    old_outputs,
    output_outranked,
    parse_previous,
    tracked_files,
    unite,
    working_copy,
    writes,
)

MARKER = SUMMARY_MARKER
# What the marker means, for a model or a person who meets it without the README.
WRITTEN_BY = "(CUCA marks what the compact tool wrote.)"
WRITTEN_BY_TOKENS = 10  # (cl100k: 9) under a budget, from the digest's share, not the file lists'
_HEADER_TURNS = re.compile(re.escape(SUMMARY_MARKER) + r" turns (\d+)-(\d+)")
MAX_KEPT_FACTS = 20


def _cache_key(summarizer: Any, request: SummaryRequest) -> str:
    """What the summary depends on, hashed one message at a time (a span can be tens of megabytes)."""
    digest = hashlib.sha256()
    for part in (summarizer.identity(), request.previous, *request.messages, list(request.facts), list(request.failed),
                 request.max_tokens):
        digest.update(jsonio.dumps(part, sort_keys=True))
        digest.update(b"\n")
    return "summary:" + digest.hexdigest()


@dataclass
class _Memo:
    """What one step reads once however often it composes the span's summary (to fit, to keep its
    newest exchange, to top up): each message's files, and where the earlier summaries are."""

    files: SpanMemo[Touches] = field(default_factory=SpanMemo)
    summaries: list[int] | None = None

    def previous_summary(self, workspace: Workspace, before: int) -> int | None:
        """The nearest earlier summary before ``before`` (inside the span too: a pinned message may precede it).

        A provider's compaction record is none: it stays in place, read by the provider, so the new
        summary neither folds it in nor repeats it."""
        if self.summaries is None:
            self.summaries = [p for p in range(len(workspace.messages)) if workspace.alive(p)
                              and is_summary(workspace.messages[p]) and not is_provider_record(workspace.messages[p])]
        at = bisect.bisect_left(self.summaries, before)
        return self.summaries[at - 1] if at else None


# Without `turns`, under a token budget: the summary may take this share of the budget (plus as
# much again for an earlier summary it folds in), and never more than `max_tokens`.
SUMMARY_SHARE = 0.3
# A digest this much smaller than its room (share of the budget) gives the room back to the messages.
SLACK_SHARE = 0.03
# The share of the summary's room the summarizer's text may take.
DIGEST_SHARE = 0.75
MIN_SUMMARY_TOKENS = 64
SEED_TURNS = 10


def _oldest_turns(workspace: Workspace, turns: int) -> list[int]:
    """The seed's span: the oldest ``turns`` turns, never the current one."""
    starts = workspace.structure.user_positions
    count = min(turns, len(starts) - 1)
    if count <= 0:
        return []
    return _removable(workspace, range(starts[0], starts[count]))


def _removable(workspace: Workspace, positions: Any) -> list[int]:
    # What compact wrote itself (an earlier summary, placeholders) is never summarized again, and
    # each message goes with its exchange; an exchange holding a pinned message stays whole.
    chosen: set[int] = set()
    for p in positions:
        if workspace.alive(p) and not workspace.pinned(p) and not written_by_compact(workspace.messages[p]):
            chosen |= workspace.removal_set([p]) or set()
    return sorted(chosen)








def _summary_room(workspace: Workspace, share: float, max_tokens: int, previous_tokens: int) -> int:
    limit = workspace.budget.limit or 0
    room = min(max_tokens, int(limit * share))
    return max(MIN_SUMMARY_TOKENS, room + min(previous_tokens, room))


def apply(workspace: Workspace, *, turns: int | None, max_tokens: int, share: float) -> str:
    summarizer = workspace.seams.needed_summarizer()
    budget = workspace.budget
    by_turns = turns is not None or workspace.full or budget.token_limit is None
    kept: set[int] = set()
    memo = _Memo()
    if by_turns:
        removable = _oldest_turns(workspace, turns or SEED_TURNS)
        if budget.trigger == MESSAGES and turns is None and not workspace.full:
            removable = fit.oldest_to_go(workspace, 0) or removable
        room = reserve = max_tokens
    else:
        first_previous = memo.previous_summary(workspace, len(workspace.messages))
        previous_tokens = workspace.messages[first_previous].tokens if first_previous is not None else 0
        room = _summary_room(workspace, share, max_tokens, previous_tokens)
        # An earlier summary the new one takes the place of is counted in the live tokens already.
        reserve = room - _folded_tokens(workspace, first_previous)
        kept = working_copy(workspace, memo.files, share)
        removable = fit.oldest_to_go(workspace, reserve, kept)
        current = workspace.structure.current_turn_start
        if kept and (not fit.reaches(workspace, removable, reserve) or current is not None and removable[-1:] > [current]):
            # Going around the writes would not reach the budget, or would take the current turn's
            # newest messages instead: the writes go like the rest.
            kept = set()
            removable = fit.oldest_to_go(workspace, reserve)
    if not removable:
        return "nothing to summarize: only pinned messages and the current turn are left"
    try:
        return _summarize_span(workspace, summarizer, removable, room, memo, fit_budget=not by_turns, keep=kept)
    except StrategySkipped:
        if not kept or min(kept) > removable[-1]:
            raise  # the span went around no write: starting over would summarize the same span again
    # The span left around the writes was too small for a summary to pay off (the writes are most
    # of what is old): the writes go like the rest.
    workspace.restart_step()
    removable = fit.oldest_to_go(workspace, reserve)
    return _summarize_span(workspace, summarizer, removable, room, memo, fit_budget=True)




def _kept_write(workspace: Workspace, kept: set[int] | frozenset[int], removable: list[int]) -> str:
    """The detail's words for the working copies the span went around."""
    around = [p for p in sorted(kept) if p < removable[-1]]
    found = ", ".join(dict.fromkeys(f"{tool} {path}" for p in around for tool, path in writes(workspace.messages[p].data)))
    tokens = sum(workspace.messages[p].tokens for p in around if workspace.structure.counted[p])
    return f"; kept the working copies in place ({found}, {tokens:,} tokens)"


@dataclass(frozen=True)
class Composed:
    """A summary message, its size, and what the step reports of it."""

    summary: dict[str, Any]
    tokens: int
    request: SummaryRequest
    by: str
    notes: list[str]
    lost: list[str]  # identifiers the summarizer lost, appended verbatim
    previous_at: int | None  # the earlier summary it folds in


def _compose(workspace: Workspace, summarizer: Summarizer, removable: list[int], room: int, digest: float,
             memo: _Memo) -> Composed:
    """The summary message of ``removable`` within ``room`` tokens, and what the step reports of it."""
    span = [original_data(workspace.messages[p]) for p in removable]
    previous_at = memo.previous_summary(workspace, removable[-1] + 1)
    previous_text = content_text(workspace.messages[previous_at].data) if previous_at is not None else ""
    previous = parse_previous(previous_text)
    facts = list(dict.fromkeys([*previous.facts, *extract_facts(span)]))[-MAX_FACTS:]
    # Turns are numbered from the start of the conversation: an earlier summary already covers some.
    covered = _HEADER_TURNS.match(previous_text)
    first_covered = int(covered.group(1)) if covered else None
    turns_before = int(covered.group(2)) if covered else 0
    first_turn = turns_before + max(workspace.turn_number(removable[0]), 1)
    last_turn = turns_before + max(workspace.turn_number(removable[-1]), 1)
    request = SummaryRequest(
        messages=tuple(span),
        first_turn=first_turn,
        last_turn=last_turn,
        previous=previous.body or None,
        facts=tuple(facts),
        failed=tuple(i for i, p in enumerate(removable) if workspace.messages[p].extra.get(FAILED)),
        turns=tuple(turns_before + max(workspace.turn_number(p), 1) for p in removable),
        # The file lists and kept identifiers (paths, errors: what an agent reuses) get the rest.
        max_tokens=max(MIN_SUMMARY_TOKENS, int(room * digest) - (WRITTEN_BY_TOKENS if digest < 1 else 0)),
    )
    store = workspace.seams.store
    text, by, notes = _summary_text(workspace, summarizer, request)
    read, changed = tracked_files(span, memo.files)
    read, changed = unite(previous.read, read), unite(previous.changed, changed)
    listed = f"{text}\n{', '.join(read)}\n{', '.join(changed)}"  # a path the file lists name is not lost
    # A file the span changed is named once, as changed: the agent knew it.
    changed_names = frozenset(changed)  # (once: per name it made the step quadratic in the files)
    read = [path for path in read if path not in changed_names]
    lost = missing_facts(listed, request.facts)[-MAX_KEPT_FACTS:]
    lines = [
        (f"{MARKER} turns {first_covered or request.first_turn}-{request.last_turn} "
        f"(lines {_line_range(workspace, removable)}, {len(removable)} messages) summarized by {by}. {WRITTEN_BY}"),
        text,
    ]
    if store is not None:
        lines.append(f"The summarized messages are in the offload store: compact recall WORDS --store {store.shown_path}")
    # The file lists and the kept identifiers take what room the summary leaves: the files touched
    # last first, read or changed alike (an agent goes back to what it worked on last).
    used = workspace.counter.count_text("\n".join(lines)) + 8
    labels = workspace.counter.count_text(FILES_CHANGED) + workspace.counter.count_text(FILES_READ) + 2
    touched_last = last_touches(span, memo.files)
    changed, read = newest_files(workspace, changed, read, room - used - labels, touched_last, previous.left_out)
    for label, items in ((FILES_CHANGED, changed), (FILES_READ, read), (FACTS, lost)):
        fitting = names_that_fit(workspace, items, room - used - workspace.counter.count_text(label))
        if label == FACTS:
            lost = fitting
        if fitting:
            joiner = "; " if label == FACTS else ", "
            line = f"{label} {joiner.join(fitting)}"
            lines.insert(len(lines) - (store is not None), line)
            used += workspace.counter.count_text(line) + 1
    summary = {"role": "system", "content": "\n".join(lines)}
    tokens = workspace.counter.count_message(Message(data=summary)).tokens
    return Composed(summary, tokens, request, by, list(notes), lost, previous_at)


def _summary_text(workspace: Workspace, summarizer: Summarizer, request: SummaryRequest) -> tuple[str, str, Sequence[str]]:
    """The summarizer's text for ``request``, who wrote it and its notes: from the store's summary
    cache when it holds the span's, else from the summarizer (and then cached)."""
    store = workspace.seams.store
    # The key serialises the whole span (tens of megabytes on a long session): only a store needs it.
    key = _cache_key(summarizer, request) if store is not None else ""
    cached = store.get_summary(key) if store is not None else None
    if cached is not None:
        return cached["text"], cached["meta"].get("by", summarizer.name), ["from the summary cache"]
    result = summarizer.summarize(request, workspace.counter)
    # A lone surrogate quoted from the span (half an emoji) is no use in compact's own text, and
    # the summary cache, SQLite, takes UTF-8 only.
    text = jsonio.valid_unicode(result.text)
    if store is not None:
        store.put_summary(key, text, {"by": result.by, "attempts": result.attempts})
    return text, result.by, result.notes


def _summarize_span(workspace: Workspace, summarizer: Summarizer, removable: list[int], room: int, memo: _Memo, *,
                    fit_budget: bool, keep: set[int] | frozenset[int] = frozenset()) -> str:
    """Replace ``removable`` with its summary; ``fit_budget``: the span may move to land just under the
    budget (never over ``keep``)."""
    digest = DIGEST_SHARE if fit_budget else 1.0  # with `turns`, max_tokens is the summary's own cap
    composed = _compose(workspace, summarizer, removable, room, digest, memo)
    outputs = old_outputs(workspace, removable, keep) if fit_budget and OMITTED in composed.summary["content"] else []
    if outputs:  # the findings the summary left out outrank them: the span takes them, the summary their room
        room += sum(workspace.messages[p].tokens for p in outputs if workspace.structure.counted[p])
        removable = sorted({*removable, *outputs})
        composed = _compose(workspace, summarizer, removable, room, digest, memo)
    if composed.tokens > room and summarizer.fits_its_room:
        # The file lists and kept identifiers came on top: ask for a digest that leaves them room.
        smaller = max(MIN_SUMMARY_TOKENS, room - (composed.tokens - room) - 8)
        composed = _compose(workspace, summarizer, removable, smaller, digest, memo)
    budget = workspace.budget
    # (Only when asking again is free: asking a model again would cost a second call.)
    refit = fit_budget and summarizer.fits_its_room and bool(budget.limit)
    if refit and room - composed.tokens > SLACK_SHARE * (budget.limit or 0):
        # The digest came out smaller than its room: keep more of the newest messages instead.
        shorter = fit.oldest_to_go(workspace, composed.tokens + 8 - _folded_tokens(workspace, composed.previous_at), keep)
        given_back = set(removable) - set(shorter)
        if OMITTED in composed.summary["content"] and given_back and output_outranked(workspace, given_back):
            shorter = []  # the slack goes to the summary's findings (_top_up), not back to an old output
        if shorter and len(shorter) < len(removable):
            removable = shorter
            composed = _compose(workspace, summarizer, removable, room, digest, memo)
    elif refit and not fit.reaches(workspace, removable, composed.tokens - _folded_tokens(workspace, composed.previous_at)):
        # The summary came out over its room (its header, its smallest digest): the span takes what it still needs.
        longer = fit.oldest_to_go(workspace, composed.tokens + 8 - _folded_tokens(workspace, composed.previous_at), keep)
        if not set(longer) <= set(removable):
            removable = sorted({*removable, *longer})
            composed = _compose(workspace, summarizer, removable, room, digest, memo)
    if refit and len(removable) > 1:
        added = composed.tokens - _folded_tokens(workspace, composed.previous_at)
        kept = fit.keep_newest_partly(workspace, removable, added, _worth_less(workspace, composed))
        if kept:
            removable = [p for p in removable if p not in kept]
            if not removable:
                return f"kept the span's only exchange ({len(kept)} messages) with its middle cut instead"
            composed = _compose(workspace, summarizer, removable, room, digest, memo)
    # An earlier summary left beside the new one (a provider's record, a pinned one) is not replaced.
    span_tokens = sum(workspace.messages[p].tokens for p in removable) + _folded_tokens(workspace, composed.previous_at)
    if refit:
        composed = _top_up(workspace, summarizer, removable, digest, span_tokens, composed, memo) or composed
    # Under a message budget a summary pays off by its count alone; under a token budget it must be smaller.
    if not workspace.full and budget.token_limit is not None and composed.tokens >= span_tokens:
        raise StrategySkipped(
            f"the summary ({composed.tokens:,} tokens) would not be smaller than what it replaces "
            f"({span_tokens:,} tokens); the turns stay as they are"
        )
    _replace_span(workspace, removable, composed)
    request = composed.request
    detail = f"summarized turns {request.first_turn}-{request.last_turn} ({len(removable)} messages) with {composed.by}"
    lost = composed.lost
    if lost:
        shown = "; ".join(lost[:5]) + (f"; … {len(lost) - 5} more" if len(lost) > 5 else "")
        detail += f"; appended {len(lost)} identifier(s) the summary had lost: {shown}"
    if composed.notes:
        detail += "; " + "; ".join(composed.notes)
    if keep and min(keep) < removable[-1]:  # the span, as it ended up, went around them: say so
        detail += _kept_write(workspace, keep, removable)
    return detail


def _worth_less(workspace: Workspace, composed: Composed) -> Callable[[set[int]], bool]:
    """Whether an exchange of the span is worth less than the summary's room: when the summary left
    findings out, an old output they outrank is."""
    left_out = OMITTED in composed.summary["content"]
    return lambda exchange: left_out and output_outranked(workspace, exchange)


def _replace_span(workspace: Workspace, removable: list[int], composed: Composed) -> None:
    """The span goes; the summary takes the place of the earlier one it folds in, or of the span."""
    request, previous_at = composed.request, composed.previous_at
    reason = f"summarized into turns {request.first_turn}-{request.last_turn}"
    if not workspace.remove(removable, reason):  # (the span is whole exchanges: one removal, thousands of messages)
        for position in removable:
            workspace.remove([position], reason)
    place = _summary_place(workspace, removable)
    if previous_at is not None and _folds(workspace, previous_at):
        # The earlier summary (this run's, a previous run's or the agent's) takes the new one in.
        if place != removable[0] and previous_at < place:  # (before a request the span went around: after it)
            workspace.remove_own(previous_at, "earlier summary folded into the new one")
            workspace.insert(place, Message(data=composed.summary))
        else:
            workspace.rewrite_own(previous_at, composed.summary, "earlier summary folded into the new one")
    else:
        workspace.insert(place, Message(data=composed.summary))


def _summary_place(workspace: Workspace, removable: list[int]) -> int:
    """Before the span; after a request it goes around (kept in place): the work follows the asking."""
    going = set(removable)
    around = [p for p in workspace.structure.user_positions
              if removable[0] < p < removable[-1] and p not in going and workspace.alive(p)]
    return around[-1] + 1 if around else removable[0]


def _folds(workspace: Workspace, previous_at: int | None) -> bool:
    """Whether the new summary takes the place of the earlier one at ``previous_at`` (else it goes beside it)."""
    if previous_at is None or is_provider_record(workspace.messages[previous_at]):  # (its bytes are signed)
        return False
    return workspace.is_own(previous_at) or workspace.policy.trace or not workspace.pinned(previous_at)


def _folded_tokens(workspace: Workspace, previous_at: int | None) -> int:
    """The tokens of the earlier summary the new one replaces: they are in the live count already."""
    return workspace.messages[previous_at].tokens if previous_at is not None and _folds(workspace, previous_at) else 0


def _top_up(workspace: Workspace, summarizer: Summarizer, removable: list[int], digest: float,
            span_tokens: int, composed: Composed, memo: _Memo) -> Composed | None:
    """When the run would still land under the fill share of the budget (fit.fills), a summary that left lines out
    gets the slack: the same span summarized again with more room. None when there is nothing to gain."""
    slack = fit.slack(workspace, workspace.live_tokens - span_tokens + composed.tokens)
    if not slack:
        return None
    target = composed.tokens + slack
    for _ in range(2):  # the file lists fill what room the digest leaves: a second try corrects the aim
        grown = _compose(workspace, summarizer, removable, target, digest, memo)
        if grown.tokens <= composed.tokens:
            return None  # nothing had been left out
        if grown.tokens <= composed.tokens + slack:
            return grown
        target -= grown.tokens - (composed.tokens + slack) + 4
    return None


def _line_range(workspace: Workspace, positions: Sequence[int]) -> str:
    lines = [workspace.messages[p].line for p in positions if workspace.messages[p].line is not None]
    if not lines:
        return "?"
    return f"{min(lines)}-{max(lines)}"  # type: ignore[type-var]


STRATEGY = StrategyInfo(
    name="summarize",
    alias="Summarize",
    summary="replace the oldest turns with one summary (needs --summarizer)",
    params=(
        Param("turns", int, None, "summarize the oldest turns, this many (default: exactly the span that has to go)"),
        Param("max_tokens", int, 4096, "the most tokens the summary may take"),
        Param("share", float, SUMMARY_SHARE, "the share of a token budget the summary may take"),
    ),
    apply=apply,
    needs="summarizer",
)
