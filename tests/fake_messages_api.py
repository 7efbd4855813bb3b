"""A fake Anthropic Messages API on 127.0.0.1 that records every request and answers "OK." (streamed or not).

Enough for a real client (the Claude Code CLI) to run one turn against it:
``POST /v1/messages`` answers with a complete message, as server-sent events
when the request asks for ``stream``; ``POST /v1/messages/count_tokens``
answers a count; anything else is a 404. Requests are kept in order.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "OK."


def _message(model: str) -> dict[str, Any]:
    return {"id": "msg_fake_0001", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": REPLY}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def _events(model: str) -> Iterator[tuple[str, dict[str, Any]]]:
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


class FakeMessagesAPI:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                with api.lock:
                    api.requests.append((path, body))
                if path.endswith("/v1/messages/count_tokens"):
                    self._json({"input_tokens": 100})
                elif path.endswith("/v1/messages"):
                    model = str(body.get("model", "claude"))
                    if body.get("stream"):
                        self._stream(model)
                    else:
                        self._json(_message(model))
                else:
                    self.do_GET()

            def _json(self, document: dict[str, Any]) -> None:
                data = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, model: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for name, data in _events(model):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler


@contextmanager
def fake_messages_api() -> Iterator[tuple[str, FakeMessagesAPI]]:
    """(base URL, the API) for the duration of the block."""
    api = FakeMessagesAPI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
