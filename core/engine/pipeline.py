"""One compaction run (SPEC §5): count, warn, compact to the budget, render the graph."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import strategies
from core.config import MemoryConfig
from core.counting.counter import MessageCounter
from core.counting.tokenizers import EncoderChoice
from core.engine import bound_thinking, fit
from core.engine.budget import UNLIMITED, Budget
from core.engine.clamp import clamp_content
from core.engine.seams import Seams
from core.engine.structure import PinRules, Structure, kept_lines
from core.engine.workspace import Workspace, unchanged_prefix
from core.errors import StoreUnavailable, StrategySkipped
from core.messages import (
    SYSTEM_ROLES,
    Message,
    has_text,
    is_provider_record,
    is_summary,
    is_user_message,
    starts_with_marker,
)
from core.report import (
    GIVE_BACK,
    BudgetReport,
    CompressionReport,
    EncoderReport,
    Floor,
    Usage,
)
from core.strategies.drop_old_thinking import THINKING_BLOCKS

BUDGET = "budget"
FULL = "full"
MODES = (BUDGET, FULL, UNLIMITED)

# A step after the strategies: acts on the workspace, appends its action to the report's list.
ClosingStep = Callable[[Workspace, list[dict[str, Any]]], None]
# Renders the working graph into the compacted messages; returns them and the graph summary.
GraphStep = Callable[[list[Message], MessageCounter], tuple[list[Message], dict[str, Any]]]


@dataclass
class CompactionResult:
    messages: list[Message]
    # One transcript's report; None for a dataset, whose summary is ``dataset_report``.
    compression: CompressionReport | None = None
    workspace: Workspace | None = field(default=None, repr=False)  # None when the run memo answered
    # How to write ``messages`` back in the input's (or the ``--to``) format; None: canonical JSONL.
    writer: Callable[[Sequence[Message]], Iterator[bytes | memoryview]] | None = field(default=None, repr=False)
    dataset_report: dict[str, Any] = field(default_factory=dict, repr=False)
    # `tool:` keep rules that pinned nothing, each with why (RunOptions.note_unpinned_tools: a batch input's).
    unpinned_rules: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def report(self) -> dict[str, Any]:
        """The report as JSON data: the CompressionReport's, or a dataset's summary."""
        return self.compression.to_dict() if self.compression is not None else self.dataset_report

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The output transcript's bytes, line by line."""
        if self.writer is not None:
            return self.writer(self.messages)
        from core.io.transcript import serialise

        return serialise(self.messages)

    @property
    def over_budget(self) -> bool:
        if self.compression is not None:
            return self.compression.over_budget
        return bool(self.dataset_report["over_budget"])  # a dataset counts its conversations over budget


def warning_text(marker: str, tokens: int, window: int) -> str:
    return (
        f"{marker} this conversation uses {tokens:,} of {window:,} tokens ({tokens / window:.0%} of the "
        "context window); older messages may be compacted."
    )


