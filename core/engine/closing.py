"""The closing steps: what runs after the strategies, registered like them (name, summary, apply).

The policy lists the ones in force, in order (a config's ``closing_steps`` may turn one off or
reorder them; ``compact config show`` lists them). ``repair`` is registered here too but opens the
run, before the strategies, when ``--repair`` asks for it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.engine import bound_thinking, fit
from core.engine.clamp import clamp_content
from core.engine.workspace import StepOutcome, Workspace
from core.errors import ConfigError
from core.messages import SYSTEM_ROLES, has_text, is_provider_record, is_summary, is_user_message
from core.report import GIVE_BACK, Action


@dataclass(frozen=True)
class Context:
    """What a closing step may need beyond the workspace."""

    checks_prefix: bool = False  # the model the output goes to checks a thinking block's prefix
    graph_at: int | None = None  # where rendering the graph in will change the conversation
    earlier: frozenset[str] = bound_thinking.THINKING_BLOCKS  # the thinking to remove from earlier turns


Apply = Callable[[Workspace, Context], StepOutcome | None]


@dataclass(frozen=True)
class ClosingStep:
    name: str
    summary: str
    apply: Apply
    # Only under a budget: a full run keeps what it can, an unlimited one has nothing to fit.
    budget_only: bool = False
    # Runs before the strategies, when asked for (--repair), never from the closing list.
    opening: bool = False


# A pinned message clamped to reach the budget keeps at least this many tokens.
PINNED_FLOOR_TOKENS = 64



def repair(workspace: Workspace, context: Context) -> StepOutcome | None:
    """--repair: drop results without a call and calls without a result that the input already had, and
    write a tool message's one-id ``tool_call_ids`` list (SWE-agent) as the ``tool_call_id`` the API takes."""
    structure = workspace.structure
    workspace.begin("repair", 0)
    for position in structure.orphan_results:
        if len(structure.group(position)) == 1 and not workspace.pinned(position):
            workspace.remove([position], "orphan tool result: its call is missing")
    orphan_ids: dict[int, set[str]] = {}
    for position, call_id in structure.orphan_calls:
        orphan_ids.setdefault(position, set()).add(call_id)
    for position, ids in orphan_ids.items():
        if workspace.pinned(position) or not workspace.alive(position):
            continue
        data = dict(workspace.messages[position].data)
        remaining = [c for c in data.get("tool_calls") or [] if str(c.get("id")) not in ids]
        reason = f"orphan tool call(s) {', '.join(sorted(ids))}: the result is missing"
        if not remaining and not has_text(data):
            workspace.remove([position], reason)
            continue
        if remaining:
            data["tool_calls"] = remaining
        else:
            data.pop("tool_calls", None)
        workspace.rewrite(position, data, reason)
    for position, message in enumerate(workspace.messages):
        listed = message.data.get("tool_call_ids") if message.role == "tool" else None
        if isinstance(listed, list) and len(listed) == 1 and "tool_call_id" not in message.data \
                and workspace.alive(position) and not workspace.pinned(position):
            # SWE-agent's one-id list: the chat API takes the call's id only as tool_call_id.
            data = {key: value for key, value in message.data.items() if key != "tool_call_ids"}
            workspace.rewrite(position, {**data, "tool_call_id": listed[0]}, "tool_call_ids list written as tool_call_id")
    return workspace.end("dropped orphan calls and results the input already had; wrote one-id "
                            "tool_call_ids lists as tool_call_id")


def clamp_pinned(workspace: Workspace, context: Context) -> StepOutcome | None:
    """When pinned messages alone exceed a token budget, cut the middle of the newest request, then of
    the summaries earlier runs wrote (summarize folds one in only beside a span it replaces), then (as
    a last resort) of the first system message, keeping head and tail and marking the cut."""
    budget = workspace.budget
    if budget.token_limit is None or not workspace.over_budget():
        return None
    if workspace.floor()[1] <= budget.token_limit:  # they fit: the strategies fell short, which is theirs to say
        return None
    structure = workspace.structure
    newest = next((p for p in reversed(structure.user_positions) if structure.pinned[p]), None)
    system = next((p for p, m in enumerate(workspace.messages) if structure.pinned[p] and m.role in SYSTEM_ROLES
                   and not workspace.is_own(p)), None)
    earlier = [(p, "an earlier summary") for p in range(len(workspace.messages)) if structure.pinned[p]
               and workspace.alive(p) and not workspace.is_own(p) and is_summary(workspace.messages[p])
               and not is_provider_record(workspace.messages[p])]  # (signed or encrypted: never cut)
    workspace.begin("clamp_pinned", 0)
    for position, what in ((newest, "the newest request"), *earlier, (system, "the first system message")):
        if position is None or budget.limit is None or not workspace.over_budget():  # no limit: never over
            continue
        message = workspace.messages[position]
        # Only what the pinned messages exceed: unpinned ones a short strategy list left are not theirs to pay for.
        excess = min(workspace.live_tokens, workspace.floor()[1]) - fit.pinned_aim(workspace)
        if excess <= 0:
            break
        room = max(PINNED_FLOOR_TOKENS, message.tokens - excess)
        content, changed = clamp_content(message.data.get("content"), room, workspace.counter)
        if changed:
            workspace.rewrite_pinned(position, {**message.data, "content": content},
                                     f"the pinned messages alone exceeded the budget: the middle of {what} was cut")
    return workspace.end("cut the middle of pinned messages that alone exceeded the budget")


