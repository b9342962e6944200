"""Every proxy face over an upstream that compresses, and the relay within its limits.

The proxy runs under its real WSGI server; the upstream is the loopback server
answering gzip whatever the request asked for.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy.faces.openai.relay_end import error_frame
from llmchat.testing import (
    ChatResponder,
    RecordedRequest,
    Reply,
    ScriptedServer,
    Stall,
    Step,
    Write,
)

from ..support.proxy import UsageSink, running_proxy

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")

TEXT = "Gzipped hello from the loopback server."
WAIT = 10.0
MESSAGES = [{"role": "user", "content": "say hi"}]


def gzipping(request: RecordedRequest) -> Reply:
    return dataclasses.replace(ChatResponder(TEXT)(request), content_encoding="gzip")


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(gzipping)
    with server:
        yield server


@pytest.fixture
def backend(upstream: ScriptedServer) -> Iterator[OpenAICommon]:
    with OpenAICommon(upstream.url) as b:
        yield b


def test_the_upstream_really_compresses(upstream: ScriptedServer) -> None:
    answer = requests.post(
        upstream.url + "/chat/completions", json={"messages": MESSAGES}, timeout=WAIT
    )
    assert answer.headers["Content-Encoding"] == "gzip" and answer.json()["choices"]


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_chat_over_gzip(backend: OpenAICommon, stream: bool) -> None:
    with running_proxy(backend) as url, ollama.Client(host=url, timeout=WAIT) as client:
        if stream:
            parts = list(client.chat(model="m", messages=MESSAGES, stream=True))
            assert "".join(p.message.content for p in parts) == TEXT and parts[-1].done
        else:
            reply = client.chat(model="m", messages=MESSAGES)
            assert reply.message.content == TEXT and reply.done_reason == "stop"


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_messages_over_gzip(backend: OpenAICommon, stream: bool) -> None:
    with (
        running_proxy(backend) as url,
        anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=WAIT) as client,
    ):
        if stream:
            with client.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as s:
                text = "".join(s.text_stream)
                message = s.get_final_message()
            assert text == TEXT
        else:
            message = client.messages.create(model="m", max_tokens=64, messages=MESSAGES)
        assert message.content[0].text == TEXT and message.stop_reason == "end_turn"


@pytest.mark.parametrize("stream", [True, False])
def test_openai_relay_over_gzip_forwards_plain_bytes(
    backend: OpenAICommon, upstream: ScriptedServer, stream: bool
) -> None:
    sink = UsageSink()
    body = json.dumps({"model": "m", "stream": stream, "messages": MESSAGES}).encode()
    with running_proxy(backend, usage_log=sink) as url:
        answer = requests.post(
            url + "/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json", "Accept-Encoding": "gzip"},
            timeout=WAIT,
            stream=True,
        )
        wire = answer.raw.read(decode_content=False)
    assert "Content-Encoding" not in answer.headers
    assert upstream.requests[-1].headers.get("Accept-Encoding", "").find("gzip") >= 0
    length = answer.headers.get("Content-Length")
    assert length is None or int(length) == len(wire)
    if stream:
        assert answer.headers["Content-Type"] == "text/event-stream"
        texts = []
        for line in wire.decode().splitlines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    texts.append(choice["delta"].get("content") or "")
        assert "".join(texts) == TEXT and wire.rstrip().endswith(b"data: [DONE]")
    else:
        assert json.loads(wire)["choices"][0]["message"]["content"] == TEXT
    [event] = sink.wait(1)
    assert event["ok"] is True and event["content_bytes"] == len(TEXT.encode())


def _relay(url: str, stream: bool = True) -> tuple[bytes, bool]:
    """What a relayed answer's body held before it ended, and whether it ended cut."""
    body = json.dumps({"model": "m", "stream": stream, "messages": MESSAGES}).encode()
    answer = requests.post(
        url + "/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
        timeout=WAIT,
        stream=True,
    )
    pieces: list[bytes] = []
    try:
        pieces.extend(answer.raw.stream(4096, decode_content=False))
    except Exception:  # the relay ends the body short: how a client sees the limit
        return b"".join(pieces), True
    return b"".join(pieces), False


def _frame(text: str) -> bytes:
    event = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def test_the_relay_stops_at_max_response_bytes(upstream: ScriptedServer) -> None:
    steps: list[Step] = [Write(_frame("x" * 200)) for _ in range(40)]
    steps.append(Stall())
    upstream.set_script(
        Reply(200, {"Content-Type": "text/event-stream"}, steps=steps, content_encoding="gzip")
    )
    sink = UsageSink()
    with OpenAICommon(upstream.url, max_response_bytes=3000) as b:
        with running_proxy(b, usage_log=sink) as url:
            data, cut = _relay(url)
            [event] = sink.wait(1)
    assert cut and data.endswith(error_frame("response"))
    assert len(data) - len(error_frame("response")) <= 3000
    assert event["ok"] is False and event["error_type"] == "response"
    assert upstream.requests[-1].disconnected.wait(WAIT)


def test_the_relay_stops_at_max_event_bytes(upstream: ScriptedServer) -> None:
    steps: list[Step] = [Write(_frame("ok")), Write(b"data: " + b"z" * 50_000), Stall()]
    # Chunked, as a stream is: a Content-Length body read to its end would leave
    # the upstream connection at a clean boundary, pooled, with nothing to hang up.
    reply = Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)
    upstream.set_script(reply)
    sink = UsageSink()
    with OpenAICommon(upstream.url, max_event_bytes=10_000) as b:
        with running_proxy(b, usage_log=sink) as url:
            data, cut = _relay(url)
            [event] = sink.wait(1)
    assert b"z" * 10_000 not in data and cut
    assert data == _frame("ok") + error_frame("response")
    assert event["ok"] is False and event["error_type"] == "response"
    assert upstream.requests[-1].disconnected.wait(WAIT)
