"""The proxy end to end, across its faces: keys, limits and ids, the OpenAI relay, hang-ups,
a fallback chain, no buffering and the command line, with real clients over a real WSGI server.

Each face's own end-to-end tests are test_proxy_ollama_client.py and
test_proxy_anthropic_client.py.

Every test runs the proxy under its own threaded WSGI server on loopback and
points the real client packages at it; the upstream is llmchat's scripted
loopback server, so faults (a cut-off body, an error status, a stall in
prefill) happen on real sockets.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.retry import Inference
from llmchat.testing import ChatResponder, Pause, Reply, ScriptedServer, WaitFor, Write

from ..support.chat_frames import chunk as _chunk
from ..support.proxy import UsageSink, running_proxy
from .support import (
    TEXT,
    WAIT,
    _frame,
    anthropic_client,
    last_chat_request,
    ollama_client,
)

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")


# -- keys, limits, ids ------------------------------------------------------------


def test_api_key_is_required_on_every_face(backend):
    with running_proxy(backend, api_key="s3cret") as url:
        with pytest.raises(anthropic.AuthenticationError):
            anthropic_client(url, key="wrong").messages.create(
                model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
        good = anthropic_client(url, key="s3cret").messages.create(
            model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
        with pytest.raises(ollama.ResponseError) as info:
            ollama_client(url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
        authed = ollama_client(url, headers={"Authorization": "Bearer s3cret"}).chat(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
        health = requests.get(url + "/health", timeout=WAIT)
        unknown = requests.get(url + "/api/secret-route", timeout=WAIT)
        relay = requests.post(url + "/v1/chat/completions", json={"messages": []}, timeout=WAIT)
    assert good.content[0].text == TEXT and authed.message.content == TEXT
    assert info.value.status_code == 401
    assert health.status_code == 200
    assert unknown.status_code == 401  # routes are not mapped for a caller without the key
    assert relay.status_code == 401 and "s3cret" not in relay.text


def test_body_limit_is_a_clear_413(backend, upstream_server):
    with running_proxy(backend, max_body_bytes=1000) as url:
        answer = requests.post(
            url + "/api/chat",
            json={"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]},
            timeout=WAIT,
        )
    assert answer.status_code == 413
    assert "1000 bytes" in answer.json()["error"]
    assert not [r for r in upstream_server.requests if r.method == "POST"]


def test_request_id_on_every_response(backend):
    with running_proxy(backend) as url:
        given = requests.get(url + "/health", headers={"x-request-id": "abc-123"}, timeout=WAIT)
        made = requests.get(url + "/nope", timeout=WAIT)
        streamed = requests.post(
            url + "/api/chat",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            timeout=WAIT,
        )
    assert given.headers["x-request-id"] == "abc-123"
    assert made.status_code == 404 and made.headers["x-request-id"].startswith("req_")
    assert streamed.headers["x-request-id"].startswith("req_")
    assert streamed.headers["Content-Type"] == "application/x-ndjson"


def test_unknown_route_and_wrong_method_are_face_shaped(backend):
    with running_proxy(backend) as url:
        missing = requests.post(url + "/api/pull", json={}, timeout=WAIT)
        wrong = requests.get(url + "/v1/messages", timeout=WAIT)
    assert missing.status_code == 404 and "error" in missing.json()
    assert wrong.status_code == 405
    assert wrong.json()["type"] == "error"  # the Anthropic envelope


# -- the OpenAI face: bytes relayed untouched -------------------------------------


def test_openai_face_relays_bytes_both_ways(upstream_server):
    events = [_chunk({"content": "Hé"}), _chunk({"content": " there"}), _chunk({}, "stop")]
    reply = Reply.sse(events)
    upstream_server.set_script([reply])
    expected = b"".join(step.data for step in reply.body_steps)
    client_body = (
        b'{"model": "x",  "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    )
    sink = UsageSink()
    with OpenAICommon(upstream_server.url, api_key="upstream-key") as b:
        with running_proxy(b, usage_log=sink) as url:
            answer = requests.post(
                url + "/v1/chat/completions",
                data=client_body,
                headers={"Content-Type": "application/json"},
                timeout=WAIT,
            )
    assert answer.content == expected
    assert answer.headers["Content-Type"] == "text/event-stream"
    record = upstream_server.requests[-1]
    assert record.body == client_body
    assert record.headers["Authorization"] == "Bearer upstream-key"
    [event] = sink.wait(1)
    assert event["face"] == "openai" and event["ok"] is True
    assert event["content_bytes"] == len("Hé there".encode())


def test_openai_models_relay(backend):
    with running_proxy(backend) as url:
        answer = requests.get(url + "/v1/models", timeout=WAIT)
    assert answer.status_code == 200
    assert [m["id"] for m in answer.json()["data"]] == ["loopback"]


# -- hang-ups ---------------------------------------------------------------------


def _post_and_hang_up(
    url: str,
    path: str,
    body: dict[str, Any],
    read_until: bytes | None,
    before_close: Any = None,
) -> None:
    """Send `body` over a raw socket, read until `read_until` (if given), call
    `before_close` (if given), then close."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        if read_until is not None:
            seen = b""
            while read_until not in seen:
                more = sock.recv(4096)
                assert more, f"proxy closed before {read_until!r}; got {seen!r}"
                seen += more
        if before_close is not None:
            before_close()


