"""Placing the graph message in a transcript (OpenAI chat message dicts).

The graph message is a system message whose content is a string starting with
the marker. It sits right after the first system message, or at the top when
there is none; a later run replaces it where it is; it is removed when there
is no text (empty graph). Only the graph message is ever replaced, inserted
or removed: every other dict of the returned list is the *same object* as in
the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from core.errors import GraphError
from core.graph.render import DEFAULT_MARKER

Action = Literal["inserted", "replaced", "removed", "unchanged", "absent"]


@dataclass(frozen=True)
class GraphPlacement:
    """The new message list and what happened to the graph message.

    ``index`` is where the graph message now is (inserted, replaced,
    unchanged) or was (removed); None when absent.
    """

    messages: list[dict[str, Any]]
    action: Action
    index: int | None
    text: str | None


def is_graph_message(message: Any, marker: str = DEFAULT_MARKER) -> bool:
    return (
        isinstance(message, dict)
        and message.get("role") == "system"
        and isinstance(message.get("content"), str)
        and message["content"].startswith(marker)
    )


def apply_graph_message(
    messages: list[dict[str, Any]], text: str | None, *, marker: str = DEFAULT_MARKER
) -> GraphPlacement:
    """Insert, replace or remove the graph message; the input list is not modified.

    Extra graph messages (a transcript edited by hand) are removed, so at
    most one remains, at the place of the first.
    """
    if not marker:
        raise GraphError(
            "the graph message marker is empty", fix="use a marker such as 'CUCA graph memory:'"
        )
    if text is not None and not text.startswith(marker):
        raise GraphError(
            f"the graph message must start with the marker {marker!r}",
            fix="render it with render_graph_text using the same marker",
        )
    found = [index for index, message in enumerate(messages) if is_graph_message(message, marker)]
    if text is None:
        if not found:
            return GraphPlacement(list(messages), "absent", None, None)
        return GraphPlacement(_without(messages, found), "removed", found[0], None)
    if found:
        first = found[0]
        old = messages[first]
        if old["content"] == text and len(found) == 1:
            return GraphPlacement(list(messages), "unchanged", first, text)
        result = _without(messages, found[1:])
        result[first] = {**old, "content": text}
        return GraphPlacement(result, "replaced", first, text)
    index = next(
        (
            position + 1
            for position, message in enumerate(messages)
            if isinstance(message, dict) and message.get("role") == "system"
        ),
        0,
    )
    result = list(messages)
    result.insert(index, {"role": "system", "content": text})
    return GraphPlacement(result, "inserted", index, text)


def _without(messages: list[dict[str, Any]], indexes: list[int]) -> list[dict[str, Any]]:
    drop = set(indexes)
    return [message for position, message in enumerate(messages) if position not in drop]