def compact(
    messages: Sequence[Message],
    config: MemoryConfig,
    counter: MessageCounter,
    *,
    encoder: EncoderChoice,
    mode: str = BUDGET,
    repair: bool = False,
    seams: Seams | None = None,
    graph_step: GraphStep | None = None,
    source: str = "<stdin>",
    skipped_lines: Sequence[dict[str, Any]] = (),
    turn_boundary: bool = False,
    recorded_model: str | None = None,
) -> CompactionResult:
    """Compact ``messages`` as ``config`` says; pure apart from the counter's cache.

    ``turn_boundary``: the provider needs the kept window to open with a user message (Anthropic,
    Claude Code); the default preset keeps that rule for every format. ``recorded_model``: the model
    the transcript says wrote its newest reply, when ``config`` names none.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    seams = seams or Seams()
    if mode == UNLIMITED:
        config = config.unlimited()
    counted = counter.count_messages(messages)
    workspace = _workspace(counted, config, counter, mode=mode, seams=seams, source=source)
    budget = workspace.budget
    before = Usage.of(workspace.live_messages, workspace.live_tokens, budget.window)
    orphans = _orphans(counted, workspace.structure)

    warning_appended = _maybe_warn(workspace, config, before.tokens, budget.window)
    actions: list[dict[str, Any]] = []
    if repair:
        _repair(workspace, actions)

    triggered = budget.over(workspace.live_messages, workspace.live_tokens)
    model = config.model or recorded_model  # (the model the output goes to: its thinking rules)
    graph_at = _graph_change_at(graph_step, workspace.messages, config, counter)
    skipped: dict[str, str] = {}
    errors: list[str] = []
    passes = 0
    if mode == FULL or triggered:
        passes = _run_strategies(workspace, config, seams, actions, skipped, errors)
        for step in _closing_steps(config, mode, turn_boundary, graph_at, model):
            _guarded(step, workspace, actions, errors)
    elif (actions or graph_at is not None) and config.policy.thinking_when_untriggered:  # a repair or the graph changed it
        # (nothing is compacted: only what would be refused goes, not the reasoning OpenAI drops itself)
        _guarded(_thinking_step(model, graph_at, earlier=bound_thinking.SIGNED_THINKING), workspace, actions, errors)

    floor_messages, floor_tokens = workspace.floor()
    result_messages = workspace.messages
    graph: dict[str, Any] | None = None
    if graph_step is not None:
        result_messages, graph = graph_step(list(result_messages), counter)

    report = CompressionReport(
        input=source,
        mode=mode,
        encoder=EncoderReport.of(encoder),
        before=before,
        after=Usage.of(workspace.live_messages, workspace.live_tokens, budget.window),
        budget=BudgetReport.of(budget, Floor(floor_messages, floor_tokens)),
        triggered=triggered,
        passes=passes,
        strategies=[str(s) for s in config.strategy_specs],
        actions=actions,
        skipped=[{"strategy": k, "reason": v} for k, v in skipped.items()],
        last_error=errors[-1] if errors else None,
        warning_appended=warning_appended,
        over_budget=budget.over(workspace.live_messages, workspace.live_tokens),
        removed=workspace.ledger,
        orphans=orphans,
        skipped_lines=list(skipped_lines),
        graph=graph,
        prompt_cache=prompt_cache(counted, result_messages),
    )
    return CompactionResult(messages=list(result_messages), compression=report, workspace=workspace)


def _orphans(counted: Sequence[Message], structure: Structure) -> dict[str, Any]:
    """The input's results without a call and calls without a result, by line."""
    return {
        "results": [counted[i].line for i in structure.orphan_results],
        "calls": [{"line": counted[i].line, "id": cid} for i, cid in structure.orphan_calls],
    }


def _workspace(counted: Sequence[Message], config: MemoryConfig, counter: MessageCounter, *, mode: str,
               seams: Seams, source: str) -> Workspace:
    """The working list of one run, with its budget and what it pins."""
    window, window_resolved = config.window()
    budget = Budget.resolve(
        max_messages=config.max_messages,
        max_tokens=config.max_tokens,
        max_fraction=config.max_fraction,
        window=window,
        window_resolved=window_resolved,
    )
    policy = config.policy
    pins = PinRules(
        kept=kept_lines(counted, config.keep_rules()),
        markers=(config.warning_marker, config.graph_marker),
        graph_marker=config.graph_marker,
        task_pin_tokens=_task_pin_tokens(budget, policy.task_pin_share),
        pin_summaries=policy.pin_summaries,
    )
    return Workspace(counted, budget=budget, counter=counter, pins=pins, full=mode == FULL,
                     offload_turns=config.offload_turns, seams=seams, source=source, policy=policy)


# A pinned message clamped to reach the budget keeps at least this many tokens.
PINNED_FLOOR_TOKENS = 64


def _task_pin_tokens(budget: Budget, share: float | None) -> int | None:
    if share is None:
        return None  # no task pin
    if budget.token_limit is not None:
        return int(budget.token_limit * share)
    return budget.window  # a message budget or none: the task statement is one message, pin it


def _closing_steps(config: MemoryConfig, mode: str, turn_boundary: bool, graph_at: int | None = None,
                   model: str | None = None) -> list[ClosingStep]:
    """What runs after the strategies: the last resort for pins over the budget, the turn boundary,
    and giving back what later steps made room for (the seed preset has only the boundary, and only
    where the provider needs it)."""
    named = config.policy.closing_steps
    steps: list[ClosingStep] = []
    if mode == BUDGET and "clamp_pinned" in named:
        steps.append(_clamp_pinned)
    if turn_boundary or "turn_boundary" in named:
        steps.append(_open_at_turn_boundary)
    if "thinking_after_change" in named:
        steps.append(_thinking_step(model, graph_at))  # (before give_back, which fills the room it frees)
    if mode == BUDGET and "give_back" in named:
        steps.append(_give_back)
    return steps


