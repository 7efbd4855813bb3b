"""Which calls got past an error: a later call of the kind that failed went through.

An agent that meets an error calls again: the same tool on the same file, the same command, the
same lookup with other arguments. Once a later call of that kind went through, the error is
history (what the agent learned on the way), and the call that went through is the outcome the
next turns build on: a summary that kept the errors and dropped the success would have a model
take the work for undone and try again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from core.engine.file_calls import SHELL_TOOLS, classify, shell_command
from core.messages import call_arguments, call_name


def call_key(call: Mapping[str, Any]) -> tuple[str, str]:
    """What calling again means: the same command for a shell, the same file for a file tool,
    else the same tool."""
    name = call_name(call)
    if name in SHELL_TOOLS:
        return name, shell_command(call_arguments(call))
    found = classify(call)
    return name, found[1] if found is not None else ""


def got_past_an_error(calls: Iterable[tuple[Any, Mapping[str, Any], bool]]) -> set[Any]:
    """Of ``calls`` (a handle, the call, whether it failed), oldest first: the handles of the calls
    that went through where an earlier call of their kind had failed."""
    found: set[Any] = set()
    failing: set[tuple[str, str]] = set()  # the kinds of call that failed since they last went through
    for handle, call, failed in calls:
        key = call_key(call)
        if failed:
            failing.add(key)
        elif key in failing:
            failing.discard(key)
            found.add(handle)
    return found
