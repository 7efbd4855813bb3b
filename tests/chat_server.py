"""A scripted OpenAI-compatible chat-completions server for tests, and its fixture.

Hook it in with ``pytest_plugins = ["tests.chat_server"]`` (in tests/conftest.py
for the whole suite, or in one test module), then ask for ``chat_server``::

    def test_x(chat_server):
        chat_server.fail(500)                 # first request: HTTP 500
        chat_server.reply("a summary")        # second: a normal completion
        chat_server.delay(1.0, then="late")   # third: answers after 1 s
        chat_server.raw(b"not json")          # fourth: these bytes, HTTP 200
        chat_server.drip(b"...", 0.5)         # fifth: these bytes, one every 0.5 s
        chat_server.default = lambda request: "..."   # every later request
        ChatClient(chat_server.url, "m").complete([...])
        headers, body = chat_server.requests[0]       # header names lower-cased

The server is a real ``ThreadingHTTPServer`` on 127.0.0.1, port 0, serving in a
thread for the duration of one test. Teardown wakes any request still waiting
in a ``delay``, stops the server, joins every thread and closes every socket.
Anything the handler raises (other than a client hanging up) fails the test.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

ENDPOINT = "/v1/chat/completions"


def default_reply(request: dict[str, Any]) -> str:
    """The answer when nothing is queued: names how many messages it was sent."""
    return f"summary of {len(request.get('messages') or [])} messages"


@dataclass(frozen=True)
class Step:
    """One scripted response. ``text`` None and ``body`` None: use ``default``."""

    status: int = 200
    text: str | None = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0  # seconds between the bytes of the body (headers, then the body a byte at a time)
    length: bool = True  # send Content-Length (False: the body ends when the connection closes)


class ChatServer:
    """The scripted server behind the ``chat_server`` fixture."""

    def __init__(self) -> None:
        self.default: Callable[[dict[str, Any]], str] = default_reply
        self.requests: list[tuple[dict[str, str], Any]] = []
        self.errors: list[BaseException] = []
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.chat = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
            name="chat-server", daemon=True,
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The base URL, ending in /v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- the script ------------------------------------------------------------

    def reply(self, text: str) -> None:
        """Queue a normal completion whose content is ``text``."""
        self._queue(Step(text=text))

    def fail(
        self, status: int, body: str | None = None, *, headers: dict[str, str] | None = None
    ) -> None:
        """Queue an HTTP error; ``body`` defaults to an OpenAI-shaped error JSON."""
        if body is None:
            error = {"message": f"scripted failure {status}", "code": status}
            body = orjson.dumps({"error": error}).decode()
        self._queue(Step(status=status, body=body.encode(), headers=dict(headers or {})))

    def delay(self, seconds: float, then: str | None = None) -> None:
        """Queue a completion sent after ``seconds`` (``then`` None: the default's text)."""
        self._queue(Step(text=then, delay=seconds))

    def raw(self, body: bytes, status: int = 200, *, headers: dict[str, str] | None = None) -> None:
        """Queue exactly these bytes as the response body."""
        self._queue(Step(status=status, body=body, headers=dict(headers or {})))

    def drip(self, body: bytes, interval: float) -> None:
        """Queue a 200 whose body is sent one byte every ``interval`` seconds."""
        self._queue(Step(body=body, drip=interval))

    def unsized(self, body: bytes) -> None:
        """Queue a 200 with no Content-Length: the body runs until the connection closes."""
        self._queue(Step(body=body, length=False))

    @property
    def pending(self) -> int:
        """How many queued steps no request has used yet."""
        with self._lock:
            return len(self._steps)

    def _queue(self, step: Step) -> None:
        with self._lock:
            self._steps.append(step)

    # -- life cycle --------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delay
        self._server.shutdown()
        self._server.server_close()  # joins the handler threads, closes the socket
        self._thread.join()

    # -- called from the handler threads -------------------------------------------

    def _next(self, headers: dict[str, str], request: Any) -> Step:
        with self._lock:
            self.requests.append((headers, request))
            return self._steps.popleft() if self._steps else Step()

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False when the server is being stopped."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins every handler thread
    block_on_close = True
    chat: ChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError, BrokenPipeError)):
            return  # the client gave up (its timeout) before we answered
        if error is not None:
            self.chat.errors.append(error)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 5  # a client that connects and sends nothing cannot hold teardown
    server_version = "chat-server/1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            request = orjson.loads(raw)
        except orjson.JSONDecodeError:
            request = None
        if self.path != ENDPOINT:
            self._send(404, _error_json(f"no route for POST {self.path}"), {})
            return
        chat = self.server.chat
        headers = {name.lower(): value for name, value in self.headers.items()}
        step = chat._next(headers, request)
        if not chat._wait(step.delay):
            return  # stopping: the test is over, nobody is listening
        if step.body is not None:
            self._send(step.status, step.body, step.headers, drip=step.drip, length=step.length)
            return
        text = step.text if step.text is not None else chat.default(request or {})
        self._send(step.status, _completion(request or {}, text, len(chat.requests)), step.headers)

    def do_GET(self) -> None:
        self._send(404, _error_json("this server only answers POST /v1/chat/completions"), {})

    def _send(self, status: int, body: bytes, headers: dict[str, str], *, drip: float = 0.0,
              length: bool = True) -> None:
        self.send_response(status)
        if not any(name.lower() == "content-type" for name in headers):
            self.send_header("Content-Type", _content_type(body))
        for name, value in headers.items():
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.close_connection = True
        self.end_headers()
        if not drip:
            self.wfile.write(body)
            return
        self.wfile.flush()
        for index in range(len(body)):
            if not self.server.chat._wait(drip):
                return
            self.wfile.write(body[index : index + 1])
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output clean


def _completion(request: dict[str, Any], text: str, number: int) -> bytes:
    prompt = sum(len(str(m.get("content", "")).split()) for m in request.get("messages") or [])
    return orjson.dumps({
        "id": f"chatcmpl-test-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", ""),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt + len(text.split()),
        },
    })


def _error_json(message: str) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})


def _content_type(body: bytes) -> str:
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return "text/plain; charset=utf-8"
    return "application/json"


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A scripted chat-completions server on 127.0.0.1, alive for one test."""
    server = ChatServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.errors, f"the chat server's handler raised: {server.errors!r}"
