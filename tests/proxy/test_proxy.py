"""The proxy end to end: real `ollama` and `anthropic` clients over a real WSGI server.

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
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.retry import Inference
from llmchat.testing import ChatResponder, Drop, Pause, Reply, ScriptedServer, WaitFor, Write

from ..support.chat_frames import WEATHER
from ..support.chat_frames import chunk as _chunk
from ..support.chat_frames import usage_chunk as _usage
from ..support.proxy import UsageSink, running_proxy

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")

TEXT = "Hello from the loopback server, twice as long as a chunk."
WAIT = 10.0


def _tool_stream() -> Reply:
    """Two tool calls, arguments in fragments, then `tool_calls` and a usage frame."""
    return Reply.sse(
        [
            _chunk({"role": "assistant", "content": None}),
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city"'},
                        }
                    ]
                }
            ),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "Oslo"}'}}]}),
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": '{"tz": "CET"}'},
                        }
                    ]
                }
            ),
            _chunk({}, "tool_calls"),
            _usage(12, 7),
        ]
    )


def _frame(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _cut_stream() -> Reply:
    """Some text, then the connection drops: no finish reason, no [DONE]."""
    return Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="close",
        steps=[
            Write(_frame(_chunk({"content": "partial "}))),
            Drop(),
        ],
    )


TOOLS_OPENAI = [WEATHER]
TOOLS_ANTHROPIC = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]


@pytest.fixture
def upstream_server():
    server = ScriptedServer(ChatResponder(TEXT, chunk_size=5)).start()
    yield server
    server.stop()


@pytest.fixture
def backend(upstream_server):
    with OpenAICommon(upstream_server.url, stream_finish_grace=5.0) as b:
        yield b


# The proxy keeps connections alive, so a client's pool holds a socket until
# the client is closed: every client a test makes is closed after it.
_CLIENTS: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def _ollama_client(url: str, **kwargs: Any) -> Any:
    client = ollama.Client(host=url, timeout=WAIT, **kwargs)
    _CLIENTS.append(client)
    return client


def _anthropic_client(url: str, key: str = "unused") -> Any:
    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, timeout=WAIT)
    _CLIENTS.append(client)
    return client


def _last_chat_request(server: ScriptedServer) -> dict[str, Any]:
    posts = [r for r in server.requests if r.path.endswith("/chat/completions")]
    return posts[-1].json()


# -- Ollama face ------------------------------------------------------------------


def test_ollama_chat_stream_text_and_counts(backend, upstream_server):
    sink = UsageSink()
    with running_proxy(backend, usage_log=sink) as url:
        parts = list(
            _ollama_client(url).chat(
                model="qwen3", messages=[{"role": "user", "content": "say hi"}], stream=True
            )
        )
    assert "".join(p.message.content for p in parts) == TEXT
    assert all(p.message.role == "assistant" for p in parts)
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done
    final = parts[-1]
    assert final.done_reason == "stop"
    assert final.prompt_eval_count == 2  # ChatResponder counts the words of the messages
    assert final.eval_count == len(parts) - 1  # one upstream chunk per content line
    upstream_body = _last_chat_request(upstream_server)
    assert upstream_body["messages"] == [{"role": "user", "content": "say hi"}]
    assert upstream_body["stream"] is True
    [event] = sink.wait(1)
    assert event["face"] == "ollama" and event["route"] == "/api/chat"
    assert event["ok"] is True and event["status"] == 200 and event["stream"] is True
    assert event["content_bytes"] == len(TEXT.encode())
    assert (event["input_tokens"], event["output_tokens"]) == (2, final.eval_count)


def test_ollama_chat_blocking(backend):
    with running_proxy(backend) as url:
        reply = _ollama_client(url).chat(
            model="qwen3",
            messages=[{"role": "user", "content": "say hi"}],
            options={"temperature": 0, "num_predict": 64},
        )
    assert reply.message.role == "assistant"
    assert reply.message.content == TEXT
    assert reply.done and reply.done_reason == "stop"
    assert isinstance(reply.eval_count, int) and reply.eval_count > 0


def test_ollama_options_reach_upstream(backend, upstream_server):
    with running_proxy(backend) as url:
        _ollama_client(url).chat(
            model="qwen3",
            messages=[{"role": "user", "content": "hi"}],
            options={"temperature": 0.25, "num_predict": 32, "top_k": 5, "seed": 7, "stop": ["\n"]},
            format="json",
        )
    body = _last_chat_request(upstream_server)
    assert body["temperature"] == 0.25 and body["max_tokens"] == 32
    assert body["top_k"] == 5 and body["seed"] == 7 and body["stop"] == ["\n"]
    assert body["response_format"] == {"type": "json_object"}
    assert body["model"] == "qwen3"  # the backend has no model of its own: the client's goes on


def test_ollama_generate_stream_and_blocking(backend, upstream_server):
    with running_proxy(backend) as url:
        client = _ollama_client(url)
        parts = list(client.generate(model="m", prompt="say hi", system="be brief", stream=True))
        whole = client.generate(model="m", prompt="say hi")
    assert "".join(p.response for p in parts) == TEXT
    assert parts[-1].done and parts[-1].done_reason == "stop"
    assert whole.response == TEXT and whole.done
    first_post = next(r for r in upstream_server.requests if r.method == "POST")
    assert first_post.json()["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "say hi"},
    ]


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_tool_calls_arrive_whole(upstream_server, stream):
    upstream_server.set_script([_tool_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = _ollama_client(url)
        messages = [{"role": "user", "content": "weather in Oslo?"}]
        if stream:
            parts = list(client.chat(model="m", messages=messages, tools=TOOLS_OPENAI, stream=True))
            calls = [c for p in parts for c in (p.message.tool_calls or [])]
            final = parts[-1]
        else:
            final = client.chat(model="m", messages=messages, tools=TOOLS_OPENAI)
            calls = final.message.tool_calls
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"tz": "CET"}),
    ]
    assert final.done
    assert final.prompt_eval_count == 12 and final.eval_count == 7
    sent = _last_chat_request(upstream_server)
    assert sent["tools"][0]["function"]["name"] == "get_weather"


def test_ollama_tool_round_trip_history(backend, upstream_server):
    """A tool result named by `tool_name` answers the matching call by id, upstream."""
    history = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    with running_proxy(backend) as url:
        _ollama_client(url).chat(model="m", messages=history)
    sent = _last_chat_request(upstream_server)["messages"]
    call = sent[1]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_call_id": call["id"]}


def test_ollama_stream_cut_off_upstream_raises(upstream_server):
    upstream_server.set_script([_cut_stream()])
    sink = UsageSink()
    with OpenAICommon(upstream_server.url) as b, running_proxy(b, usage_log=sink) as url:
        stream = _ollama_client(url).chat(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        seen = []
        with pytest.raises(ollama.ResponseError) as info:
            for part in stream:
                seen.append(part.message.content)
    assert seen == ["partial "]
    assert "The upstream server's answer was unusable" in str(info.value)  # the fixed text
    [event] = sink.wait(1)
    assert event["ok"] is False and event["status"] == 200
    assert event["error_type"] == "response"


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_upstream_error_before_output_is_an_http_status(upstream_server, stream):
    upstream_server.set_script([Reply.error(500, "model exploded")])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with pytest.raises(ollama.ResponseError) as info:
            result = _ollama_client(url).chat(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=stream
            )
            if stream:
                list(result)
    assert info.value.status_code == 502
    assert info.value.error == "The upstream server failed (HTTP 500)"  # not the upstream's words


def test_ollama_list_and_version(backend):
    with running_proxy(backend) as url:
        client = _ollama_client(url)
        names = [m.model for m in client.list().models]
        running = [m.model for m in client.ps().models]
        version = requests.get(url + "/api/version", timeout=WAIT).json()
    assert names == ["loopback"]
    assert running == ["loopback"]
    assert isinstance(version["version"], str) and version["version"]


def test_ollama_bad_request_names_the_field(backend, upstream_server):
    with running_proxy(backend) as url:
        answer = requests.post(
            url + "/api/chat", json={"model": "m", "messages": "hi"}, timeout=WAIT
        )
    assert answer.status_code == 400
    assert "messages" in answer.json()["error"]
    assert not [r for r in upstream_server.requests if r.method == "POST"]


# -- Anthropic face ---------------------------------------------------------------


def test_anthropic_create_blocking(backend):
    sink = UsageSink()
    with running_proxy(backend, usage_log=sink) as url:
        message = _anthropic_client(url).messages.create(
            model="claude-x",
            max_tokens=64,
            system="be brief",
            messages=[{"role": "user", "content": "say hi"}],
        )
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == TEXT
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 4 and message.usage.output_tokens > 0
    [event] = sink.wait(1)
    assert event["face"] == "anthropic" and event["ok"] and event["stream"] is False


def test_anthropic_stream_final_message(backend, upstream_server):
    with running_proxy(backend) as url:
        with _anthropic_client(url).messages.stream(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "say hi"}]
        ) as stream:
            texts = list(stream.text_stream)
            message = stream.get_final_message()
    assert "".join(texts) == TEXT
    assert message.content[0].text == TEXT
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0
    sent = _last_chat_request(upstream_server)
    assert sent["max_tokens"] == 64


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_tool_use(upstream_server, stream):
    upstream_server.set_script([_tool_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = _anthropic_client(url)
        kwargs = dict(
            model="claude-x",
            max_tokens=64,
            tools=TOOLS_ANTHROPIC,
            messages=[{"role": "user", "content": "weather in Oslo?"}],
        )
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kwargs)
    uses = [(b.type, b.id, b.name, b.input) for b in message.content]
    assert uses == [
        ("tool_use", "call_a", "get_weather", {"city": "Oslo"}),
        ("tool_use", "call_b", "get_time", {"tz": "CET"}),
    ]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 7)
    sent = _last_chat_request(upstream_server)
    assert sent["tools"][0]["function"]["parameters"]["required"] == ["city"]


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_length_is_max_tokens(upstream_server, stream):
    upstream_server.set_script(ChatResponder(TEXT, finish_reason="length"))
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = _anthropic_client(url)
        kwargs = dict(model="c", max_tokens=3, messages=[{"role": "user", "content": "hi"}])
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kwargs)
    assert message.stop_reason == "max_tokens"
    assert message.content[0].text == TEXT


def test_anthropic_stream_cut_off_raises(upstream_server):
    upstream_server.set_script([_cut_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with pytest.raises(anthropic.APIError) as info:
            with _anthropic_client(url).messages.stream(
                model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            ) as s:
                s.get_final_message()
    assert "The upstream server's answer was unusable" in str(info.value)


def test_anthropic_upstream_rate_limit_keeps_its_status(upstream_server):
    upstream_server.set_script([Reply.error(429, "slow down", headers={"Retry-After": "3"})])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with pytest.raises(anthropic.RateLimitError) as info:
            _anthropic_client(url).messages.create(
                model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
    assert info.value.body["error"]["type"] == "rate_limit_error"
    message = info.value.body["error"]["message"]
    assert message == "The upstream server is rate limiting requests (HTTP 429)"


def test_anthropic_bad_request_is_invalid_request_error(backend):
    with running_proxy(backend) as url:
        with pytest.raises(anthropic.BadRequestError) as info:
            _anthropic_client(url).messages.create(
                model="c",
                max_tokens=8,
                messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}],
            )
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "messages.0.content.0.document" in info.value.body["error"]["message"]


# -- keys, limits, ids ------------------------------------------------------------


def test_api_key_is_required_on_every_face(backend):
    with running_proxy(backend, api_key="s3cret") as url:
        with pytest.raises(anthropic.AuthenticationError):
            _anthropic_client(url, key="wrong").messages.create(
                model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
        good = _anthropic_client(url, key="s3cret").messages.create(
            model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
        with pytest.raises(ollama.ResponseError) as info:
            _ollama_client(url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
        authed = _ollama_client(url, headers={"Authorization": "Bearer s3cret"}).chat(
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
                reply = _ollama_client(url).chat(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
                parts = list(
                    _ollama_client(url).chat(
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
        reply = _ollama_client(url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.message.content == "slow"


# -- reasoning, and Ollama's load request ---------------------------------------


def _reasoning_stream() -> Reply:
    return Reply.sse(
        [
            _chunk({"role": "assistant", "reasoning_content": "Let me think. "}),
            _chunk({"content": "Answer."}),
            _chunk({}, "stop"),
            _usage(3, 4),
        ]
    )


@pytest.mark.parametrize("think", [None, False])
def test_ollama_thinking_shown_unless_think_is_false(upstream_server, think):
    # think: false first asks GET /props whether the upstream is llama-server (here: no).
    props = [Reply.error(404, "File Not Found", "not_found_error")] if think is False else []
    upstream_server.set_script([*props, _reasoning_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        parts = list(
            _ollama_client(url).chat(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True, think=think
            )
        )
    thinking = "".join(p.message.thinking or "" for p in parts)
    assert "".join(p.message.content for p in parts) == "Answer."
    assert thinking == ("" if think is False else "Let me think. ")


@pytest.mark.parametrize("enabled", [True, False])
def test_anthropic_thinking_blocks_only_when_enabled(upstream_server, enabled):
    upstream_server.set_script([_reasoning_stream()])
    extra = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if enabled else {}
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with _anthropic_client(url).messages.stream(
            model="c", max_tokens=2048, messages=[{"role": "user", "content": "hi"}], **extra
        ) as s:
            message = s.get_final_message()
    kinds = [block.type for block in message.content]
    if enabled:
        assert kinds == ["thinking", "text"]
        assert message.content[0].thinking == "Let me think. "
    else:
        assert kinds == ["text"]
    assert message.content[-1].text == "Answer."


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_load_request_is_answered_without_the_upstream(backend, upstream_server, stream):
    with running_proxy(backend) as url:
        client = _ollama_client(url)
        generated = client.generate(model="m", stream=stream)
        chatted = client.chat(model="m", messages=[], stream=stream)
        if stream:
            generated, chatted = list(generated)[-1], list(chatted)[-1]
    assert generated.done and generated.done_reason == "load" and generated.response == ""
    assert chatted.done and chatted.done_reason == "load"
    assert not [r for r in upstream_server.requests if r.method == "POST"]


def test_ollama_unload_request(backend, upstream_server):
    with running_proxy(backend) as url:
        answer = _ollama_client(url).generate(model="m", keep_alive=0)
    assert answer.done and answer.done_reason == "unload"
    assert not [r for r in upstream_server.requests if r.method == "POST"]


def test_ollama_show_reports_the_upstream_context(backend, upstream_server):
    with running_proxy(backend) as url:
        shown = _ollama_client(url).show("qwen3")
        missing = requests.post(url + "/api/show", json={}, timeout=WAIT)
    arch = shown.modelinfo["general.architecture"]
    assert shown.modelinfo[f"{arch}.context_length"] == 4096  # ChatResponder's n_ctx
    assert "num_ctx 4096" in shown.parameters
    assert "tools" in shown.capabilities
    assert any(r.path == "/props" for r in upstream_server.requests)
    assert missing.status_code == 400 and "model" in missing.json()["error"]


def test_ollama_show_without_a_probe_answer(upstream_server):
    upstream_server.set_script(Reply.error(404, "File Not Found"))
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        shown = _ollama_client(url).show("qwen3")
    assert shown.modelinfo == {"general.architecture": "llama"}
    assert shown.parameters in ("", None)


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
        reply = _ollama_client(url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.message.content == TEXT
    finally:
        process.terminate()
        process.wait(timeout=WAIT)
        process.stderr.close()


# -- Anthropic count_tokens ------------------------------------------------------


def _tokenizing(request):
    """llama-server's /tokenize (one token per word) beside the chat routes."""
    if request.path == "/tokenize":
        return Reply.json({"tokens": list(range(len(request.json()["content"].split())))})
    return ChatResponder(TEXT)(request)


