"""One compaction run: count, warn, compact to the budget, render the graph."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.counting.counter import MessageCounter
from core.counting.tokenizers import EncoderChoice
from core.engine import bound_thinking, closing, fit
from core.engine.budget import UNLIMITED, Budget
from core.engine.policy import Policy
from core.engine.seams import Seams
from core.engine.settings import RunSettings
from core.engine.structure import PinRules, Structure, kept_lines
from core.engine.workspace import Workspace, unchanged_prefix
from core.errors import StoreUnavailable, StrategySkipped
from core.messages import Message, starts_with_marker
from core.report import Action, BudgetReport, CompressionReport, EncoderReport, Floor, Usage

BUDGET = "budget"
FULL = "full"
MODES = (BUDGET, FULL, UNLIMITED)

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
    settings: RunSettings,
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
    """Compact ``messages`` as ``settings`` says (``MemoryConfig.run_settings()``); pure apart from the
    counter's cache.

    ``turn_boundary``: the provider needs the kept window to open with a user message (Anthropic,
    Claude Code); the default preset keeps that rule for every format. ``recorded_model``: the model
    the transcript says wrote its newest reply, when ``settings`` names none.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    seams = seams or Seams()
    if mode == UNLIMITED:
        settings = settings.unlimited()
    counted = counter.count_messages(messages)
    workspace = _workspace(counted, settings, counter, mode=mode, seams=seams, source=source)
    budget = workspace.budget
    before = Usage.of(workspace.live_messages, workspace.live_tokens, budget.window)
    orphans = _orphans(counted, workspace.structure)

    warning_appended = _maybe_warn(workspace, settings, before.tokens, budget.window)
    actions: list[Action] = []
    if repair:
        closing.run(closing.get("repair"), workspace, closing.Context(), actions)

    triggered = budget.over(workspace.live_messages, workspace.live_tokens)
    model = settings.model or recorded_model  # (the model the output goes to: its thinking rules)
    graph_at = _graph_change_at(graph_step, workspace.messages, settings, counter)
    skipped: dict[str, str] = {}
    errors: list[str] = []
    passes = 0
    if mode == FULL or triggered:
        passes = _run_strategies(workspace, settings, seams, actions, skipped, errors)
        context = closing.Context(checks_prefix=bound_thinking.model_checks_prefix(model), graph_at=graph_at)
        for step in closing.in_force(settings.policy.closing_steps, budget_mode=mode == BUDGET, user_first=turn_boundary):
            _guarded(step, workspace, context, actions, errors)
    elif (actions or graph_at is not None) and _checks_thinking_untriggered(settings.policy):  # a repair or the graph changed it
        _unbound_thinking(workspace, model, graph_at, actions, errors)

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
        strategies=[step.label for step in settings.steps],
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


def _workspace(counted: Sequence[Message], settings: RunSettings, counter: MessageCounter, *, mode: str,
               seams: Seams, source: str) -> Workspace:
    """The working list of one run, with its budget and what it pins."""
    budget = Budget.resolve(
        max_messages=settings.max_messages,
        max_tokens=settings.max_tokens,
        max_fraction=settings.max_fraction,
        window=settings.window,
        window_resolved=settings.window_resolved,
    )
    policy = settings.policy
    pins = PinRules(
        kept=kept_lines(counted, settings.keep),
        markers=(settings.warning_marker, settings.graph_marker),
        graph_marker=settings.graph_marker,
        task_pin_tokens=_task_pin_tokens(budget, policy.task_pin_share),
        pin_summaries=policy.pin_summaries,
    )
    return Workspace(counted, budget=budget, counter=counter, pins=pins, full=mode == FULL,
                     offload_turns=settings.offload_turns, seams=seams, source=source, policy=policy)


def _task_pin_tokens(budget: Budget, share: float | None) -> int | None:
    if share is None:
        return None  # no task pin
    if budget.token_limit is not None:
        return int(budget.token_limit * share)
    return budget.window  # a message budget or none: the task statement is one message, pin it


def _checks_thinking_untriggered(policy: Policy) -> bool:
    """Whether a run that compacts nothing still removes the thinking a repair or the graph unbound."""
    return policy.thinking_when_untriggered and "thinking_after_change" in policy.closing_steps


