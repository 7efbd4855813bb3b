"""An offline, deterministic summarizer: a readable record of what a span of the conversation held.

It writes lines a model (and a person) can act on, in the order things happened:
what the user asked, the files read (with the names they define) and changed,
the commands run and what they met, the errors, the facts stated (sentences
holding numbers, ids, names, values, from tool output too) and what the
assistant decided. When the lines do not all fit the token budget, the most
useful kinds are kept first (requests, changes, errors and facts before reads,
commands and remarks), newer before older; an earlier summary is carried over
first, shortened in its middle when it must shrink. Each line stands on its own
and says who said, thought or ran what (passages.py: whole sentences, a list or
a table with what introduces it).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from core.counting.counter import MessageCounter
from core.engine.file_calls import SHELL_TOOLS, classify
from core.messages import (
    HARNESS_PREFIXES,
    Pairing,
    call_name,
    content_text,
    one_line,
    pair_calls,
    tool_calls,
)
from core.summarizers.base import SummaryRequest, SummaryResult
from core.summarizers.call_lines import (
    ADDS,
    CHANGE,
    ERROR,
    FACT,
    READ,
    REMARK,
    REQUEST,
    SAY_CHARS,
    result_line,
)
from core.summarizers.carry import carry
from core.summarizers.facts import call_error, first_error_line, tool_output
from core.summarizers.in_play import NamesSource, with_names_in_play
from core.summarizers.passages import PASSAGE_CHARS, passages, said_and_thought
from core.summarizers.retries import got_past_an_error
from core.summarizers.salience import QUOTED_AT, Mentions, quoted_output
from core.summarizers.span_memo import SpanMemo
from core.summarizers.statements import (
    FACT_CHARS,
    asks,
    head,
    says_something,
    value_statements,
)
from core.summarizers.summary_files import touches
from core.summarizers.topic import span_topic
from core.summarizers.worth import by_worth, fitting

ASK_CHARS = 400
FACTS_PER_MESSAGE = 3
DEEP_RESULTS = 400
# An earlier summary carried over may take at most this share of the room.
PREVIOUS_SHARE = 0.5

OMITTED = "less important line(s)"  # the note of a summary that left lines out

# A decision or a finding, not an announcement of the next step ("Let me look at X", "I'll run Y"):
# those say what the assistant was about to do, which the lines for its tool calls already record.
_ANNOUNCEMENT = re.compile(r"(?:now,?\s+|first,?\s+|next,?\s+)?(?:let me|let's|i'll|i will|i need to|i should|i would need to|"
                           r"i'm going to|to test this|the experiments i need)\b", re.IGNORECASE)
_DECISION = re.compile(r"\b(?:we should|decided|the fix|root cause|because|so that|instead|the (?:problem|issue|cause) (?:is|was))\b", re.IGNORECASE)
@dataclass(frozen=True)
class _Line:
    priority: int
    order: int
    text: str


TOPIC_CHARS = 60
# The newest requests always rank first (what the user is asking for now).
RECENT_REQUESTS = 5
# The older requests' share of the room while findings want it.
REQUEST_SHARE = 0.6
_ASKED = "- user asked ("
_ANSWERED = "- user answered ("  # what the assistant had just asked: "Sure, it's sofia_kim_7287."
_PASTED = "- user pasted ("  # what their terminal printed: "jim@host:~/app$ claude -c No conversation found"
_SAID = (_ASKED, _ANSWERED, _PASTED)
# A shell prompt opening the text: "(venv) jim@host:/mnt/c/app$ ", "$ ".
_PROMPT = re.compile(r"^(?:\([\w.-]+\)\s+)?(?:[\w.-]+@[\w.-]+:[^\s$#]*\s?[$#]|\$)\s+\S")
ANSWER_CHARS = 120  # a reply longer than this says more than an answer


def _answers(messages: Sequence[Mapping[str, Any]], position: int, text: str) -> bool:
    """The user's message is a short reply, asking nothing, to a question of the assistant's."""
    previous = messages[position - 1] if position else None
    return len(text) <= ANSWER_CHARS and "?" not in text and previous is not None \
        and previous.get("role") == "assistant" and "?" in content_text(previous)


# A call's results read for the summary, by call id, and the ids of those that failed.
_Answers = tuple[dict[str, str], frozenset[str]]
_NO_ANSWERS: _Answers = ({}, frozenset())


def _newest_results(messages: Sequence[Mapping[str, Any]], pairing: Pairing,
                    failed: frozenset[int] = frozenset()) -> dict[int, _Answers]:
    """The text of the newest DEEP_RESULTS tool results, by the assistant message whose call each
    answers (as ``pairing`` has it: a reused id answers its own call, not every call with that
    id), and the ids of those that failed (``failed``: positions).

    Only those are read for facts, errors and definitions: the summary has room for a few
    hundred lines, and reading every result of a long session costs seconds."""
    texts: dict[int, dict[str, str]] = {}
    failed_ids: dict[int, set[str]] = {}
    for position in sorted(pairing.answered_by, reverse=True)[:DEEP_RESULTS]:
        text = None
        for owner, call_id in pairing.answered_by[position]:
            answers = texts.setdefault(owner, {})
            if call_id in answers:
                continue  # the call's newer result was read
            text = tool_output(content_text(messages[position])) if text is None else text
            answers[call_id] = text
            if position in failed:
                failed_ids.setdefault(owner, set()).add(call_id)
    return {owner: (answers, frozenset(failed_ids.get(owner, ()))) for owner, answers in texts.items()}


def _calls_read(messages: Sequence[Mapping[str, Any]], results: Mapping[int, _Answers]) -> Iterator[
        tuple[tuple[int, str], Mapping[str, Any], bool]]:
    """The calls whose results were read, oldest first, by (position, id), and whether each failed."""
    for owner in sorted(results):
        answers, failed = results[owner]
        for call in tool_calls(messages[owner]):
            call_id = str(call.get("id"))
            if call_id in answers:
                yield (owner, call_id), call, call_id in failed or call_error(call, answers[call_id]) is not None


def _statements(message: Mapping[str, Any], add: Callable[[int, str], None]) -> str:
    """What the assistant said (or thought: its reasoning, told apart) that stands on its own: its
    decision, its first remark that says something, and its facts, FACTS_PER_MESSAGE in all, what it
    said first. Returns the message's text."""
    said, thought = said_and_thought(message)
    decided: tuple[str, str] | None = None
    remark: tuple[str, str] | None = None
    facts: list[tuple[str, str]] = []
    for text, who in ((said, "assistant"), (thought, "assistant (thinking)")):
        if not text.strip():
            continue
        found = [p.text for p in passages(head(text))]
        # The passage holding the decision ("the root cause is ...") ranks with the facts; an
        # announcement of the next step ("Let me make the fix.") is none: its calls' lines say it.
        if decided is None and _DECISION.search(text):
            decided = next(((who, s) for s in found if _DECISION.search(s) and len(s.split()) >= 4
                            and not _ANNOUNCEMENT.match(s)), None)
        # The first passage that says something (not an opener like "Interesting!") is a remark.
        remark = remark or next(((who, s) for s in found if says_something(s)), None)
        facts += [(who, fact) for fact in value_statements(head(text), FACTS_PER_MESSAGE, from_tool=False)]
    if decided:
        add(FACT, f"- {decided[0]}: {one_line(decided[1], SAY_CHARS)}")
    if remark and remark != decided:
        add(REMARK, f"- {remark[0]}: {one_line(remark[1], SAY_CHARS)}")
    for who, fact in [f for f in facts if f not in (remark, decided)][:FACTS_PER_MESSAGE]:
        add(FACT, f"- {who}: {one_line(fact, PASSAGE_CHARS)}")
    return f"{said}\n{thought}"