def _guarded(step: ClosingStep, workspace: Workspace,
             actions: list[dict[str, Any]], errors: list[str]) -> None:
    """A closing step that fails (a store refusing the write) is rolled back and recorded, like a strategy."""
    try:
        step(workspace, actions)
    except Exception as exc:  # noqa: BLE001  a failed closing step is recorded, never fatal
        if workspace.step_open:  # (failing before its begin(), it changed nothing: the last step stays)
            workspace.rollback()
        errors.append(f"{workspace.strategy}: {exc}")


def _clamp_pinned(workspace: Workspace, actions: list[dict[str, Any]]) -> None:
    """When pinned messages alone exceed a token budget, cut the middle of the newest request, then of
    the summaries earlier runs wrote (summarize folds one in only beside a span it replaces), then (as
    a last resort) of the first system message, keeping head and tail and marking the cut."""
    budget = workspace.budget
    if budget.token_limit is None or not workspace.over_budget():
        return
    if workspace.floor()[1] <= budget.token_limit:  # they fit: the strategies fell short, which is theirs to say
        return
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
        excess = min(workspace.live_tokens, workspace.floor()[1]) - int(budget.limit * 0.97)
        if excess <= 0:
            break
        room = max(PINNED_FLOOR_TOKENS, message.tokens - excess)
        content, changed = clamp_content(message.data.get("content"), room, workspace.counter)
        if changed:
            workspace.rewrite_pinned(position, {**message.data, "content": content},
                                     f"the pinned messages alone exceeded the budget: the middle of {what} was cut")
    outcome = workspace.end("cut the middle of pinned messages that alone exceeded the budget")
    if outcome.acted:
        actions.append(_action("clamp_pinned", 0, outcome))


def _open_at_turn_boundary(workspace: Workspace, actions: list[dict[str, Any]]) -> None:
    """The kept window opens with a user message, or with compact's record of what went before it.

    When compaction cut into a turn and left no summary or trace in front of the cut, the
    rest of that turn goes too, up to the next user message (a provider such as Anthropic
    refuses a conversation whose first message is the assistant's).
    """
    messages = workspace.messages
    structure = workspace.structure
    first = next((p for p, m in enumerate(messages) if structure.counted[p] and m.role not in SYSTEM_ROLES), None)
    if first is None or is_user_message(messages[first].data) or not any(e["action"] == "removed" for e in workspace.ledger):
        return
    if any(workspace.is_own(p) or is_summary(messages[p]) for p in range(first)):
        return
    following = [p for p in structure.user_positions if p > first]
    if not following:
        return
    workspace.begin("turn_boundary", 0)
    for position in range(first, following[0]):
        if workspace.alive(position) and not workspace.pinned(position):
            workspace.remove([position], "the rest of a cut turn: the kept window opens with a user message")
    outcome = workspace.end("removed the rest of a cut turn so the kept window opens with a user message")
    if outcome.acted:
        actions.append(_action("turn_boundary", 0, outcome))


def _thinking_step(model: str | None, graph_at: int | None, earlier: frozenset[str] = THINKING_BLOCKS) -> ClosingStep:
    checks = bound_thinking.model_checks_prefix(model)

    def step(workspace: Workspace, actions: list[dict[str, Any]]) -> None:
        outcome = bound_thinking.thinking_after_change(workspace, checks_prefix=checks, graph_at=graph_at,
                                                       earlier=earlier)
        if outcome is not None and outcome.acted:
            actions.append(_action("thinking_after_change", 0, outcome))

    return step


def _graph_change_at(graph_step: GraphStep | None, messages: list[Message], config: MemoryConfig,
                     counter: MessageCounter) -> int | None:
    """Where rendering the graph in will change ``messages`` (after the first system message):
    thinking after it is bound to a conversation that no longer exists either. None when the graph
    changes nothing, no message holds thinking, or the seed preset leaves thinking alone.
    """
    if graph_step is None or not config.policy.thinking_when_untriggered or not any(bound_thinking.has_thinking(m) for m in messages):
        return None
    rendered, _ = graph_step(list(messages), counter)
    prefix = unchanged_prefix(messages, rendered)
    return None if prefix == len(messages) == len(rendered) else prefix


