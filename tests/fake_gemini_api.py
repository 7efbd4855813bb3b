"""A fake Gemini API (generativelanguage ``v1beta``) on 127.0.0.1 that records every request and answers "OK.".

Enough for a real client (the Gemini CLI, with ``GOOGLE_GEMINI_BASE_URL``
pointing here) to run one turn against it: ``POST
.../models/<model>:streamGenerateContent?alt=sse`` answers with one
server-sent event holding a complete candidate, ``:generateContent`` with the
same response as JSON (what Gemini CLI's own history compression asks for),
``:countTokens`` with a count; anything else is a 404. Requests are kept in
order, by path (the model and the method, without the query).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fake_api import Events, Recorder, recording_server

REPLY = "OK."
RESPONSE = {"candidates": [{"content": {"role": "model", "parts": [{"text": REPLY}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}}


def _answer(path: str, body: dict[str, Any]) -> dict[str, Any] | Events | None:
    if path.endswith(":streamGenerateContent"):
        return iter([(None, RESPONSE)])
    if path.endswith(":generateContent"):
        return RESPONSE
    if path.endswith(":countTokens"):
        return {"totalTokens": 100}
    return None


@contextmanager
def fake_gemini_api() -> Iterator[tuple[str, Recorder]]:
    """(base URL, the recorder of requests) for the duration of the block."""
    with recording_server(_answer) as served:
        yield served
