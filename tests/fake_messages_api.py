"""A fake Anthropic Messages API on 127.0.0.1 that records every request and answers "OK." (streamed or not).

Enough for a real client (the Claude Code CLI) to run one turn against it:
``POST /v1/messages`` answers with a complete message, as server-sent events
when the request asks for ``stream``; ``POST /v1/messages/count_tokens``
answers a count; anything else is a 404. Requests are kept in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fake_api import Events, Recorder, recording_server

REPLY = "OK."


def _message(model: str) -> dict[str, Any]:
    return {"id": "msg_fake_0001", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": REPLY}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def _events(model: str) -> Events:
    start = _message(model)
    start["content"], start["stop_reason"] = [], None
    yield "message_start", {"type": "message_start", "message": start}
    yield "content_block_start", {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                  "delta": {"type": "text_delta", "text": REPLY}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": 2}}
    yield "message_stop", {"type": "message_stop"}


def _answer(path: str, body: dict[str, Any]) -> dict[str, Any] | Events | None:
    if path.endswith("/v1/messages/count_tokens"):
        return {"input_tokens": 100}
    if path.endswith("/v1/messages"):
        model = str(body.get("model", "claude"))
        return _events(model) if body.get("stream") else _message(model)
    return None


@contextmanager
def fake_messages_api() -> Iterator[tuple[str, Recorder]]:
    """(base URL, the recorder of requests) for the duration of the block."""
    with recording_server(_answer) as served:
        yield served