def turn_boundary(workspace: Workspace, context: Context) -> StepOutcome | None:
    """The kept window opens with a user message, or with compact's record of what went before it.

    When compaction cut into a turn and left no summary or trace in front of the cut, the
    rest of that turn goes too, up to the next user message (a provider such as Anthropic
    refuses a conversation whose first message is the assistant's).
    """
    messages = workspace.messages
    structure = workspace.structure
    first = next((p for p, m in enumerate(messages) if structure.counted[p] and m.role not in SYSTEM_ROLES), None)
    if first is None or is_user_message(messages[first].data) or not any(e.action == "removed" for e in workspace.ledger):
        return None
    if any(workspace.is_own(p) or is_summary(messages[p]) for p in range(first)):
        return None
    following = [p for p in structure.user_positions if p > first]
    if not following:
        return None
    workspace.begin("turn_boundary", 0)
    for position in range(first, following[0]):
        if workspace.alive(position) and not workspace.pinned(position):
            workspace.remove([position], "the rest of a cut turn: the kept window opens with a user message")
    return workspace.end("removed the rest of a cut turn so the kept window opens with a user message")


def thinking_after_change(workspace: Workspace, context: Context) -> StepOutcome | None:
    return bound_thinking.thinking_after_change(workspace, checks_prefix=context.checks_prefix,
                                                graph_at=context.graph_at, earlier=context.earlier)


def give_back(workspace: Workspace, context: Context) -> StepOutcome | None:
    return fit.give_back(workspace)


STEPS = (
    ClosingStep("repair", "drop orphan calls and results the input had; write one-id tool_call_ids as tool_call_id",
                repair, opening=True),
    ClosingStep("clamp_pinned", "cut the middle of pinned messages that alone exceed a token budget", clamp_pinned,
                budget_only=True),
    ClosingStep("turn_boundary", "remove the rest of a cut turn so the kept window opens with a user message",
                turn_boundary),
    ClosingStep("thinking_after_change", "remove the thinking behind the run's first change (providers refuse it)",
                thinking_after_change),
    ClosingStep(GIVE_BACK, "put rewritten messages back as the input had them while they fit the budget", give_back,
                budget_only=True),
)
REGISTRY = {step.name: step for step in STEPS}
CLOSING_NAMES = tuple(step.name for step in STEPS if not step.opening)


def get(name: str) -> ClosingStep:
    return REGISTRY[name]


def check(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a closing-step list; a ConfigError for an unknown name (with the nearest known one),
    for ``repair`` (it opens the run, with --repair) and for a name given twice."""
    for name in names:
        if name in REGISTRY and REGISTRY[name].opening:
            raise ConfigError(f"{name} is not a closing step: it runs before the strategies",
                              fix="leave it out of closing_steps and give --repair")
        if name not in REGISTRY:
            near = difflib.get_close_matches(name, CLOSING_NAMES, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ConfigError(f"unknown closing step {name!r}", fix=f"{hint}known: {', '.join(CLOSING_NAMES)}")
    doubled = sorted({name for name in names if list(names).count(name) > 1})
    if doubled:
        raise ConfigError(f"closing step {doubled[0]} is listed twice", fix="name each step once")
    return tuple(names)


def in_force(names: Sequence[str], *, budget_mode: bool, user_first: bool) -> list[ClosingStep]:
    """The steps a run takes after its strategies, in order. ``user_first``: the provider refuses a
    conversation that opens with the assistant, so the turn boundary runs even where the list leaves
    it out (in its place in the registry's order)."""
    listed = list(names)
    if user_first and "turn_boundary" not in listed:
        order = {name: index for index, name in enumerate(CLOSING_NAMES)}
        later = [i for i, name in enumerate(listed) if order[name] > order["turn_boundary"]]
        listed.insert(later[0] if later else len(listed), "turn_boundary")
    return [REGISTRY[name] for name in listed if budget_mode or not REGISTRY[name].budget_only]


def run(step: ClosingStep, workspace: Workspace, context: Context, actions: list[Action]) -> None:
    """Take ``step``; what it did joins the report's actions."""
    outcome = step.apply(workspace, context)
    if outcome is not None and outcome.acted:
        actions.append(outcome.action(step.name, 0))