def _give_back(workspace: Workspace, actions: list[dict[str, Any]]) -> None:
    outcome = fit.give_back(workspace)
    if outcome is not None and outcome.acted:
        actions.append(_action(GIVE_BACK, 0, outcome))


def prompt_cache(original: Sequence[Message], result: Sequence[Message]) -> dict[str, Any]:
    """How much of a provider's prompt cache survives: the unchanged prefix, and what comes after it.

    A provider caches a prompt by its prefix; the first message that differs
    from the original (removed, rewritten or inserted before it) ends the
    cached part, and every token from there on is written to the cache again.
    """
    prefix = unchanged_prefix(original, result)
    return {
        "prefix_messages": prefix,
        "prefix_tokens": sum(m.tokens for m in result[:prefix]),
        "first_changed_line": original[prefix].line if prefix < len(original) else None,
        "tokens_to_rewrite": sum(m.tokens for m in result[prefix:]),
    }


def _maybe_warn(workspace: Workspace, config: MemoryConfig, tokens: int, window: int) -> bool:
    if config.warn_fraction is None or tokens < config.warn_fraction * window:
        return False
    marker = config.warning_marker
    if any(starts_with_marker(m.data, marker) for m in workspace.messages):
        return False  # one-shot: an earlier run already warned
    data = {"role": "system", "content": warning_text(marker, tokens, window)}
    workspace.append(workspace.counter.count_message(Message(data=data)))
    return True


def _repair(workspace: Workspace, actions: list[dict[str, Any]]) -> None:
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
    outcome = workspace.end("dropped orphan calls and results the input already had; wrote one-id "
                            "tool_call_ids lists as tool_call_id")
    if outcome.acted:
        actions.append(_action("repair", 0, outcome))


def _run_strategies(
    workspace: Workspace,
    config: MemoryConfig,
    seams: Seams,
    actions: list[dict[str, Any]],
    skipped: dict[str, str],
    errors: list[str],
) -> int:
    full = workspace.full
    passes = 0
    for pass_number in range(1, config.policy.max_passes + 1):
        passes = pass_number
        progress = False
        for index, spec in enumerate(config.strategy_specs):
            info = strategies.get(spec.kind)
            missing = seams.reason_missing(info.needs)
            if missing is not None:
                skipped.setdefault(info.name, missing)
                continue
            if not full and not workspace.over_budget():
                break
            window_follows = any(strategies.get(later.kind).cuts_to_newest for later in config.strategy_specs[index + 1:])
            workspace.must_go_before = fit.must_go_before(workspace, window_follows)
            workspace.begin(info.name, pass_number)
            try:
                detail = info.run(workspace, spec.params)
                outcome = workspace.end(detail)
            except StoreUnavailable:  # the store itself broke: going on would be a silent failure
                workspace.rollback()
                raise
            except StrategySkipped as exc:  # acting would not have helped: why, but no error
                workspace.rollback()
                workspace.end()
                skipped.setdefault(info.name, str(exc))
                continue
            except Exception as exc:  # noqa: BLE001  a strategy error never fails the run (memory-plugin.txt, "Errors")
                workspace.rollback()
                errors.append(f"{info.name}: {exc}")
                actions.append({**_action(info.name, pass_number, workspace.end()), "error": str(exc)})
                continue
            if outcome.acted:
                progress = True
                actions.append(_action(info.name, pass_number, outcome))
                skipped.pop(info.name, None)  # skipped in an earlier pass, it acted in this one
        if full or not workspace.over_budget() or not progress:
            break
    return passes


def _action(strategy: str, pass_number: int, outcome: Any) -> dict[str, Any]:
    return {
        "strategy": strategy,
        "pass": pass_number,
        "messages_removed": outcome.removed,
        "messages_changed": outcome.rewritten,
        "messages_added": outcome.added,
        "messages_offloaded": outcome.offloaded,
        "tokens_saved": outcome.tokens_saved,
        "detail": outcome.detail,
        "error": None,
    }
