"""What the proxy's error answers say about retrying, and the WARNING line of each refusal.

Through the real proxy server over a loopback upstream: every 4xx a retry
cannot mend carries ``x-should-retry: false`` (the header the OpenAI and
Anthropic SDKs, and so Claude Code, obey), an upstream's ``retry-after`` on a
429 or 503 reaches the client, and the proxy's own 4xx leave one WARNING line
that names the face and the field but not what the client sent.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import anthropic
import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy.retry_advice import clean_retry_after, describe_refusal
from llmchat.testing import ChatResponder, Reply, ScriptedServer

from ..support.proxy import running_proxy

KEY = "proxy-key-for-tests"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}

# One request per face, each of which the upstream answers when it is reached.
FACE_REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("anthropic", "/v1/messages", ANTHROPIC),
    ("openai", "/v1/chat/completions", CHAT),
    ("responses", "/v1/responses", {"model": "m", "input": "hi"}),
    ("ollama", "/api/chat", {**CHAT, "stream": False}),
]


@pytest.fixture
def upstream_url() -> Any:
    with ScriptedServer(ChatResponder("hello")) as url:
        yield url


@pytest.mark.parametrize(("face", "path", "body"), FACE_REQUESTS, ids=[f[0] for f in FACE_REQUESTS])
@pytest.mark.parametrize("sent", [None, "wrong-key"])
def test_a_missing_or_wrong_key_says_do_not_retry(
    upstream_url: str,
    monkeypatch: pytest.MonkeyPatch,
    face: str,
    path: str,
    body: dict[str, Any],
    sent: str | None,
) -> None:
    monkeypatch.setenv("LLMCHAT_PROXY_KEY", KEY)
    headers = {} if sent is None else {"x-api-key": sent, "Authorization": f"Bearer {sent}"}
    with running_proxy(OpenAICommon(upstream_url), api_key=KEY) as proxy:
        answer = requests.post(proxy + path, json=body, headers=headers, timeout=10)
        good = requests.post(proxy + path, json=body, headers={"x-api-key": KEY}, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["x-should-retry"] == "false"
    assert good.status_code == 200, good.text
    assert "x-should-retry" not in good.headers


def test_the_anthropic_sdk_gives_up_on_a_wrong_key_at_once(upstream_url: str) -> None:
    sdk_requests = []
    with running_proxy(OpenAICommon(upstream_url), api_key=KEY) as proxy:
        client = anthropic.Anthropic(
            base_url=proxy,
            api_key="wrong",
            max_retries=5,
            http_client=None,
        )
        client._client.event_hooks["request"].append(sdk_requests.append)
        with pytest.raises(anthropic.AuthenticationError) as raised:
            client.messages.create(**ANTHROPIC)
    assert raised.value.status_code == 401
    assert len(sdk_requests) == 1  # no retry at all


def test_a_refusal_logs_the_face_status_and_field_but_not_the_content(
    upstream_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret_text = "SECRET-PROMPT-TEXT"
    body = {"model": "m", "input": secret_text, "previous_response_id": f"resp_{secret_text}"}
    with running_proxy(OpenAICommon(upstream_url)) as proxy:
        with caplog.at_level(logging.WARNING, logger="llmchat.proxy"):
            answer = requests.post(proxy + "/v1/responses", json=body, timeout=10)
    assert answer.status_code == 400
    assert answer.headers["x-should-retry"] == "false"
    lines = [r.getMessage() for r in caplog.records if "refused a request" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("openai face refused a request (HTTP 400): previous_response_id")
    assert secret_text not in caplog.text


def test_unknown_routes_and_oversized_bodies_say_do_not_retry(
    upstream_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with running_proxy(OpenAICommon(upstream_url), max_body_bytes=100) as proxy:
        with caplog.at_level(logging.WARNING, logger="llmchat.proxy"):
            missing = requests.post(proxy + "/v1/nothing-here", json=CHAT, timeout=10)
            large = requests.post(proxy + "/v1/messages", data=b"x" * 500, timeout=10)
    assert (missing.status_code, missing.headers["x-should-retry"]) == (404, "false")
    assert (large.status_code, large.headers["x-should-retry"]) == (413, "false")
    assert large.json()["type"] == "error"  # Anthropic's shape for its path
    warned = [r.getMessage() for r in caplog.records if "refused a request" in r.getMessage()]
    assert [w.split(" face ")[0] for w in warned] == ["openai", "anthropic"]


def test_a_broken_request_head_says_do_not_retry(upstream_url: str) -> None:
    with running_proxy(OpenAICommon(upstream_url)) as proxy:
        host, port = proxy.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    assert head.startswith("http/1.1 400")
    assert "\r\nx-should-retry: false" in head


@pytest.mark.parametrize(("face", "path", "body"), FACE_REQUESTS, ids=[f[0] for f in FACE_REQUESTS])
@pytest.mark.parametrize("status", [429, 503])
def test_an_upstream_retry_after_reaches_the_client(
    face: str, path: str, body: dict[str, Any], status: int
) -> None:
    reply = Reply.error(status, "slow down", headers={"Retry-After": "17"})
    with ScriptedServer(reply) as url, running_proxy(OpenAICommon(url)) as proxy:
        answer = requests.post(proxy + path, json=body, timeout=10)
    assert answer.status_code == status
    assert answer.headers["retry-after"] == "17"
    assert "x-should-retry" not in answer.headers  # the client's own back-off decides


def test_a_retry_after_that_is_neither_seconds_nor_a_date_is_not_passed_on() -> None:
    reply = Reply.error(429, "slow down", headers={"Retry-After": "17, evil=1"})
    with ScriptedServer(reply) as url, running_proxy(OpenAICommon(url)) as proxy:
        answer = requests.post(proxy + "/v1/messages", json=ANTHROPIC, timeout=10)
    assert answer.status_code == 429
    assert "retry-after" not in answer.headers


@pytest.mark.parametrize("status", [401, 403])
def test_an_upstream_refusing_the_proxys_own_key_is_a_502_without_retry(status: int) -> None:
    with (
        ScriptedServer(Reply.error(status, "bad key")) as url,
        running_proxy(OpenAICommon(url)) as proxy,
    ):
        answer = requests.post(proxy + "/v1/messages", json=ANTHROPIC, timeout=10)
        relayed = requests.post(proxy + "/v1/chat/completions", json=CHAT, timeout=10)
    for each in (answer, relayed):
        assert each.status_code == 502
        assert each.headers["x-should-retry"] == "false"


def test_an_upstream_server_error_keeps_the_clients_own_retry_rules() -> None:
    with (
        ScriptedServer(Reply.error(500, "boom")) as url,
        running_proxy(OpenAICommon(url)) as proxy,
    ):
        answer = requests.post(proxy + "/v1/messages", json=ANTHROPIC, timeout=10)
    assert answer.status_code == 502
    assert "x-should-retry" not in answer.headers


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("17", "17"),
        (" 5 ", "5"),
        ("Wed, 21 Oct 2026 07:28:00 GMT", "Wed, 21 Oct 2026 07:28:00 GMT"),
        ("-1", None),
        ("1.5", None),
        ("soon", None),
        ("17\r\nSet-Cookie: a=b", None),
        (None, None),
    ],
)
def test_clean_retry_after(value: str | None, kept: str | None) -> None:
    assert clean_retry_after(value) == kept


@pytest.mark.parametrize(
    ("message", "logged"),
    [
        (
            "messages[1].role: must be 'user' or 'assistant', not 'system'",
            "messages[1].role: must be '…' or '…', not '…'",
        ),
        ("The request body is not valid JSON", "The request body is not valid JSON"),
        ('model: unknown model "my secret"', "model: unknown model '…'"),
    ],
)
def test_describe_refusal_masks_every_quoted_value(message: str, logged: str) -> None:
    assert describe_refusal(message) == logged


def test_claude_codes_start_up_check_is_a_quiet_200_even_with_a_key(
    upstream_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with running_proxy(OpenAICommon(upstream_url), api_key=KEY) as proxy:
        with caplog.at_level(logging.WARNING, logger="llmchat.proxy"):
            head = requests.head(proxy + "/api/hello", timeout=10)
            get = requests.get(proxy + "/api/hello", timeout=10)
            guarded = requests.get(proxy + "/api/tags", timeout=10)
    assert (head.status_code, get.status_code, get.content) == (200, 200, b"")
    assert guarded.status_code == 401  # the key check still guards everything else
    assert [r.getMessage() for r in caplog.records].count(
        "ollama face refused a request (HTTP 401): Missing or wrong API key"
    ) == 1