def test_anthropic_count_tokens_uses_the_upstream_tokenizer(upstream_server):
    upstream_server.set_script(_tokenizing)
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = _anthropic_client(url)
        short = client.messages.count_tokens(
            model="c", messages=[{"role": "user", "content": "one two three"}]
        )
        longer = client.messages.count_tokens(
            model="c",
            system="be brief",
            messages=[{"role": "user", "content": "one two three four five"}],
        )
    # No template on the backend: each message is its words plus ROLE_OVERHEAD (4).
    assert short.input_tokens == 3 + 4
    assert longer.input_tokens == (2 + 4) + (5 + 4)
    assert not [r for r in upstream_server.requests if r.path.endswith("/chat/completions")]


def test_anthropic_count_tokens_without_a_tokenizer_is_not_found(backend):
    with running_proxy(backend) as url:
        with pytest.raises(anthropic.NotFoundError) as info:
            _anthropic_client(url).messages.count_tokens(
                model="c", messages=[{"role": "user", "content": "hi"}]
            )
    assert "tokenizer" in info.value.body["error"]["message"]


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
    assert _last_chat_request(upstream_server)["messages"][0]["content"] == "split body"


def test_concurrent_streams_through_one_backend(upstream_server):
    """One backend (one connection pool) serves many clients at once, none mixed up."""
    upstream_server.set_script(ChatResponder(TEXT, chunk_size=3))
    sink = UsageSink()
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def one(i: int, url: str) -> None:
        try:
            parts = _ollama_client(url).chat(
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
