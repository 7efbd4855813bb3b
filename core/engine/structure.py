"""How a message list hangs together: turns, tool-call pairing, pins.

Computed in one linear pass over the list; strategies ask it which messages
must go together (a call with its results) and which may not go at all.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigError
from core.messages import (
    PLACEHOLDER_PREFIX,
    ROLES,
    SUMMARY_MARKER,
    SYSTEM_ROLES,
    Message,
    Pairing,
    call_name,
    call_with_id,
    countable_text,
    is_provider_record,
    is_request,
    is_user_message,
    pair_calls,
    starts_with_marker,
    tool_calls,
)

KEEP_KINDS = ("role", "tool", "match", "line")
# How long one `match:` pattern may search one message. The `regex` engine already
# defuses most nested repetitions such as (a+)+; this bounds the rest, e.g. (a|aa)+$.
MATCH_SECONDS = 1.0


@dataclass(frozen=True)
class KeepRule:
    """A user pin: ``role:NAME``, ``tool:NAME``, ``match:REGEX`` or ``line:N`` / ``line:A-B``."""

    kind: str
    value: str
    pattern: Any = None  # a compiled `regex` pattern for match: rules
    lines: tuple[int, int] | None = None

    @classmethod
    def parse(cls, rule: str) -> KeepRule:
        kind, sep, value = rule.partition(":")
        if not sep or kind not in KEEP_KINDS or not value:
            raise ConfigError(
                f"invalid keep rule {rule!r}",
                fix="use role:NAME, tool:NAME, match:REGEX, or line:N / line:A-B",
            )
        if kind == "match":
            import regex  # with a per-search timeout, which the standard re module lacks

            try:
                return cls(kind, value, pattern=regex.compile(value))
            except regex.error as exc:
                raise ConfigError(f"invalid regular expression in keep rule {rule!r}: {exc}") from None
        if kind == "line":
            first, dash, last = value.partition("-")
            try:
                low = int(first)
                high = int(last) if dash else low
            except ValueError:
                raise ConfigError(f"invalid line range in keep rule {rule!r}", fix="use line:12 or line:10-20") from None
            return cls(kind, value, lines=(low, high))
        if kind == "role" and value not in ROLES:  # role:asistant would pin nothing, silently

            near = difflib.get_close_matches(value, ROLES, n=1)
            raise ConfigError(f"unknown role {value!r} in keep rule {rule!r}",
                              fix=(f"did you mean role:{near[0]}? " if near else "") + "roles: " + ", ".join(ROLES))
        return cls(kind, value)

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"


def kept_lines(messages: Sequence[Message], rules: Sequence[KeepRule]) -> frozenset[int]:
    """Original line numbers of the messages that ``rules`` pin."""
    if not rules:
        return frozenset()
    datas = [m.data for m in messages]
    pairing = pair_calls(datas) if any(rule.kind == "tool" for rule in rules) else None
    kept: set[int] = set()
    for position, message in enumerate(messages):
        if message.line is None or not message.data:
            continue
        answered = _answered_tools(datas, pairing, position) if pairing is not None else set()
        if any(_matches(rule, message, answered) for rule in rules):
            kept.add(message.line)
    return frozenset(kept)


TOOLS_NAMED = 8  # how many of the transcript's tools an error lists


class ToolRuleTally:
    """Which `tool:` keep rules pinned something, over one transcript or the conversations of a
    dataset, and the tools those called (to name them when a rule pinned nothing). A `tool:` rule
    that pins nothing is an error, as a `line:` rule is: `tool:bash` on a session whose tool is
    `Bash` would otherwise keep nothing, silently."""

    def __init__(self, rules: Sequence[KeepRule]) -> None:
        self.rules = [rule for rule in rules if rule.kind == "tool"]
        self.pinned: set[KeepRule] = set()
        self.tools: Counter[str] = Counter()
        self.conversations = 0

    def add(self, messages: Sequence[Message]) -> list[KeepRule]:
        """Count one conversation in; the rules that pin nothing in it."""
        if not self.rules:
            return []
        self.conversations += 1
        unpinned = [rule for rule in self.rules if not kept_lines(messages, [rule])]
        self.pinned.update(rule for rule in self.rules if rule not in unpinned)
        if unpinned:
            self.tools.update(name for m in messages for c in tool_calls(m.data) if (name := call_name(c)))
        return unpinned

    def unpinned(self) -> list[KeepRule]:
        """The rules that pinned nothing in any conversation counted."""
        return [rule for rule in self.rules if rule not in self.pinned]

    def reasons(self, *, dataset: bool = False) -> dict[str, str]:
        """Each rule that pinned nothing in any conversation counted, and why ("no tool call is named …")."""
        if not self.conversations:
            return {}
        reasons = {}
        for rule in self.unpinned():
            why, fix = _why_unpinned(rule, self.tools, dataset=dataset)
            reasons[str(rule)] = f"{why} ({fix})"
        return reasons

    def raise_unpinned(self, path: str | None, *, dataset: bool = False) -> None:
        """Raise the error of the first rule that pinned nothing in any conversation counted."""
        unpinned = self.unpinned()
        if unpinned and self.conversations:
            why, fix = _why_unpinned(unpinned[0], self.tools, dataset=dataset)
            where = f" in any of the {self.conversations:,} conversations" if dataset else ""
            raise ConfigError(f"keep rule {str(unpinned[0])!r} pins nothing{where}: {why}", path=path, fix=fix)


def _why_unpinned(rule: KeepRule, tools: Counter[str], *, dataset: bool) -> tuple[str, str]:
    """Why ``rule`` pins nothing, and the fix: the tools called, most called first."""
    if not tools:
        return ("the dataset has" if dataset else "the transcript has") + " no tool calls", "leave the rule out"
    names = sorted(tools, key=lambda name: (-tools[name], name))
    shown = ", ".join(names[:TOOLS_NAMED]) + (", …" if len(names) > TOOLS_NAMED else "")
    whose = "the dataset's" if dataset else "the transcript's"
    return f"no tool call is named {rule.value!r}", _nearest_tool(rule.value, names) + f"{whose} tools: {shown}"


def _nearest_tool(name: str, names: Sequence[str]) -> str:
    """"did you mean tool:Bash? " for tool:bash (case first, then spelling), or ""."""
    by_case = {n.lower(): n for n in reversed(names)}  # (the most called wins a tie)
    near = [by_case[name.lower()]] if name.lower() in by_case else difflib.get_close_matches(name, names, n=1)
    return f"did you mean tool:{near[0]}? " if near else ""


def _answered_tools(datas: Sequence[Mapping[str, Any]], pairing: Pairing, position: int) -> set[str]:
    """The names of the calls the result at ``position`` answers."""
    calls = (call_with_id(datas[owner], call_id) for owner, call_id in pairing.answered_by.get(position, ()))
    return {call_name(call) for call in calls if call is not None}


def _matches(rule: KeepRule, message: Message, answered: set[str]) -> bool:
    data = message.data
    if rule.kind == "role":
        return data.get("role") == rule.value
    if rule.kind == "tool":
        names = {call_name(c) for c in tool_calls(data)}
        names |= answered
        if data.get("role") == "tool" and isinstance(data.get("name"), str):
            names.add(data["name"])
        return rule.value in names
    if rule.kind == "match":
        assert rule.pattern is not None
        try:
            return rule.pattern.search(countable_text(data), timeout=MATCH_SECONDS) is not None
        except TimeoutError:
            raise ConfigError(
                f"keep rule {str(rule)!r} took over {MATCH_SECONDS:g} s on the message at line {message.line}"
                " (a nested repetition such as (a|aa)+ backtracks without end)",
                fix="simplify the pattern, e.g. a+ for (a|aa)+",
            ) from None
    assert rule.lines is not None and message.line is not None
    return rule.lines[0] <= message.line <= rule.lines[1]


@dataclass
class Structure:
    """Turns, pairing and pins of one message list (positions are list indexes)."""

    user_positions: list[int]
    turn_of: list[int]
    results_of_call: dict[tuple[int, str], list[int]]
    answered_by: dict[int, list[tuple[int, str]]]
    group_of: list[int]
    groups: dict[int, list[int]]
    pinned: list[bool]
    counted: list[bool]
    orphan_results: list[int] = field(default_factory=list)
    orphan_calls: list[tuple[int, str]] = field(default_factory=list)

    @property
    def current_turn_start(self) -> int | None:
        return self.user_positions[-1] if self.user_positions else None

    def group(self, position: int) -> list[int]:
        """The messages that must be removed together with ``position``: a call and all its results."""
        return self.groups[self.group_of[position]]


@dataclass(frozen=True)
class PinRules:
    """What a run pins besides the first system message and the newest request.

    ``kept``: input lines the user's keep rules pin; ``markers``: system messages starting with
    one (compact's warning and graph) are pinned; ``graph_marker``: the rendered graph, which is
    not counted; ``task_pin_tokens``: pin the task statement (the first request) when it is at
    most this long; ``pin_summaries``: an agent's or compact's summary is pinned.
    """

    kept: frozenset[int] = frozenset()
    markers: tuple[str, ...] = ()
    graph_marker: str | None = None
    task_pin_tokens: int | None = None
    pin_summaries: bool = False


def analyse(messages: Sequence[Message], rules: PinRules | None = None, own: frozenset[int] = frozenset()) -> Structure:
    """Turns, pairing and pins of ``messages``; ``own``: the positions of the messages this run wrote
    (its summary), pinned for the rest of the run."""
    rules = rules or PinRules()
    user_positions = [i for i, m in enumerate(messages) if m.data and is_user_message(m.data)]
    pairing = pair_calls([m.data for m in messages])
    results_of_call, answered_by = pairing.results_of_call, pairing.answered_by
    group_of, groups = _groups(len(messages), answered_by)
    marker = rules.graph_marker
    return Structure(
        user_positions=user_positions,
        turn_of=_turns(len(messages), user_positions),
        results_of_call=results_of_call,
        answered_by=answered_by,
        group_of=group_of,
        groups=groups,
        pinned=_pins(messages, user_positions, rules, own),
        counted=[bool(m.data) and not (marker and starts_with_marker(m.data, marker)) for m in messages],
        orphan_results=sorted(set(pairing.orphan_results)),
        orphan_calls=sorted(key for key, results in results_of_call.items() if not results),
    )


def _turns(count: int, user_positions: Sequence[int]) -> list[int]:
    """The turn of every position: -1 before the first user message."""
    turn_of = [-1] * count
    turn = -1
    next_users = iter(user_positions)
    next_user = next(next_users, None)
    for i in range(count):
        if i == next_user:
            turn += 1
            next_user = next(next_users, None)
        turn_of[i] = turn
    return turn_of


def _groups(count: int, answered_by: Mapping[int, list[tuple[int, str]]]) -> tuple[list[int], dict[int, list[int]]]:
    """Union-find over call/result pairs: the messages that must go together share a root."""
    parent = list(range(count))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for position, owners in answered_by.items():
        for owner, _ in owners:
            parent[find(position)] = find(owner)
    groups: dict[int, list[int]] = {}
    group_of = [0] * count
    for i in range(count):
        root = find(i)
        group_of[i] = root
        groups.setdefault(root, []).append(i)
    return group_of, groups


def _pins(messages: Sequence[Message], user_positions: Sequence[int], rules: PinRules, own: frozenset[int]) -> list[bool]:
    pinned = [False] * len(messages)
    # The first system message the user wrote: a summary, placeholder or CUCA message compact
    # added is not it (without a system prompt, the first summary would otherwise be pinned).
    markers = rules.markers
    compact_prefixes = (*markers, SUMMARY_MARKER, PLACEHOLDER_PREFIX)
    first_system = next(
        (i for i, m in enumerate(messages)
         if m.role in SYSTEM_ROLES and not m.extra.get("summary")
         and not any(starts_with_marker(m.data, p) for p in compact_prefixes)),
        None,
    )
    if first_system is not None:
        pinned[first_system] = True
    for position in _request_pins(messages, user_positions, rules.task_pin_tokens):
        pinned[position] = True
    for i, message in enumerate(messages):
        if (not message.data  # a skipped invalid line passes through untouched
                or message.line is not None and message.line in rules.kept
                or markers and message.role in SYSTEM_ROLES and any(starts_with_marker(message.data, mk) for mk in markers)
                or own and i in own
                or is_provider_record(message)):  # a provider's compaction record: what it hides stays hidden
            pinned[i] = True
        elif rules.pin_summaries and message.extra and message.extra.get("summary"):
            pinned[i] = True  # an agent's own compaction summary: folded into ours, never dropped
        elif rules.pin_summaries and message.role in SYSTEM_ROLES and starts_with_marker(message.data, SUMMARY_MARKER):
            pinned[i] = True
    return pinned


def _request_pins(messages: Sequence[Message], user_positions: Sequence[int], task_pin_tokens: int | None) -> list[int]:
    """The newest request a person typed (not hook text, not an empty message) and, when it is a
    different message no longer than ``task_pin_tokens``, the first one: the task statement."""
    if not user_positions:  # no user message at all: the newest reply or result is the conversation's last word
        return [p for p in range(len(messages) - 1, -1, -1)
                if messages[p].data and messages[p].role not in SYSTEM_ROLES][:1]  # (not compact's warning, nor a note)
    requests = [p for p in user_positions if is_request(messages[p])]
    if not requests:
        return list(user_positions[-1:])  # no typed request: the newest user text is the best guess
    pins = [requests[-1]]
    first = requests[0]
    if task_pin_tokens is not None and first != requests[-1] and messages[first].tokens <= task_pin_tokens:
        pins.append(first)
    return pins
