"""A dependency-free client for OpenAI-compatible chat-completions servers.

Works with llama.cpp's server, Ollama, vLLM and OpenAI: one POST of
``{"model", "messages", "temperature", "stream": false[, "max_tokens"]}`` to
``{base_url}/chat/completions``, and the text of ``choices[0].message.content``
back.

The API key is read from the environment variable *named* by
``api_key_env`` at request time. It is never stored on the client, never
logged, scrubbed from every error message and from the reply's decoded text,
and never sent anywhere but ``base_url``: redirects are not followed.
Each attempt is bounded as a whole (``timeout`` covers connecting, the
headers and the body, however slowly a server drips them) and a reply is
read up to ``MAX_REPLY_BYTES``. Each attempt runs in its own
function that *returns* what happened instead of raising, so the
``SummarizerError`` the caller sees is raised outside any ``except`` block:
it has no ``__context__``/``__cause__``, and no frame of its traceback holds
the request or its Authorization header.
"""

from __future__ import annotations

import email.utils
import http.client
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from core.errors import ConfigError, StrategyError

ENDPOINT = "/chat/completions"
MAX_WAIT = 30.0  # seconds: cap on Retry-After and on the backoff
BODY_CHARS = 200  # how much of a server's error body an error message quotes
MAX_REPLY_BYTES = 8 << 20  # a summary is a few KB; a bigger reply is a misbehaving server
_ERROR_BODY_BYTES = 64 << 10  # of an error reply only a snippet is quoted
_READ_CHUNK = 64 << 10
USER_AGENT = "compact-transcripts"

_RETRY_STATUSES = frozenset({408, 429})
_UNREACHABLE_FIX = "is the server running? check --summarizer-url"
_PROTOCOL_FIX = "is --summarizer-url an OpenAI-compatible server? its base URL usually ends in /v1"


class SummarizerError(StrategyError):
    """The summarizer server could not produce a summary; one readable line, never the key."""

    def __init__(
        self, what: str, *, fix: str | None = None, status: int | None = None, attempts: int = 1
    ) -> None:
        super().__init__(what, fix=fix)
        self.status = status  # the last HTTP status, None when no response came
        self.attempts = attempts


@dataclass(frozen=True)
class _Reply:
    """What one attempt produced: an HTTP response, or the reason there was none."""

    status: int = 0  # 0: no HTTP response
    body: bytes = b""
    retry_after: float | None = None
    failure: str | None = None  # "timeout", "connection refused", or another transport error
    too_large: bool = False  # the reply was over MAX_REPLY_BYTES (not retried: it would be again)
    location: str | None = None  # where a redirect pointed (not followed)

    @property
    def retryable(self) -> bool:
        if self.too_large:
            return False
        return self.failure is not None or self.status in _RETRY_STATUSES or self.status >= 500


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: following one would re-send the Authorization header to whatever host it names."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirects)