def _assistant_lines(message: Mapping[str, Any], results: Mapping[str, str],
                     add: Callable[[int, str], None], kinds: set[str], failed: frozenset[str],
                     got_past: set[str]) -> None:
    """What the assistant said, thought and decided, and a line for each of its tool calls (the call
    that got past an error ranks with the errors, or with the findings for a service's call)."""
    text = _statements(message, add)
    if text.strip():
        kinds.add("decision")
        if re.search(r"\bbecause\b|\bso that\b|\bsince\b", text, re.IGNORECASE):
            kinds.add("rationale")
        if re.search(r"\bnext\b|\bwill\b|\bthen\b", text, re.IGNORECASE):
            kinds.add("next_step")
    for call in tool_calls(message):
        result = results.get(str(call.get("id")), "")
        found = classify(call)
        line = result_line(call, found, result, str(call.get("id")) in failed)
        kinds.add("technical_detail")
        if line is not None:
            if line[0] == ERROR:
                kinds.add("error")
            priority, said = line
            if str(call.get("id")) in got_past:
                # A service's call that went through changed what the next turns rely on (a booking).
                priority = min(priority, ERROR if found is not None or call_name(call) in SHELL_TOOLS else FACT)
                if " → " not in said and ": " not in said:  # (a lookup's line may say only what it called)
                    said += " → went through"
            add(priority, said)
        if found is not None and found[0] == "write":
            continue  # "Edited X: replaced 2 lines with 3 lines." says no more than the change line
        for fact in value_statements(result, 2, from_tool=True):
            add(FACT, f"- {call_name(call)} output: {one_line(fact, FACT_CHARS)}")


