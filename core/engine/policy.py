"""What a preset decides: every rule the presets differ by, in one frozen value.

The engine reads these rules from the run's policy (``workspace.policy``) and nowhere else: a
new preset is a new Policy, not a flag tested in the strategies.
"""

from __future__ import annotations

from dataclasses import dataclass

# The closing steps of the default preset, in the order they run (core/engine/closing.py).
DEFAULT_CLOSING = ("clamp_pinned", "turn_boundary", "thinking_after_change", "give_back")


@dataclass(frozen=True)
class Policy:
    """The rules of one preset.

    Under a token budget a run lands at or under ``aim_share`` of it, and above ``fill_share``
    of it when it can (only core/engine/fit.py reads the shares).
    """

    name: str
    aim_share: float = 0.98
    fill_share: float = 0.95
    # Pinned messages that alone exceed a token budget have their middles cut until the run lands
    # at this share of it (below the aim: a middle cut is counted in whole parts).
    pinned_share: float = 0.97
    # The task statement (the first request) stays pinned while it takes at most this share of
    # a token budget; None: no task pin.
    task_pin_share: float | None = 0.2
    # Summaries earlier runs wrote stay pinned.
    pin_summaries: bool = True
    # Strategies that remove messages leave a trace line saying what went.
    trace: bool = True
    # Budget-first refinements: a result cut rather than cleared when clearing overshoots, results
    # the agent did not use cleared first.
    fill_budget: bool = True
    # The most passes over the strategy list. The default goes on while a pass makes progress, so a
    # run never stops still shrinking (a rerun of its output would shrink it further); this bounds it.
    max_passes: int = 64
    # Strategies before a sliding_window leave alone what the window removes anyway.
    spare_what_must_go: bool = True
    # When a run is not triggered but a repair or the graph changed the conversation, the thinking
    # behind the change is checked (only what a provider would refuse goes).
    thinking_when_untriggered: bool = True
    # The closing steps after the strategies, by name, in order.
    closing_steps: tuple[str, ...] = DEFAULT_CLOSING
    # The summarizer a run uses when none is asked for (None: no summary).
    summarizer: str | None = "extractive"


DEFAULT = Policy("default")
# The seed's rules: no task pin, no trace of removals, four passes, no closing step (the turn
# boundary runs only where the provider needs it) and no summarizer unless one is asked for.
SEED = Policy("seed", task_pin_share=None, pin_summaries=False, trace=False, fill_budget=False, max_passes=4,
              spare_what_must_go=False, thinking_when_untriggered=False, closing_steps=(), summarizer=None)

POLICIES = {policy.name: policy for policy in (DEFAULT, SEED)}


def for_preset(name: str) -> Policy:
    """The policy of the preset called ``name`` (KeyError for an unknown one: the config checks names)."""
    return POLICIES[name]
