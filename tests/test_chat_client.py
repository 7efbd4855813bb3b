"""ChatClient against a real (scripted) chat-completions server on 127.0.0.1."""

from __future__ import annotations

import socket
import time
import traceback
import urllib.request
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from core.errors import ConfigError, StrategyError
from core.summarizers.chat_client import ChatClient, SummarizerError

if TYPE_CHECKING:  # imported by pytest_plugins, so pytest can rewrite its asserts
    from tests.chat_server import ChatServer

pytest_plugins = ["tests.chat_server"]

KEY = "sk-test-Zq7uKEYSHOULDNEVERLEAK-4711"
MESSAGES = [{"role": "system", "content": "Summarize."}, {"role": "user", "content": "a b c"}]


@pytest.fixture
def sleeps() -> list[float]:
    """The waits the client asked for (it never really sleeps in these tests)."""
    return []


@pytest.fixture
def client(
    chat_server: ChatServer, sleeps: list[float], monkeypatch: pytest.MonkeyPatch,
) -> ChatClient:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return ChatClient(chat_server.url, "test-model", timeout=5.0, sleep=sleeps.append)


@pytest.fixture
def dead_url() -> str:
    """A URL on a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def fails(client: ChatClient) -> SummarizerError:
    with pytest.raises(SummarizerError) as caught:
        client.complete(MESSAGES)
    return caught.value


# -- success -------------------------------------------------------------------


def test_normal_reply_and_the_request_it_sent(
    client: ChatClient, chat_server: ChatServer, sleeps: list[float],
) -> None:
    chat_server.reply("the summary")
    assert client.complete(MESSAGES) == "the summary"
    [(headers, body)] = chat_server.requests
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
    assert body == {
        "model": "test-model", "messages": MESSAGES, "temperature": 0.0, "stream": False
    }
    assert sleeps == []


def test_max_tokens_and_temperature_are_sent(chat_server: ChatServer) -> None:
    ChatClient(chat_server.url, "m", max_tokens=64, temperature=0.3).complete(MESSAGES)
    [(_, body)] = chat_server.requests
    assert (body["max_tokens"], body["temperature"]) == (64, 0.3)


def test_no_key_in_the_environment_sends_no_authorization(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LOCAL_KEY", raising=False)
    ChatClient(chat_server.url, "m", api_key_env="LOCAL_KEY").complete(MESSAGES)
    [(headers, _)] = chat_server.requests
    assert "authorization" not in headers


@pytest.mark.parametrize("suffix", ["", "/", "/chat/completions", "/chat/completions/"])
def test_base_url_or_full_endpoint(chat_server: ChatServer, suffix: str) -> None:
    chat_server.reply("ok")
    client = ChatClient(chat_server.url + suffix, "m")
    assert client.endpoint == chat_server.url + "/chat/completions"
    assert client.complete(MESSAGES) == "ok"


def test_default_answer_is_settable(chat_server: ChatServer) -> None:
    chat_server.default = lambda request: f"model was {request['model']}"
    assert ChatClient(chat_server.url, "qwen").complete(MESSAGES) == "model was qwen"


# -- retries -------------------------------------------------------------------


def test_500_then_200_is_retried(
    client: ChatClient, chat_server: ChatServer, sleeps: list[float],
) -> None:
    chat_server.fail(500)
    chat_server.reply("second time lucky")
    assert client.complete(MESSAGES) == "second time lucky"
    assert len(chat_server.requests) == 2
    assert sleeps == [0.5]


def test_500s_past_the_retries(
    client: ChatClient, chat_server: ChatServer, sleeps: list[float],
) -> None:
    for _ in range(4):
        chat_server.fail(503, body='{"error": {"message": "model is loading"}}')
    error = fails(client)
    assert len(chat_server.requests) == client.retries + 1 == error.attempts == 3
    assert sleeps == [0.5, 1.0]  # doubled each time
    assert error.status == 503
    assert str(error) == (
        f"{client.endpoint} failed: HTTP 503 after 3 attempts: model is loading"
        " (check the server's log)"
    )
    assert isinstance(error, StrategyError)


def test_timeout_is_retried_then_fails(chat_server: ChatServer, sleeps: list[float]) -> None:
    client = ChatClient(chat_server.url, "m", timeout=0.2, retries=1, sleep=sleeps.append)
    chat_server.delay(3, then="too late")
    chat_server.delay(3, then="too late")
    started = time.monotonic()
    error = fails(client)
    assert time.monotonic() - started < 2
    assert len(chat_server.requests) == 2 == error.attempts
    assert str(error).startswith(f"no reply from {client.endpoint} within 0.2 s after 2 attempts (")
    assert error.status is None


def test_timeout_then_a_reply(chat_server: ChatServer, sleeps: list[float]) -> None:
    client = ChatClient(chat_server.url, "m", timeout=0.2, retries=1, sleep=sleeps.append)
    chat_server.delay(3, then="too late")
    chat_server.reply("in time")
    assert client.complete(MESSAGES) == "in time"
    assert sleeps == [0.5]


@pytest.mark.parametrize(
    ("retry_after", "waited"), [("3", 3.0), ("0", 0.0), ("120", 30.0), ("soon", 0.5)]
)
def test_429_honours_retry_after(
    client: ChatClient,
    chat_server: ChatServer,
    sleeps: list[float],
    retry_after: str,
    waited: float,
) -> None:
    chat_server.fail(429, headers={"Retry-After": retry_after})
    chat_server.reply("ok")
    assert client.complete(MESSAGES) == "ok"
    assert sleeps == [waited]  # capped at 30 s; unreadable: the usual backoff


def test_429_past_the_retries(client: ChatClient, chat_server: ChatServer) -> None:
    for _ in range(3):
        chat_server.fail(429, body='{"error": "slow down"}')
    error = fails(client)
    assert str(error) == (
        f"{client.endpoint} is rate limiting: HTTP 429 after 3 attempts: slow down"
        " (wait and try again, or lower the request rate)"
    )


# -- replies that are not a completion -----------------------------------------


def test_malformed_json(client: ChatClient, chat_server: ChatServer) -> None:
    chat_server.raw(b"<html>{oops")
    error = fails(client)
    assert len(chat_server.requests) == 1
    assert "answered HTTP 200 with a body that is not JSON: <html>{oops (" in str(error)
    assert "/v1" in str(error)


@pytest.mark.parametrize("body", [
    {"object": "chat.completion"},
    {"choices": []},
    {"choices": [{"message": {"role": "assistant"}}]},
    {"choices": [{"message": {"content": None, "tool_calls": []}}]},
    {"choices": [{"message": {"content": [{"type": "text", "text": "x"}]}}]},
    ["not", "an", "object"],
])
def test_json_without_choices_content(
    client: ChatClient, chat_server: ChatServer, body: Any,
) -> None:
    chat_server.raw(orjson.dumps(body))
    error = fails(client)
    assert "answered JSON without choices[0].message.content (a string)" in str(error)
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize(
    ("finish", "fix"), [("stop", "check the model"), ("length", "raise max_tokens")]
)
def test_empty_reply(client: ChatClient, chat_server: ChatServer, finish: str, fix: str) -> None:
    choice = {"message": {"content": " \n"}, "finish_reason": finish}
    chat_server.raw(orjson.dumps({"choices": [choice]}))
    error = fails(client)
    assert f"returned an empty reply (finish_reason: {finish}) ({fix}" in str(error)


def test_server_error_body_is_quoted_briefly_on_one_line(
    client: ChatClient, chat_server: ChatServer,
) -> None:
    chat_server.fail(400, body="line one\nline two " + "x" * 5000)
    error = fails(client)
    assert "\n" not in str(error)
    assert "line one line two xxx" in str(error)
    assert len(str(error)) < 400


# -- 4xx: not retried ------------------------------------------------------------


def test_401_is_not_retried_and_names_the_variable(
    client: ChatClient, chat_server: ChatServer, sleeps: list[float],
) -> None:
    chat_server.fail(401, body='{"error": {"message": "Incorrect API key provided"}}')
    error = fails(client)
    assert len(chat_server.requests) == 1 and sleeps == []
    assert error.status == 401
    assert str(error) == (
        f"{client.endpoint} refused the request: HTTP 401: Incorrect API key provided"
        " (check the key in $OPENAI_API_KEY)"
    )
    assert KEY not in str(error)


def test_403_without_a_key_says_the_variable_is_unset(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    chat_server.fail(403)
    error = fails(ChatClient(chat_server.url, "m", api_key_env="MY_KEY"))
    assert "($MY_KEY is not set; export the server's API key there)" in str(error)


@pytest.mark.parametrize(("status", "fix"), [
    (404, "check the URL (the base usually ends in /v1) and the model name"),
    (400, "check the model name and the summarizer options"),
    (422, "check the model name and the summarizer options"),
])
def test_other_4xx_are_not_retried(
    client: ChatClient, chat_server: ChatServer, status: int, fix: str,
) -> None:
    chat_server.fail(status)
    error = fails(client)
    assert len(chat_server.requests) == 1
    assert f"HTTP {status}" in str(error) and str(error).endswith(f"({fix})")


def test_wrong_path_is_a_404_naming_the_model(chat_server: ChatServer) -> None:
    error = fails(ChatClient(chat_server.url.removesuffix("/v1") + "/api", "llama3"))
    assert "answered HTTP 404 for model 'llama3'" in str(error)


# -- the server is not there --------------------------------------------------------


def test_server_down(dead_url: str, sleeps: list[float]) -> None:
    error = fails(ChatClient(dead_url, "m", retries=0, sleep=sleeps.append))
    assert str(error) == (
        f"cannot reach {dead_url}/chat/completions: connection refused"
        " (is the server running? check --summarizer-url)"
    )
    assert sleeps == []


def test_server_down_is_retried(dead_url: str, sleeps: list[float]) -> None:
    error = fails(ChatClient(dead_url, "m", sleep=sleeps.append))
    assert "connection refused after 3 attempts (is the server running?" in str(error)
    assert sleeps == [0.5, 1.0]


@pytest.mark.parametrize("url", ["127.0.0.1:8080/v1", "ftp://host/v1", "http:///v1"])
def test_a_url_that_is_not_http_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="is not an http\\(s\\) URL"):
        ChatClient(url, "m")


@pytest.mark.parametrize("url", [None, ""])
def test_no_url_is_a_config_error(url: Any) -> None:
    with pytest.raises(ConfigError, match="no summarizer URL"):
        ChatClient(url, "m")


# -- the key never leaks -------------------------------------------------------------

SCENARIOS: dict[str, tuple[str, tuple[Any, ...], int]] = {  # ChatServer method, arguments, times
    "401 echoing the key": ("fail", (401, f'{{"error": {{"message": "bad key {KEY}"}}}}'), 1),
    "400 echoing the key": ("fail", (400, f"Authorization: Bearer {KEY}"), 1),
    "500s echoing the key": ("fail", (500, f"key={KEY}"), 3),
    "429s": ("fail", (429,), 3),
    "not JSON echoing the key": ("raw", (f"<{KEY}>".encode(),), 1),
    "no choices echoing the key": ("raw", (orjson.dumps({"echo": KEY}),), 1),
    "empty reply": ("reply", ("",), 1),
    "timeouts": ("delay", (3,), 3),
}


def assert_no_key(error: BaseException) -> None:
    assert error.__cause__ is None and error.__context__ is None  # no chain to carry headers
    texts = [str(error), repr(error), repr(error.args), "".join(traceback.format_exception(error))]
    texts += [repr(vars(error))]
    assert not [text for text in texts if KEY in text]
    # No frame of the traceback holds the request, its headers or the key read from the env.
    for frame, _ in traceback.walk_tb(error.__traceback__):
        for value in frame.f_locals.values():
            assert not isinstance(value, urllib.request.Request)
            assert KEY not in repr(getattr(value, "headers", ""))
            assert value not in (KEY, f"Bearer {KEY}")


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_key_never_appears(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch, scenario: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    method, arguments, times = SCENARIOS[scenario]
    for _ in range(times):
        getattr(chat_server, method)(*arguments)
    client = ChatClient(chat_server.url, "m", timeout=0.2, sleep=lambda _: None)
    assert KEY not in repr(client) and KEY not in str(client)
    assert "OPENAI_API_KEY" in repr(client) and "sleep" not in repr(client)
    error = fails(client)
    assert_no_key(error)
    assert chat_server.requests[0][0]["authorization"] == f"Bearer {KEY}"  # it was sent, though


def test_the_key_never_appears_when_the_server_is_down(
    dead_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = ChatClient(dead_url, "m", sleep=lambda _: None)
    assert_no_key(fails(client))
    assert KEY not in repr(client)


@pytest.mark.parametrize("credentials", ["query", "userinfo"])
def test_credentials_in_the_url_are_not_shown(dead_url: str, credentials: str) -> None:
    if credentials == "query":
        url = f"{dead_url}?api-key={KEY}"
    else:
        url = dead_url.replace("http://", f"http://user:{KEY}@")
    client = ChatClient(url, "m", retries=0)
    error = fails(client)
    assert KEY not in str(error)
    assert str(error).startswith(f"cannot reach {dead_url}/chat/completions: ")


def test_a_query_string_stays_after_the_endpoint() -> None:
    client = ChatClient("https://example.invalid/v1?api-version=2", "m")
    assert client.endpoint == "https://example.invalid/v1/chat/completions?api-version=2"
