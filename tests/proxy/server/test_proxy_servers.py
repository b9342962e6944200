"""The proxy's behaviour under both of its servers: the embedded one and gunicorn.

Each test runs twice: on `make_server` in a thread, and under a real gunicorn
(``llmchat proxy --workers 2 --threads 4`` in a subprocess). The clients are
the real `ollama`, `anthropic` and `openai` packages and `requests`; the
upstream is the scripted loopback server, so prefill stalls and hang-ups
happen on real sockets.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3

from llmchat.testing import ChatResponder, Reply, ScriptedServer, WaitFor

from ...support.proxy_servers import SERVERS, WAIT, serve_proxy

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

TEXT = "Hello from the loopback server, twice as long as a chunk."
MESSAGES = [{"role": "user", "content": "say hi"}]

pytestmark = pytest.mark.parametrize("server", SERVERS)


@pytest.fixture
def upstream():
    server = ScriptedServer(ChatResponder(TEXT, chunk_size=5)).start()
    yield server
    server.stop()


def _posts(upstream: ScriptedServer) -> list[Any]:
    return [r for r in upstream.requests if r.method == "POST"]


def test_ollama_chat_streamed_and_blocking(server: str, upstream: ScriptedServer, tmp_path: Path):
    with serve_proxy(server, upstream.url, tmp_path) as proxy:
        with ollama.Client(host=proxy.url, timeout=WAIT) as client:
            parts = list(client.chat(model="qwen3", messages=MESSAGES, stream=True))
            whole = client.chat(model="qwen3", messages=MESSAGES)
        events = proxy.usage.wait(2, route="/api/chat")
    assert "".join(p.message.content for p in parts) == TEXT
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done_reason == "stop"
    assert whole.message.content == TEXT and whole.done
    assert sorted(e["stream"] for e in events) == [False, True]
    assert all(e["ok"] and e["status"] == 200 for e in events)
    assert all(e["content_bytes"] == len(TEXT.encode()) for e in events)


def test_anthropic_messages_streamed(server: str, upstream: ScriptedServer, tmp_path: Path):
    with serve_proxy(server, upstream.url, tmp_path) as proxy:
        with (
            anthropic.Anthropic(
                base_url=proxy.url, api_key="unused", max_retries=0, timeout=WAIT
            ) as client,
            client.messages.stream(model="claude-x", max_tokens=64, messages=MESSAGES) as s,
        ):
            texts = list(s.text_stream)
            message = s.get_final_message()
        [event] = proxy.usage.wait(1, route="/v1/messages")
    assert "".join(texts) == TEXT
    assert message.content[0].text == TEXT and message.stop_reason == "end_turn"
    assert event["face"] == "anthropic" and event["stream"] is True and event["ok"]
    assert _posts(upstream)[-1].json()["max_tokens"] == 64


def test_openai_relay_with_the_openai_client(server: str, upstream: ScriptedServer, tmp_path: Path):
    with serve_proxy(server, upstream.url, tmp_path) as proxy:
        with openai.OpenAI(
            base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=WAIT
        ) as client:
            streamed = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
            whole = client.chat.completions.create(model="m", messages=MESSAGES)
        events = proxy.usage.wait(2, route="/v1/chat/completions")
    assert text == TEXT
    assert whole.choices[0].message.content == TEXT
    assert sorted(e["stream"] for e in events) == [False, True]
    assert all(e["face"] == "openai" and e["ok"] for e in events), [
        (e["stream"], e["ok"], e["status"], e["error_type"], e["duration_ms"]) for e in events
    ]


def test_key_check_is_a_401_in_each_face(server: str, upstream: ScriptedServer, tmp_path: Path):
    with serve_proxy(server, upstream.url, tmp_path, api_key="s3cret") as proxy:
        url = proxy.url
        ollama_no = requests.post(url + "/api/chat", json={"messages": MESSAGES}, timeout=WAIT)
        anthropic_no = requests.post(
            url + "/v1/messages", headers={"x-api-key": "wrong"}, json={}, timeout=WAIT
        )
        openai_no = requests.post(url + "/v1/chat/completions", json={}, timeout=WAIT)
        health = requests.get(url + "/health", timeout=WAIT)
        with ollama.Client(
            host=url, timeout=WAIT, headers={"Authorization": "Bearer s3cret"}
        ) as client:
            authed = client.chat(model="m", messages=MESSAGES)
    assert [r.status_code for r in (ollama_no, anthropic_no, openai_no)] == [401] * 3
    assert isinstance(ollama_no.json()["error"], str)
    assert anthropic_no.json()["type"] == "error"
    assert anthropic_no.json()["error"]["type"] == "authentication_error"
    assert openai_no.json()["error"]["type"] == "authentication_error"
    assert all("s3cret" not in r.text for r in (ollama_no, anthropic_no, openai_no))
    assert health.status_code == 200 and authed.message.content == TEXT
    assert len(_posts(upstream)) == 1  # only the authorized request went upstream


def test_body_over_the_limit_is_a_413(server: str, upstream: ScriptedServer, tmp_path: Path):
    with serve_proxy(server, upstream.url, tmp_path, max_body_bytes=1000) as proxy:
        answer = requests.post(
            proxy.url + "/api/chat",
            json={"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]},
            timeout=WAIT,
        )
        [event] = proxy.usage.wait(1, route="/api/chat")
    assert answer.status_code == 413
    assert "1000 bytes" in answer.json()["error"]
    assert event["error_type"] == "too_large" and event["status"] == 413
    assert not _posts(upstream)


# -- a hang-up in prefill cancels the upstream --------------------------------------

_BODIES = {
    "/api/chat": {"model": "m", "messages": MESSAGES},  # Ollama streams by default
    "/v1/messages": {"model": "c", "max_tokens": 8, "messages": MESSAGES},
    "/v1/chat/completions": {"model": "m", "messages": MESSAGES},  # the relay, blocking
}


@pytest.mark.parametrize("path", sorted(_BODIES))
def test_hang_up_in_prefill_cancels_the_upstream(server: str, path: str, tmp_path: Path):
    release = threading.Event()
    prefill = Reply.sse(
        [{"choices": [{"index": 0, "delta": {"content": "late"}}]}],
        before_headers=[WaitFor(release, 30)],
    )
    upstream = ScriptedServer([prefill]).start()
    try:
        with serve_proxy(server, upstream.url, tmp_path) as proxy:
            host, port = proxy.url.removeprefix("http://").split(":")
            data = json.dumps(_BODIES[path]).encode()
            with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
                sock.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
                    f"\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                assert upstream.wait_for_requests(1, WAIT), "the proxy never asked the upstream"
            # The client is gone while the upstream is still in prefill.
            record = upstream.requests[0]
            assert record.disconnected.wait(WAIT), "the upstream never saw the proxy hang up"
            [event] = proxy.usage.wait(1, route=path)
    finally:
        release.set()
        upstream.stop()
    assert record.headers_sent_at is None  # cancelled before the upstream's headers
    assert event["status"] == 499 and event["error_type"] == "client_abort"


# -- keep-alive -----------------------------------------------------------------------


def test_one_connection_carries_many_requests(
    server: str,
    upstream: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    connects: list[int] = []
    connect = urllib3.connection.HTTPConnection.connect

    def counting(conn: urllib3.connection.HTTPConnection) -> None:
        connects.append(conn.port or 0)  # the proxy's own upstream calls count too: by port
        connect(conn)

    monkeypatch.setattr(urllib3.connection.HTTPConnection, "connect", counting)
    with serve_proxy(server, upstream.url, tmp_path) as proxy, requests.Session() as session:
        url = proxy.url
        port = int(url.rsplit(":", 1)[1])
        connects.clear()  # the fixture's own readiness check is not the session's
        answers = [session.get(url + "/health", timeout=WAIT)]
        with session.post(
            url + "/api/chat", json={"model": "m", "messages": MESSAGES}, stream=True, timeout=WAIT
        ) as streamed:
            lines = [json.loads(line) for line in streamed.iter_lines() if line]
        answers.append(streamed)
        answers.append(
            session.post(
                url + "/v1/messages",
                json={"model": "c", "max_tokens": 8, "messages": MESSAGES},
                timeout=WAIT,
            )
        )
        answers.append(session.get(url + "/api/tags", timeout=WAIT))
    assert [a.status_code for a in answers] == [200] * 4
    assert "".join(line["message"]["content"] for line in lines) == TEXT
    assert connects.count(port) == 1, f"{connects.count(port)} connections for 4 requests"
