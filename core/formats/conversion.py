"""Writing compacted messages back: in the input's format, or rendered fresh in another (``--to``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from core.formats.base import Decoded, Losses
from core.formats.registry import get
from core.messages import Message


def write(decoded: Decoded, result: Sequence[Message]) -> Iterator[bytes]:
    """The output bytes: ``result`` written back in the input's format."""
    codec = get(decoded.format)
    return codec.serialise(codec.encode(decoded, result))


def convert(decoded: Decoded, result: Sequence[Message], target: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``result`` rendered fresh in ``target``'s format, and what that could not carry (for the report).

    Rendered once, up front: the report, which names the losses, is staged
    before the transcript is written.
    """
    losses = Losses()
    for what, dropped in get(decoded.format).unread(decoded):
        if dropped:
            losses.add(what, dropped)
    items = list(get(target).render(result, losses))
    return items, losses.as_list()