@dataclass(frozen=True)
class ChatClient:
    """POST chat completions to ``base_url`` and return the assistant's text."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    retries: int = 2
    backoff: float = 0.5
    max_tokens: int | None = None
    temperature: float = 0.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url:
            raise ConfigError(
                "no summarizer URL", fix="pass e.g. --summarizer-url http://127.0.0.1:8080/v1"
            )
        try:
            parts = urllib.parse.urlsplit(self.base_url)
            parts.port  # noqa: B018  (a port past 65535 or not a number is refused here, not after 3 retries)
        except ValueError as exc:
            raise ConfigError(f"summarizer URL {_redact_url(self.base_url)!r} is not a valid URL: {exc}",
                              fix="pass e.g. --summarizer-url http://127.0.0.1:8080/v1") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"summarizer URL {_redact_url(self.base_url)!r} is not an http(s) URL",
                fix="pass e.g. --summarizer-url http://127.0.0.1:8080/v1",
            )
        if not self.model:
            raise ConfigError(
                "the summarizer model name is empty", fix="name the model the server serves"
            )
        if self.timeout <= 0 or self.retries < 0 or self.backoff < 0:
            raise ConfigError(
                f"summarizer timeout {self.timeout}, retries {self.retries}, "
                f"backoff {self.backoff}",
                fix="the timeout must be positive, retries and backoff zero or more",
            )
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ConfigError(
                f"summarizer max_tokens {self.max_tokens}", fix="use a positive number"
            )
        # Checked here, before any work: sent, such a key fails every attempt with an error that
        # quotes the header (key and all), or smuggles a second header in.
        problem = _header_problem(os.environ.get(self.api_key_env, "").strip())
        if problem:
            raise ConfigError(f"${self.api_key_env} holds {problem}, which an HTTP header cannot carry",
                              fix=f"set {self.api_key_env} to the key alone, on one line")

    @property
    def endpoint(self) -> str:
        """The URL the client POSTs to."""
        parts = urllib.parse.urlsplit(self.base_url)
        path = parts.path.rstrip("/")
        if not path.endswith(ENDPOINT):
            path += ENDPOINT
        return urllib.parse.urlunsplit(parts._replace(path=path))

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The assistant text of ``choices[0].message.content``; raises SummarizerError."""
        return self.reply(messages)[0]

    def reply(self, messages: list[dict[str, str]]) -> tuple[str, str | None]:
        """The assistant text and the finish_reason ("length": the server cut it at max_tokens)."""
        payload = self._payload(messages)
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            reply = self._send(payload)
            if reply.retryable and attempt < attempts:
                self.sleep(self._wait(attempt, reply.retry_after))
                continue
            break
        return self._interpret(reply, attempt)

    # -- one attempt ---------------------------------------------------------

    def _payload(self, messages: list[dict[str, str]]) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "stream": False,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return orjson.dumps(body)

    def _headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        key = os.environ.get(self.api_key_env, "").strip()
        if key:  # local servers (llama.cpp, Ollama) need none
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _send(self, payload: bytes) -> _Reply:
        """One POST, bounded by ``timeout`` as a whole. Never raises: returns what happened.

        The attempt runs in a daemon thread so that a server dripping its
        headers a byte at a time cannot hold the run past the deadline; the
        thread itself stops reading the body at the deadline.
        """
        deadline = time.monotonic() + self.timeout
        outcome: list[_Reply] = []
        worker = threading.Thread(target=lambda: outcome.append(self._attempt(payload, deadline)),
                                  name="compact-summarizer", daemon=True)
        worker.start()
        worker.join(self.timeout)
        return outcome[0] if outcome else _Reply(failure="timeout")

    def _attempt(self, payload: bytes, deadline: float) -> _Reply:
        headers = self._headers()
        # Scrub the key from whatever comes back before any of it is cut into a message:
        # a server that echoes the request must not leak half a key past the redaction.
        key = headers.get("Authorization", "").removeprefix("Bearer ")
        request = urllib.request.Request(self.endpoint, data=payload, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                body, complete = _read_bounded(response, MAX_REPLY_BYTES, deadline)
                if complete is None:
                    return _Reply(failure="timeout")
                if not complete:
                    return _Reply(status=response.status, too_large=True)
                return _Reply(status=response.status, body=_scrub_bytes(body, key))
        except urllib.error.HTTPError as error:
            with error:
                body, _ = _read_bounded(error, _ERROR_BODY_BYTES, deadline) if error.fp else (b"", True)
                return _Reply(
                    status=error.code,
                    body=_scrub_bytes(body or b"", key),
                    retry_after=_retry_after(error.headers.get("Retry-After")),
                    location=_scrub(_redact_url(error.headers.get("Location") or ""), key) or None,
                )
        except urllib.error.URLError as error:
            return _Reply(failure=_describe(error.reason))
        except (OSError, http.client.HTTPException, ValueError) as error:
            return _Reply(failure=_describe(error))

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_WAIT)
        return min(self.backoff * 2 ** (attempt - 1), MAX_WAIT)

    # -- turning the last reply into text or an error -------------------------

    def _interpret(self, reply: _Reply, attempts: int) -> tuple[str, str | None]:
        if reply.too_large:
            raise self._error(
                f"{self._url()} sent a reply over {MAX_REPLY_BYTES >> 20} MiB; it was not read",
                fix="check the server: a summary is a few kilobytes", status=reply.status, attempts=attempts,
            )
        if reply.failure is not None:
            raise self._transport_error(reply.failure, attempts)
        if not 200 <= reply.status < 300:
            raise self._http_error(reply, attempts)
        data = _json(reply.body)
        if data is _NOT_JSON:
            raise self._error(
                f"{self._url()} answered HTTP {reply.status} with a body that is not JSON: "
                f"{_snippet(reply.body)}",
                fix=_PROTOCOL_FIX, status=reply.status, attempts=attempts,
            )
        content, finish = _content(data)
        if content is None:
            raise self._error(
                f"{self._url()} answered JSON without choices[0].message.content (a string): "
                f"{_snippet(reply.body)}",
                fix=_PROTOCOL_FIX, status=reply.status, attempts=attempts,
            )
        # Scrub what the text says, not only the bytes: a key the server reflects \u-escaped
        # is the raw key once decoded, and this text goes into the transcript and the store.
        content = _scrub(content, os.environ.get(self.api_key_env, "").strip())
        if not content.strip():
            raise self._error(
                f"{self._url()} returned an empty reply (finish_reason: {finish})",
                fix="raise max_tokens" if finish == "length" else "check the model and the prompt",
                status=reply.status, attempts=attempts,
            )
        return content, finish if isinstance(finish, str) else None

    def _transport_error(self, failure: str, attempts: int) -> SummarizerError:
        tries = _tries(attempts)
        if failure == "timeout":
            return self._error(
                f"no reply from {self._url()} within {self.timeout:g} s{tries}",
                fix="the server may be overloaded or the model slow; raise the timeout",
                attempts=attempts,
            )
        return self._error(
            f"cannot reach {self._url()}: {failure}{tries}", fix=_UNREACHABLE_FIX, attempts=attempts
        )

    def _http_error(self, reply: _Reply, attempts: int) -> SummarizerError:
        status, said = reply.status, _server_message(reply.body)
        url, tries = self._url(), _tries(attempts)
        if status in (401, 403):
            key_set = bool(os.environ.get(self.api_key_env, "").strip())
            fix = (
                f"check the key in ${self.api_key_env}"
                if key_set
                else f"${self.api_key_env} is not set; export the server's API key there"
            )
            what = f"{url} refused the request: HTTP {status}: {said}"
        elif 300 <= status < 400:
            where = f" to {reply.location}" if reply.location else ""
            what = f"{url} answered HTTP {status}, a redirect{where}, which compact does not follow"
            fix = "give the final URL as --summarizer-url (a redirect would carry the API key to another host)"
        elif status == 404:
            what = f"{url} answered HTTP 404 for model {self.model!r}: {said}"
            fix = "check the URL (the base usually ends in /v1) and the model name"
        elif status == 429:
            what = f"{url} is rate limiting: HTTP 429{tries}: {said}"
            fix = "wait and try again, or lower the request rate"
        elif status >= 500 or status == 408:
            what = f"{url} failed: HTTP {status}{tries}: {said}"
            fix = "check the server's log"
        else:
            what = f"{url} rejected the request: HTTP {status}: {said}"
            fix = "check the model name and the summarizer options"
        return self._error(what, fix=fix, status=status, attempts=attempts)

    def _error(
        self, what: str, *, fix: str, status: int | None = None, attempts: int = 1
    ) -> SummarizerError:
        """The one place errors are made: the key is scrubbed from every part."""
        key = os.environ.get(self.api_key_env, "").strip()
        return SummarizerError(
            _scrub(what, key), fix=_scrub(fix, key), status=status, attempts=attempts
        )

    def _url(self) -> str:
        return _redact_url(self.endpoint)