# What an assistant message gave: which of its calls' results were read (and got past an error), its
# lines and kinds (the span memo holding it checks it is the same message).
_Given = tuple[tuple[tuple[bool, bool], ...], list[tuple[int, str]], frozenset[str]]


def _read_assistant(message: Mapping[str, Any], results: Mapping[str, str],
                    read: tuple[tuple[bool, bool], ...], failed: frozenset[str]) -> _Given:
    lines: list[tuple[int, str]] = []
    found: set[str] = set()

    def collect(priority: int, line: str) -> None:
        lines.append((priority, line))

    got_past = {str(call.get("id")) for call, (_, past) in zip(tool_calls(message), read, strict=True) if past}
    _assistant_lines(message, results, collect, found, failed, got_past)
    return read, lines, frozenset(found)


# An assistant message's lines are ordered by its position: room for this many lines of one message.
_PER_MESSAGE = 1 << 20
# Of a span's results (newest first), so many are read for lines to quote: each costs a scan of
# its lines, and older quotes rank after the newer ones the summary keeps first.
QUOTED_RESULTS = 48
# How much of a quoted line is looked for in what the call's own line already says.
QUOTE_PROBE = 60
# Assistant messages are read newest first: this many before the choice is first tried, then
# twice as many each time, only while an older one's lines could still be chosen.
FIRST_READ = 64
# Reading back stops when older lines could take no more than this share of the summary's room.
SETTLED_ROOM = 0.05
# So many of the newest assistant messages are read whatever the room (their findings gone back to
# outrank newer ones); past them, only while the requests leave room (past that, an older line gone
# back to is missed: the cost of a long span follows its summary's room).
ALWAYS_READ = 256