def _unbound_thinking(workspace: Workspace, model: str | None, graph_at: int | None,
                      actions: list[Action], errors: list[str]) -> None:
    """A run that compacts nothing removes only the thinking a provider would refuse after a repair or
    the graph changed the conversation, not the reasoning OpenAI drops itself."""
    context = closing.Context(checks_prefix=bound_thinking.model_checks_prefix(model), graph_at=graph_at,
                              earlier=bound_thinking.SIGNED_THINKING)
    _guarded(closing.get("thinking_after_change"), workspace, context, actions, errors)


def _guarded(step: closing.ClosingStep, workspace: Workspace, context: closing.Context,
             actions: list[Action], errors: list[str]) -> None:
    """A closing step that fails (a store refusing the write) is rolled back and recorded, like a strategy."""
    try:
        closing.run(step, workspace, context, actions)
    except Exception as exc:  # noqa: BLE001  a failed closing step is recorded, never fatal
        if workspace.step_open:  # (failing before its begin(), it changed nothing: the last step stays)
            workspace.rollback()
        errors.append(f"{workspace.strategy}: {exc}")


def _checks_thinking(policy: Policy) -> bool:
    return "thinking_after_change" in policy.closing_steps


def _graph_change_at(graph_step: GraphStep | None, messages: list[Message], settings: RunSettings,
                     counter: MessageCounter) -> int | None:
    """Where rendering the graph in will change ``messages`` (after the first system message):
    thinking after it is bound to a conversation that no longer exists either. None when the graph
    changes nothing, no message holds thinking, or the seed preset leaves thinking alone.
    """
    if graph_step is None or not _checks_thinking(settings.policy) or not any(bound_thinking.has_thinking(m) for m in messages):
        return None
    rendered, _ = graph_step(list(messages), counter)
    prefix = unchanged_prefix(messages, rendered)
    return None if prefix == len(messages) == len(rendered) else prefix


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


def _maybe_warn(workspace: Workspace, settings: RunSettings, tokens: int, window: int) -> bool:
    if settings.warn_fraction is None or tokens < settings.warn_fraction * window:
        return False
    marker = settings.warning_marker
    if any(starts_with_marker(m.data, marker) for m in workspace.messages):
        return False  # one-shot: an earlier run already warned
    data = {"role": "system", "content": warning_text(marker, tokens, window)}
    workspace.append(workspace.counter.count_message(Message(data=data)))
    return True


def _run_strategies(
    workspace: Workspace,
    settings: RunSettings,
    seams: Seams,
    actions: list[Action],
    skipped: dict[str, str],
    errors: list[str],
) -> int:
    full = workspace.full
    passes = 0
    for pass_number in range(1, settings.policy.max_passes + 1):
        passes = pass_number
        progress = False
        for index, info in enumerate(settings.steps):
            missing = seams.reason_missing(info.needs)
            if missing is not None:
                skipped.setdefault(info.name, missing)
                continue
            if not full and not workspace.over_budget():
                break
            window_follows = any(later.cuts_to_newest for later in settings.steps[index + 1:])
            workspace.must_go_before = fit.must_go_before(workspace, window_follows)
            workspace.begin(info.name, pass_number)
            try:
                detail = info.run(workspace)
                outcome = workspace.end(detail)
            except StoreUnavailable:  # the store itself broke: going on would be a silent failure
                workspace.rollback()
                raise
            except StrategySkipped as exc:  # acting would not have helped: why, but no error
                workspace.rollback()
                workspace.end()
                skipped.setdefault(info.name, str(exc))
                continue
            except Exception as exc:  # noqa: BLE001  a strategy error never fails the run: the rest still compact
                workspace.rollback()
                errors.append(f"{info.name}: {exc}")
                actions.append(workspace.end().action(info.name, pass_number, error=str(exc)))
                continue
            if outcome.acted:
                progress = True
                actions.append(outcome.action(info.name, pass_number))
                skipped.pop(info.name, None)  # skipped in an earlier pass, it acted in this one
        if full or not workspace.over_budget() or not progress:
            break
    return passes