_NOT_JSON = object()


def _json(body: bytes) -> object:
    """The parsed body, or ``_NOT_JSON`` (returned, not raised: no exception context)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _content(data: object) -> tuple[str | None, object]:
    """``choices[0].message.content`` when it is a string, and the finish reason."""
    try:
        choice = data["choices"][0]  # type: ignore[index]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, None
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    return (content if isinstance(content, str) else None), finish


def _read_bounded(response: Any, limit: int, deadline: float) -> tuple[bytes, bool | None]:
    """The body up to ``limit`` bytes: (bytes, True) when whole, (bytes, False) when over the
    limit, (bytes, None) when the deadline passed first. Transport errors read as an empty body."""
    length = response.headers.get("Content-Length") if response.headers else None
    if length and length.strip().isdigit() and int(length) > limit:
        return b"", False
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if time.monotonic() > deadline:
                return b"".join(chunks), None
            chunk = response.read1(_READ_CHUNK)
            if not chunk:
                return b"".join(chunks), True
            size += len(chunk)
            if size > limit:
                return b"", False
            chunks.append(chunk)
    except (OSError, http.client.HTTPException, ValueError):
        return b"".join(chunks), True


def _describe(reason: object) -> str:
    if isinstance(reason, TimeoutError):
        return "timeout"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _server_message(body: bytes) -> str:
    """The server's own words: ``error.message`` or ``error`` when JSON, else the raw text."""
    data = _json(body)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return _snippet(error["message"])
    if isinstance(error, str):
        return _snippet(error)
    return _snippet(body)


