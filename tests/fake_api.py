"""A recording HTTP server on 127.0.0.1, the ground the fake provider APIs of the real-client tests stand on.

Each fake gives an ``answer(path, body)``: a JSON document, server-sent
events (``(event name or None, data)`` pairs), or None for a 404. Every POST
is recorded in order, its path without the query string; a GET is a 404.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Events = Iterator[tuple[str | None, dict[str, Any]]]
Answer = Callable[[str, dict[str, Any]], dict[str, Any] | Events | None]


class Recorder:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def bodies(self, suffix: str) -> list[dict[str, Any]]:
        """The bodies of the requests whose path ends with ``suffix``, in order."""
        with self.lock:
            return [body for path, body in self.requests if path.endswith(suffix)]


def _handler(recorder: Recorder, answer: Answer) -> type[BaseHTTPRequestHandler]:
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
            with recorder.lock:
                recorder.requests.append((path, body))
            reply = answer(path, body)
            if reply is None:
                self.do_GET()
            elif isinstance(reply, dict):
                self._json(reply)
            else:
                self._stream(reply)

        def _json(self, document: dict[str, Any]) -> None:
            data = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: Events) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for name, data in events:
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def recording_server(answer: Answer) -> Iterator[tuple[str, Recorder]]:
    """(base URL, the recorder) for the duration of the block."""
    recorder = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder, answer))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