class _SpanReader:
    """The candidate lines of a span, each with its priority and position; the kinds seen; a topic.

    Requests, notes and orphan results are read at once; the assistant messages (their calls
    and results are the cost of a long span) newest first, as far back as asked. A line said
    again ("Checks: all tests pass") keeps its oldest position: repeated, it is not news.
    ``given`` remembers each assistant message's lines between readers (a run composes one
    span's summary several times); it is left holding this span's only.
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]], first_turn: int,
                 given: SpanMemo[_Given] | None = None, failed: frozenset[int] = frozenset(),
                 names: SpanMemo[frozenset[str]] | None = None,
                 turns: Sequence[int] = ()) -> None:
        self.messages = messages
        self.mentions = Mentions(messages, names)
        self.quoted = 0  # results read for lines to quote (QUOTED_RESULTS at most)
        self._rewritten: set[str] = set()  # the files the messages read so far (the newer) wrote whole
        pairing = pair_calls(messages)
        self.pairing = pairing
        self.results = _newest_results(messages, pairing, failed)
        self.got_past = got_past_an_error(_calls_read(messages, self.results))
        self.earlier = given.renewed() if given is not None else SpanMemo[_Given]()
        self.given = given
        self.found: dict[str, _Line] = {}
        self.kinds: set[str] = set()
        self.assistants: list[int] = []
        topic = ""
        # A span that starts mid-turn continues the first turn; its next request opens the one after.
        opens = bool(messages) and messages[0].get("role") == "user" and bool(content_text(messages[0]).strip())
        turn = first_turn - 1 if opens else first_turn
        requests = [p for p, m in enumerate(messages) if m.get("role") == "user" and asks(content_text(m))]
        self.requests = requests
        self.later: dict[_Line, bool] = {}
        for position, message in enumerate(messages):
            role = message.get("role")
            if role == "assistant":
                self.assistants.append(position)
                continue
            if position in pairing.answered_by:
                continue  # read with its call, among the assistant's lines (most of a long span)
            text = content_text(message)
            add = self._adder(position)
            if role == "user" and text.strip() and text.lstrip().startswith(HARNESS_PREFIXES):
                turn = turns[position] if turns else turn + 1  # it opens a turn like any user text, but asks nothing
            elif role == "user" and text.strip():
                turn = turns[position] if turns else turn + 1  # (the conversation's own, across a gap)
                if position == 0 and first_turn == 1:  # the span opens the conversation: its task
                    topic = one_line(text, TOPIC_CHARS)
                asked = one_line(text, ASK_CHARS)
                said = _PASTED if _PROMPT.match(text.lstrip()) else \
                    _ANSWERED if _answers(messages, position, text.strip()) else _ASKED
                add(self._request_priority(text, position, requests), f"{said}turn {turn}): {asked}")
                # The statements the request line leaves out, whole (not from its 400th character on).
                shown = asked.removesuffix("…")
                beyond = [fact for fact in value_statements(head(text), FACTS_PER_MESSAGE * 2, from_tool=False)
                          if shown != asked and fact not in shown]
                for fact in beyond[:FACTS_PER_MESSAGE]:
                    add(FACT, f"- user: {one_line(fact, PASSAGE_CHARS)}")
            elif role in ("tool", "function"):
                error = first_error_line(text)  # a result whose call is not in the span
                if error:
                    add(ERROR, f"- error: {one_line(error, SAY_CHARS)}")
                    self.kinds.add("error")
            elif role in ("system", "developer") and text.strip():
                add(REMARK, f"- note: {one_line(text, SAY_CHARS)}")
        self.opening_request = topic
        self.unread = len(self.assistants)  # the oldest assistant messages, not read yet

    def _request_priority(self, text: str, position: int, requests: list[int]) -> int:
        """A request ranks first when it is among the newest or a later turn went back to what it
        names; an older one nobody came back to ranks with the facts (a small summary held the
        requests alone and lost the findings the later turns built on)."""
        index = bisect.bisect_right(requests, position)
        if index > len(requests) - RECENT_REQUESTS:
            return REQUEST
        return REQUEST if self.mentions.gone_back_to(text, requests[index] - 1) else FACT

    def _adder(self, position: int) -> Callable[[int, str], None]:
        orders = iter(range(position * _PER_MESSAGE, (position + 1) * _PER_MESSAGE))

        def add(priority: int, text: str) -> None:
            order = next(orders)
            known = self.found.get(text)
            if known is None or order < known.order:
                self.found[text] = _Line(priority, order, text)
        return add

    def read(self, count: int) -> None:
        """Read the newest ``count`` of the assistant messages not read yet."""
        first = max(self.unread - count, 0)
        for position in reversed(self.assistants[first:self.unread]):
            message = self.messages[position]
            answers, failed = self.results.get(position, _NO_ANSWERS)
            read = tuple((str(call.get("id")) in answers, (position, str(call.get("id"))) in self.got_past)
                         for call in tool_calls(message))
            known = self.earlier.get(message)
            if known is None or known[0] != read:
                known = _read_assistant(message, answers, read, failed)
            if self.given is not None:
                self.given.put(message, known)
            add = self._adder(position)
            touched = touches(message, None)
            # What a read found that a newer message of the span wrote whole again is gone.
            stale = {path for is_read, path, _ in touched if is_read and path in self._rewritten}
            starts = tuple(f"- read {path}{end}" for path in stale for end in (" ", ":"))
            for priority, line in known[1]:
                if starts and priority == READ and line.startswith(starts):
                    continue
                ranked = self._ranked(priority, line, position)
                if ranked is not None:
                    add(ranked, line)
            self._quote_results(message, position, add, " ".join(line for _, line in known[1]), stale)
            self.kinds |= known[2]
            self._rewritten.update(path for is_read, path, whole in touched if whole and not is_read)
        self.unread = first

    def _ranked(self, priority: int, line: str, position: int) -> int | None:
        """An edit whose added lines the rest of the span names again (the call it introduced, the
        field it added) is what the next turns built on: it ranks with the findings. One nobody
        named again is left to the "Files changed" list (None)."""
        _, adds, added = line.partition(ADDS)
        if priority != CHANGE or not adds:
            return priority
        return FACT if self.mentions.gone_back_to(added, position) else None

    def _quote_results(self, message: Mapping[str, Any], position: int, add: Callable[[int, str], None],
                       said: str, stale: set[str]) -> None:
        """The lines of the message's results the rest of the span went back to, with their source,
        but for those its own lines already say (`ran cargo init → note: …` quoted again) and those
        of the ``stale`` files' reads (a newer message wrote them whole again)."""
        answers = self.results.get(position, _NO_ANSWERS)[0]
        for call in tool_calls(message):
            output = answers.get(str(call.get("id")))
            if not output or self.quoted >= QUOTED_RESULTS:
                continue
            found = classify(call) if stale else None
            if found is not None and found[0] == "read" and found[1] in stale:
                continue
            self.quoted += 1  # newest first: the summary keeps the newer quotes when room is short anyway
            for line in quoted_output(call, output, self.mentions, position):
                if line.partition(QUOTED_AT)[2].partition(": ")[2][:QUOTE_PROBE] not in said:
                    add(READ, line)

    def lines(self) -> list[_Line]:
        return list(self.found.values())

    def settles(self, room: int, counter: MessageCounter) -> bool:
        """Reading older messages could change no more than a sliver of ``room`` in the choice.

        An unread line is an older assistant message's, of priority FACT or lower. Past the newest
        ALWAYS_READ, when the requests alone (as if not held to their share) would leave under
        SETTLED_ROOM, such a line could take a place only by being gone back to: the lines read
        fill the room instead of a read back through a long span."""
        if not self.unread:
            return True
        if len(self.assistants) - self.unread < ALWAYS_READ:
            return False
        requests = 0
        for line in self.found.values():
            if line.priority < FACT and requests < room:
                requests += counter.count_text(line.text) + 1
        return room - requests < max(8, int(room * SETTLED_ROOM))

    def gone_back_to(self, line: _Line) -> bool:
        """A finding (a fact, an error) the rest of the span named again (salience.py)."""
        if line.priority not in (FACT, ERROR) or line.text.startswith(_SAID):
            return False
        known = self.later.get(line)
        if known is None:
            known = self.later[line] = self.mentions.gone_back_to(line.text, line.order // _PER_MESSAGE)
        return known


def _states_a_finding(line: _Line) -> bool:
    """A fact or an error the span found (not what the user said, which ranks as a request or not)."""
    return line.priority in (FACT, ERROR) and not line.text.startswith(_SAID)


@dataclass(frozen=True)
class ExtractiveSummarizer:
    name: str = "extractive"
    fits_its_room: ClassVar[bool] = True  # (asking again is free: the strategy fits the digest to its room)
    # Each assistant message's lines and each message's names, for the span read last: a run composes
    # one span's summary several times (to leave the file lists room, to keep the newest exchanges, to top up).
    _given: SpanMemo[_Given] = field(default_factory=SpanMemo, compare=False, repr=False)
    _names: SpanMemo[frozenset[str]] = field(default_factory=SpanMemo, compare=False, repr=False)

    def identity(self) -> str:
        return "extractive/20"  # (bumped when what it writes changes: the summary cache misses)

    def summarize(self, request: SummaryRequest, counter: MessageCounter) -> SummaryResult:
        reader = _SpanReader(request.messages, request.first_turn, self._given, frozenset(request.failed), self._names,
                             request.turns)
        turns = f'compressed-from-turns="{request.first_turn}-{request.last_turn}"'
        # Read back only while an older message's lines could still be chosen; the topic, which
        # names what the lines read are about, is not known before: the room is judged with the longest.
        carried, room = self._rooms(request, f'<summary topic="{"x" * TOPIC_CHARS}" {turns}>', counter)
        batch = FIRST_READ
        while reader.unread:
            reader.read(batch)
            batch *= 2
            if reader.settles(room, counter):
                break
        kinds = reader.kinds
        topic = (reader.opening_request or span_topic((line.text.startswith(_SAID), line.text) for line in reader.lines())).replace('"', "'")
        head = f'<summary topic="{topic}" {turns}>'
        carried, room = self._rooms(request, head, counter)
        chosen, omitted = self._choose(reader.lines(), room, counter, reader)
        source = NamesSource(reader.messages, reader.pairing, reader.mentions)
        chosen, in_play, given_up = with_names_in_play(chosen, source, room, counter, full=bool(omitted or reader.unread))
        omitted += given_up
        parts = [carried] if carried else []
        body = [line.text for line in sorted(chosen, key=lambda line: line.order)]
        if in_play:
            body.append(in_play)
        if reader.unread:  # the calls and results of older assistant messages were not even read
            body.append(f"({omitted} {OMITTED} and older details left out to stay within "
                        f"{request.max_tokens} tokens)")
        elif omitted:
            body.append(f"({omitted} {OMITTED} left out to stay within {request.max_tokens} tokens)")
        parts.append("\n".join([head, *body, "</summary>"]))
        # (No "## Preserved Kinds:" trailer: that is a model's claim about its own text; this
        # summary's lines say what they are.)
        return SummaryResult(text="\n".join(parts), by=self.name, preserved_kinds=sorted(kinds))

    def _rooms(self, request: SummaryRequest, head: str, counter: MessageCounter) -> tuple[str, int]:
        """An earlier summary carried over, and the room left for this span's lines."""
        room = request.max_tokens - counter.count_text(head + "</summary>") - 24
        carried = carry(request.previous or "", int(room * PREVIOUS_SHARE), counter)
        return carried, room - (counter.count_text(carried) if carried else 0)

    @staticmethod
    def _choose(lines: list[_Line], room: int, counter: MessageCounter,
                reader: _SpanReader | None = None) -> tuple[list[_Line], int]:
        """The most useful lines that fit: the requests first, then the lines most worth their
        tokens (worth.py: what they say of the names the span keeps coming back to that the lines
        before them do not, and a finding's own worth); ties by priority, within the findings those
        the rest of the span went back to first (salience.py), newer first. Past the newest
        RECENT_REQUESTS, the requests take at most REQUEST_SHARE of the room while other lines
        want it, then what is left."""
        def rank(line: _Line) -> tuple[int, bool, bool, int]:
            # Among the findings gone back to, an edit's added lines come after what was found and said.
            gone_back = reader is not None and reader.gone_back_to(line)
            return line.priority, not gone_back, ADDS in line.text, -line.order
        ordered = sorted(lines, key=rank)
        if reader is not None:
            ordered = by_worth(ordered, reader.mentions.recurrence, counter, _states_a_finding)
        chosen = fitting(ordered, room, counter, held_after=RECENT_REQUESTS, request_share=REQUEST_SHARE)
        return [ordered[index] for index in chosen], len(lines) - len(chosen)