def _decoded(body: bytes) -> bytes:
    """A JSON body re-serialised without escapes (so the key scrub sees the key), else as it is."""
    data = _json(body)
    if data is _NOT_JSON:
        return body
    try:
        return orjson.dumps(data)
    except TypeError:
        return body


def _snippet(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = _decoded(text).decode("utf-8", errors="replace")
    text = " ".join(text.split())
    if not text:
        return "(empty body)"
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1] + "…"


def _header_problem(key: str) -> str | None:
    """What in ``key`` cannot go in an Authorization header, or None; names the character, never the key."""
    for char in key:
        if char in "\r\n":
            return "a line break"
        if not char.isprintable():
            return f"an unprintable character (U+{ord(char):04X})"
        if ord(char) > 0xFF:
            return f"a character outside Latin-1 (U+{ord(char):04X})"
    return None


def _key_forms(key: str) -> list[str]:
    """The ways a message can quote the key: raw, percent-encoded, or escaped as in a str or bytes
    repr (http.client's "Invalid header value b'Bearer …\\n…'"); longest first, so none is cut short."""
    forms = {key, urllib.parse.quote(key, safe=""), repr(key)[1:-1],
             repr(key.encode("latin-1", "backslashreplace"))[2:-1]}
    return sorted(forms, key=len, reverse=True)


def _scrub_bytes(body: bytes, key: str) -> bytes:
    if not key:
        return body
    for form in _key_forms(key):
        body = body.replace(form.encode(), b"[redacted]")
    return body


def _scrub(text: str, key: str) -> str:
    """``text`` without the key in any form ``_key_forms`` knows (a JSON body is scrubbed once decoded)."""
    if not key:
        return text
    for form in _key_forms(key):
        text = text.replace(form, "[redacted]")
    return text


def _tries(attempts: int) -> str:
    return f" after {attempts} attempts" if attempts > 1 else ""


def _redact_url(url: str) -> str:
    """The URL without user:password@ and without a query string (either may hold a key)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # not even splittable (an unclosed IPv6 bracket): say only its scheme
        return url.split(":", 1)[0] + "://…"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


__all__ = ["ChatClient", "SummarizerError"]