def test_hang_up_during_prefill_cancels_upstream(upstream_server):
    release = threading.Event()
    upstream_server.set_script(
        [Reply.sse([_chunk({"content": "late"})], before_headers=[WaitFor(release, 30)])]
    )
    sink = UsageSink()
    try:
        with OpenAICommon(upstream_server.url) as b, running_proxy(b, usage_log=sink) as url:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            _post_and_hang_up(
                url,
                "/api/chat",
                body,
                read_until=None,
                before_close=lambda: upstream_server.wait_for_requests(1, WAIT),
            )
            record = upstream_server.requests[0]
            assert record.disconnected.wait(WAIT), "the upstream never saw the proxy hang up"
            [event] = sink.wait(1)
    finally:
        release.set()
    assert record.headers_sent_at is None  # the upstream never got past prefill
    assert event["status"] == 499 and event["error_type"] == "client_abort"


@pytest.mark.parametrize("path", ["/api/chat", "/v1/messages"])
def test_hang_up_mid_stream_cancels_upstream(upstream_server, path):
    release = threading.Event()
    upstream_server.set_script(
        [
            Reply(
                200,
                {"Content-Type": "text/event-stream"},
                framing="chunked",
                steps=[
                    Write(_frame(_chunk({"content": "first "}))),
                    WaitFor(release, 30),  # held until the test ends
                    Write(_frame(_chunk({"content": "never"}))),
                    Write(_frame(_chunk({}, "stop"))),
                ],
            )
        ]
    )
    sink = UsageSink()
    body = {
        "model": "m",
        "max_tokens": 8,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    try:
        with OpenAICommon(upstream_server.url) as b, running_proxy(b, usage_log=sink) as url:
            _post_and_hang_up(url, path, body, read_until=b"first ")
            assert upstream_server.wait_for_requests(1, WAIT)
            record = upstream_server.requests[0]
            assert record.disconnected.wait(WAIT), "the upstream never saw the proxy hang up"
            [event] = sink.wait(1)
    finally:
        release.set()
    assert event["status"] == 499 and event["error_type"] == "client_abort"
    assert event["content_bytes"] == len(b"first ")


# -- a fallback chain upstream ----------------------------------------------------


def test_inference_chain_fails_over_before_content():
    broken = ScriptedServer([Reply.error(500, "down")]).start()
    good = ScriptedServer(ChatResponder(TEXT)).start()
    try:
        with OpenAICommon(broken.url) as first, OpenAICommon(good.url) as second:
            chain = Inference([first, second], max_retries=0, timeout=WAIT)
            with running_proxy(chain) as url:
                reply = ollama_client(url).chat(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
                parts = list(
                    ollama_client(url).chat(
                        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                    )
                )
    finally:
        broken.stop()
        good.stop()
    assert reply.message.content == TEXT
    assert "".join(p.message.content for p in parts) == TEXT


def test_pause_is_not_a_hang_up(upstream_server):
    """A slow prefill with the client still there completes normally."""
    upstream_server.set_script(
        [Reply.sse([_chunk({"content": "slow"}), _chunk({}, "stop")], before_headers=[Pause(0.2)])]
    )
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        reply = ollama_client(url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.message.content == "slow"


# -- reasoning, and Ollama's load request ---------------------------------------


# -- no buffering, and the command line ----------------------------------------------


@pytest.mark.parametrize(
    ("path", "marker"),
    [("/api/chat", b'"content":"first "'), ("/v1/messages", b'"text":"first "')],
)
def test_each_delta_reaches_the_client_while_the_upstream_still_generates(
    upstream_server, path, marker
):
    release = threading.Event()
    upstream_server.set_script(
        [
            Reply(
                200,
                {"Content-Type": "text/event-stream"},
                framing="chunked",
                steps=[
                    Write(_frame(_chunk({"content": "first "}))),
                    WaitFor(release, 30),  # the upstream holds here until the client saw it
                    Write(_frame(_chunk({"content": "second"}))),
                    Write(_frame(_chunk({}, "stop"))),
                    Write(b"data: [DONE]\n\n"),
                ],
            )
        ]
    )
    body = {
        "model": "m",
        "max_tokens": 8,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        host, port = url.removeprefix("http://").split(":")
        data = json.dumps(body).encode()
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Connection: close\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            seen = b""
            while marker not in seen:
                more = sock.recv(4096)
                assert more, f"the proxy ended before the first delta: {seen!r}"
                seen += more
            assert b"second" not in seen
            release.set()  # only now may the upstream go on
            while True:
                more = sock.recv(4096)
                if not more:
                    break
                seen += more
    assert b"second" in seen
    assert seen.index(marker) < seen.index(b"second")


def test_cli_proxy_serves_until_stopped(upstream_server):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
    command = [sys.executable, "-m", "llmchat", "proxy", "--upstream", upstream_server.url]
    process = subprocess.Popen(
        [*command, "--port", "0"], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        line = process.stderr.readline()
        assert "serving http://127.0.0.1:" in line, line
        url = line.split("serving ", 1)[1].split(" ", 1)[0]
        reply = ollama_client(url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.message.content == TEXT
    finally:
        process.terminate()
        process.wait(timeout=WAIT)
        process.stderr.close()


def test_chunked_request_body_is_read(backend, upstream_server):
    """The proxy's server de-chunks the body (a generator body is sent chunked by requests)."""

    def chunks():
        yield b'{"model": "m", "stream": false, '
        yield b'"messages": [{"role": "user", "content": "split body"}]}'

    with running_proxy(backend) as url:
        answer = requests.post(url + "/api/chat", data=chunks(), timeout=WAIT)
    assert answer.request.headers["Transfer-Encoding"] == "chunked"
    assert answer.status_code == 200
    assert answer.json()["message"]["content"] == TEXT
    assert last_chat_request(upstream_server)["messages"][0]["content"] == "split body"


def test_concurrent_streams_through_one_backend(upstream_server):
    """One backend (one connection pool) serves many clients at once, none mixed up."""
    upstream_server.set_script(ChatResponder(TEXT, chunk_size=3))
    sink = UsageSink()
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def one(i: int, url: str) -> None:
        try:
            parts = ollama_client(url).chat(
                model=f"m{i}", messages=[{"role": "user", "content": f"ask {i}"}], stream=True
            )
            results[i] = "".join(p.message.content for p in parts)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    with OpenAICommon(upstream_server.url) as b, running_proxy(b, usage_log=sink) as url:
        threads = [threading.Thread(target=one, args=(i, url)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        events = sink.wait(8)
    assert not errors, errors
    assert results == {i: TEXT for i in range(8)}
    assert sorted(e["model"] for e in events) == sorted(f"m{i}" for i in range(8))
    assert len({e["request_id"] for e in events}) == 8


def test_a_404_repeats_a_long_path_only_in_part(backend):
    # A 60 KiB path: the answer names the start of it, bounded, not the whole.
    path = "/nope/" + "a" * 60_000
    with running_proxy(backend) as url:
        missing = requests.get(url + path, timeout=WAIT)
    assert missing.status_code == 404
    error = missing.json()["error"]
    message = error["message"] if isinstance(error, dict) else error
    assert message.startswith("No route for GET /nope/aaa") and message.endswith("...")
    assert len(missing.content) < 1024


def test_deeply_nested_tool_arguments_from_a_client_are_a_400(backend):
    # Ollama history may carry arguments as JSON text: read with the same depth
    # rule as a body, so it is the client's 400, never a 500 from recursion.
    deep = "[" * 100_000 + "]" * 100_000
    call = {"function": {"name": "f", "arguments": '{"a": ' + deep + "}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "ok"},
    ]
    with running_proxy(backend) as url:
        answer = requests.post(
            url + "/api/chat",
            json={"model": "m", "messages": messages, "stream": False},
            timeout=WAIT,
        )
    assert answer.status_code == 400
    assert isinstance(answer.json()["error"], str)
