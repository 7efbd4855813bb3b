"""Thinking behind a change: the thinking blocks a compacted transcript can no longer send back.

A thinking block is bound to everything before it (Anthropic, "Preserved thinking"): on the
models that check (PREFIX_CHECKING_MODELS) a request sending one back after anything before it
changed fails with 400 "The block is bound to a different conversation", or has the block
dropped; leaving out one block invalidates every later one. Older models discard a finished
turn's thinking themselves, but continuing a tool-use loop with thinking on, they need the loop's.
So after a run changed the conversation, the default preset removes the thinking behind the
first change, and keeps a loop's only for a model that needs it.
"""

from __future__ import annotations

from core.engine.workspace import StepOutcome, Workspace
from core.messages import SYSTEM_ROLES, Message, has_text, tool_calls

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})  # Anthropic; Responses


def shed(workspace: Workspace, position: int, kinds: frozenset[str], reason: str) -> int:
    """Remove the ``kinds`` of thinking parts from the assistant message at ``position`` (the message
    whole when nothing else is left in it); the number of parts removed (0 when none, or refused)."""
    message = workspace.messages[position]
    content = message.data.get("content")
    if not isinstance(content, list) or message.role != "assistant":
        return 0  # (most messages: checked before anything costlier)
    kept = [part for part in content if not (isinstance(part, dict) and part.get("type") in kinds)]
    if len(kept) == len(content) or not workspace.alive(position):
        return 0
    data = {**message.data, "content": kept or None}  # (calls alone: no content, as the chat format has it)
    if not has_text(data) and not tool_calls(data) and not any(isinstance(p, dict) for p in kept):
        if not workspace.remove([position], reason):
            return 0
    else:
        workspace.rewrite(position, data, reason)
    return len(content) - len(kept)


# Claude models that check a thinking block's prefix (Anthropic, "Preserved thinking"): a block
# sent back after anything before it changed is refused (400) or dropped, the current turn's too.
PREFIX_CHECKING_MODELS = ("claude-fable-5-1", "claude-fable-5-2", "claude-mythos-5-1", "claude-mythos-5-2",
                          "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5")
# Anthropic's signed blocks; the current turn keeps OpenAI's reasoning (newer models drop it, without error).
SIGNED_THINKING = frozenset({"thinking", "redacted_thinking"})
BOUND_REASON = ("thinking after a change earlier in the conversation: it is bound to what came before it, "
                "so models with preserved thinking refuse it")


def model_checks_prefix(model: str | None) -> bool:
    """Whether ``model`` is one of PREFIX_CHECKING_MODELS, however named: ``claude-opus-5.5``,
    ``anthropic/claude-opus-5-5``, Bedrock's ``us.anthropic.claude-opus-5-5-…``."""
    if model is None:
        return False
    name = model.lower().rsplit("/", 1)[-1].replace(".", "-")
    return name[name.find("claude-"):].startswith(PREFIX_CHECKING_MODELS) if "claude-" in name else False


def has_thinking(message: Message) -> bool:
    """Whether ``message`` is an assistant message holding thinking (Anthropic blocks, Responses reasoning)."""
    content = message.data.get("content")
    return message.role == "assistant" and isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") in THINKING_BLOCKS for part in content)


def thinking_after_change(workspace: Workspace, *, checks_prefix: bool, graph_at: int | None = None,
                          earlier: frozenset[str] = THINKING_BLOCKS) -> StepOutcome | None:
    """Thinking the run left behind its first change goes: a thinking block is bound to everything
    before it, and once that changed, models with preserved thinking refuse the request (400,
    "bound to a different conversation") or drop the block. Older models discard a finished turn's
    thinking anyway, but one continuing a tool-use loop with thinking on needs the loop's: so when
    the transcript ends inside a loop (with a call or its result) its turn keeps its thinking, unless
    the model (``--model``, or the one the transcript records) is known to check. ``graph_at``: where
    rendering the graph in will change the conversation; ``earlier``: the kinds of thinking to remove
    from earlier turns. None when nothing changed."""
    first = workspace.first_change()
    if first is not None and workspace.rewritten_in_place(first):
        first += 1  # its own thinking comes first in it, before what changed (the rewrites leave thinking be)
    if graph_at is not None:  # (the graph goes right after the first system message, which no step moves)
        first = graph_at if first is None else min(first, graph_at)
    if first is None:
        return None
    messages = workspace.messages
    current = workspace.structure.current_turn_start or 0  # no user message: all is the current turn
    counted = workspace.structure.counted
    last = next((p for p in range(len(messages) - 1, -1, -1) if counted[p] and messages[p].role not in SYSTEM_ROLES),
                None)
    in_loop = last is not None and (messages[last].role in ("tool", "function") or bool(tool_calls(messages[last].data)))
    end = current if in_loop and not checks_prefix else len(messages)
    workspace.begin("thinking_after_change", 0)
    for position in range(first, end):
        if not workspace.pinned(position):
            shed(workspace, position, earlier if position < current else SIGNED_THINKING, BOUND_REASON)
    return workspace.end("removed the thinking behind the run's first change: models with preserved "
                         "thinking refuse it")
