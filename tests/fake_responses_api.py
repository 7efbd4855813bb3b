"""A fake OpenAI Responses API on 127.0.0.1 that records every request and answers "OK." as a stream.

Enough for a real client (the Codex CLI) to run one turn against it:
``POST .../responses`` answers with the server-sent events of one completed
response holding one assistant message (``response.created``,
``response.output_item.done``, ``response.completed`` with its usage);
anything else is a 404. Requests are kept in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fake_api import Events, Recorder, recording_server

REPLY = "OK."
USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}


def _events(model: str) -> Events:
    response = {"id": "resp_fake_0001", "object": "response", "model": model, "status": "in_progress", "output": []}
    item = {"type": "message", "id": "msg_fake_0001", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": REPLY, "annotations": []}]}
    yield "response.created", {"type": "response.created", "response": response}
    yield "response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}
    yield "response.completed", {"type": "response.completed",
                                 "response": {**response, "status": "completed", "output": [item], "usage": USAGE}}


def _answer(path: str, body: dict[str, Any]) -> Events | None:
    return _events(str(body.get("model", "gpt"))) if path.endswith("/responses") else None


@contextmanager
def fake_responses_api() -> Iterator[tuple[str, Recorder]]:
    """(base URL, the recorder of requests) for the duration of the block."""
    with recording_server(_answer) as served:
        yield served
