"""``x-request-id`` end to end: the client's answer, and the upstream request the proxy makes."""

from __future__ import annotations

import pytest
import requests

from llmchat.testing import ChatResponder

from ...support.proxy import proxy_over

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("sent", "kept"), [("trace-42.a:b", True), ("bad id\twith spaces", False), ("", False)]
)
def test_a_relayed_request_carries_the_request_id_upstream(sent: str, kept: bool) -> None:
    with proxy_over(ChatResponder()) as (url, upstream):
        headers = {"x-request-id": sent} if sent else {}
        answer = requests.post(
            url + "/v1/chat/completions",
            json={"model": "m", "messages": MESSAGES},
            headers=headers,
            timeout=10,
        )
        answer.raise_for_status()
        request_id = answer.headers["x-request-id"]
        assert (request_id == sent) is kept
        assert upstream.requests[-1].headers["x-request-id"] == request_id


def test_a_translated_request_carries_the_request_id_upstream() -> None:
    with proxy_over(ChatResponder()) as (url, upstream):
        answer = requests.post(
            url + "/v1/messages",
            json={"model": "m", "max_tokens": 16, "messages": MESSAGES},
            headers={"x-request-id": "anthropic-7"},
            timeout=10,
        )
        answer.raise_for_status()
        assert answer.headers["x-request-id"] == "anthropic-7"
        assert upstream.requests[-1].headers["x-request-id"] == "anthropic-7"
        # Ollama's chat face goes the same way.
        ollama = requests.post(
            url + "/api/chat",
            json={"model": "m", "messages": MESSAGES, "stream": False},
            timeout=10,
        )
        ollama.raise_for_status()
        assert upstream.requests[-1].headers["x-request-id"] == ollama.headers["x-request-id"]


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_the_clients_trace_context_goes_upstream_when_well_formed(path: str) -> None:
    body = {"model": "m", "max_tokens": 16, "messages": MESSAGES}
    with proxy_over(ChatResponder()) as (url, upstream):
        sent = {"traceparent": TRACEPARENT, "tracestate": "vendor=abc"}
        requests.post(url + path, json=body, headers=sent, timeout=10).raise_for_status()
        headers = upstream.requests[-1].headers
        assert headers["traceparent"] == TRACEPARENT
        assert headers["tracestate"] == "vendor=abc"
        malformed = {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}  # all-zero id
        requests.post(url + path, json=body, headers=malformed, timeout=10).raise_for_status()
        assert "traceparent" not in upstream.requests[-1].headers
        requests.post(url + path, json=body, timeout=10).raise_for_status()
        assert "traceparent" not in upstream.requests[-1].headers
