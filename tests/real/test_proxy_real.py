"""The proxy over a real llama.cpp `llama-server`, driven by the real client packages.

`tests/test_proxy.py` proves the translations against a scripted upstream;
this file proves what only a real server can: that the token counts the
clients see are the server's own, that a greedy stream says what the blocking
answer says, that a client hanging up (mid-stream or before the first byte)
really stops the server's generation, and that an upstream that times out
mid-stream makes the client raise instead of ending quietly.

The model is random: its text is gibberish, so nothing pins a string; text is
compared with what the same request gets from llama-server directly.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon, Settings
from llmchat.proxy import make_app, make_server
from llmchat.proxy.upstream import client_message
from llmchat.response import Response

from ..support.proxy import UsageSink, running_proxy
from .conftest import LlamaServer, wait_until
from .test_llamacpp import HELLO, LONG, slots_idle

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")

N = 8  # tokens; the model never emits EOS, so every short request ends at its limit
OPTIONS = {"num_predict": N, "temperature": 0, "seed": 1}
GREEDY = {"temperature": 0}  # the Anthropic SDK has no `temperature` argument any more
WAIT = 30.0
# A generation of LONG tokens really stops at the slot's context (1024 tokens, prompt
# included): ~1000 tokens for HELLO, several seconds. A hang-up is seen within a few
# tokens (2-4 here); STOPPED bounds what a stopped generation may have produced.
STOPPED = 100
NATURAL_END = 1000  # fewer than HELLO's context-capped run: the generation was cut short
TOOLS = [
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


def _upstream(server: LlamaServer, **kwargs: Any) -> OpenAICommon:
    return OpenAICommon(server.url, model="tiny", **kwargs)


def _direct(server: LlamaServer, messages: list[dict[str, Any]], max_tokens: int = N) -> Response:
    """The same request straight to llama-server, through llmchat: the reference answer."""
    settings = Settings(max_tokens=max_tokens, temperature=0, seed=1)
    response = _upstream(server).chat_completion(messages, settings=settings)
    assert response.finish_reason == "length" and response.completion_tokens == max_tokens
    assert response.msg.strip() and response.prompt_tokens and response.prompt_tokens > 0
    return response


# The proxy keeps connections alive, so a client left open holds a socket until it is
# collected (a ResourceWarning, an error in this suite): every test closes its own.
_CLIENTS: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def _ollama(url: str) -> Any:
    client = ollama.Client(host=url, timeout=WAIT)
    _CLIENTS.append(client)
    return client


def _anthropic(url: str) -> Any:
    client = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=WAIT)
    _CLIENTS.append(client)
    return client


def _predicted(server: LlamaServer) -> float:
    return server.metrics().get("llamacpp:tokens_predicted_total", 0.0)


@pytest.fixture
def server(chatml_server: LlamaServer) -> Iterator[LlamaServer]:
    """The chatml server, idle at the start (an earlier test's cancel may still be settling)."""
    assert wait_until(lambda: slots_idle(chatml_server), 10), "a slot is still busy"
    yield chatml_server


@pytest.fixture
def proxy(server: LlamaServer) -> Iterator[tuple[str, UsageSink]]:
    sink = UsageSink()
    with _upstream(server) as upstream, running_proxy(upstream, usage_log=sink) as url:
        yield url, sink


# -- Ollama face ----------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_chat_ends_at_num_predict_with_the_servers_counts(server, proxy, stream):
    direct = _direct(server, HELLO)
    url, sink = proxy
    client = _ollama(url)
    if stream:
        parts = list(client.chat(model="tiny", messages=HELLO, stream=True, options=OPTIONS))
        assert [p.done for p in parts].count(True) == 1 and len(parts) >= 2
        assert all(p.message.role == "assistant" for p in parts)
        text, final = "".join(p.message.content for p in parts), parts[-1]
    else:
        final = client.chat(model="tiny", messages=HELLO, stream=False, options=OPTIONS)
        text = final.message.content
    assert text.strip() and text == direct.msg  # greedy: the same words as the direct call
    assert final.done and final.done_reason == "length"
    assert final.eval_count == N
    assert final.prompt_eval_count == direct.prompt_tokens
    [event] = sink.wait(1)
    assert (event["face"], event["route"], event["stream"]) == ("ollama", "/api/chat", stream)
    assert event["ok"] is True and event["status"] == 200 and event["error_type"] is None
    assert (event["input_tokens"], event["output_tokens"]) == (direct.prompt_tokens, N)
    assert event["content_bytes"] == len(text.encode("utf-8"))


def test_ollama_generate_stream(server, proxy):
    direct = _direct(server, HELLO)  # generate's prompt becomes the same one user message
    url, sink = proxy
    parts = list(
        _ollama(url).generate(
            model="tiny", prompt=HELLO[0]["content"], stream=True, options=OPTIONS
        )
    )
    assert [p.done for p in parts].count(True) == 1 and len(parts) >= 2
    text, final = "".join(p.response for p in parts), parts[-1]
    assert text.strip() and text == direct.msg
    assert final.done and final.done_reason == "length"
    assert final.eval_count == N and final.prompt_eval_count == direct.prompt_tokens
    [event] = sink.wait(1)
    assert event["route"] == "/api/generate" and event["ok"] is True


def test_ollama_tags_lists_the_servers_model(proxy, server):
    url, _ = proxy
    served = [m["id"] for m in server.get("/v1/models")["data"]]
    names = [m.model for m in _ollama(url).list().models]
    assert served and set(served) <= set(names)


# -- Anthropic face -------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_ends_at_max_tokens_with_the_servers_counts(server, proxy, stream):
    direct = _direct(server, HELLO)
    url, sink = proxy
    kwargs: dict[str, Any] = dict(model="tiny", max_tokens=N, messages=HELLO, extra_body=GREEDY)
    if stream:
        with _anthropic(url).messages.stream(**kwargs) as s:
            streamed = "".join(s.text_stream)
            message = s.get_final_message()
        assert streamed == message.content[0].text
    else:
        message = _anthropic(url).messages.create(**kwargs)
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text.strip() and message.content[0].text == direct.msg
    assert message.stop_reason == "max_tokens" and message.role == "assistant"
    assert message.usage.output_tokens == N
    # The direct call left the prompt in the slot: Anthropic counts it apart, as cache reads.
    usage = message.usage
    assert usage.input_tokens + usage.cache_read_input_tokens == direct.prompt_tokens
    [event] = sink.wait(1)
    assert (event["face"], event["stream"], event["ok"]) == ("anthropic", stream, True)
    assert (event["input_tokens"], event["output_tokens"]) == (direct.prompt_tokens, N)


def test_anthropic_tool_choice_any_gives_a_tool_use(tools_server: LlamaServer):
    """`tool_choice: any` travels as OpenAI `required`; a server that constrains to it
    must come back through the proxy as a `tool_use` block. `disable_parallel_tool_use`
    travels as `parallel_tool_calls: false`, without which the grammar lets the random
    model start a second call and run out of tokens in it."""
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with _upstream(tools_server) as upstream, running_proxy(upstream) as url:
        client = _anthropic(url)
        kwargs: dict[str, Any] = dict(
            model="tiny",
            max_tokens=64,
            messages=messages,
            tools=TOOLS,
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            extra_body=GREEDY,
        )
        created = client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as s:
            streamed = s.get_final_message()
    for message in (created, streamed):
        [use] = [b for b in message.content if b.type == "tool_use"]
        assert use.name == "get_weather" and use.id
        assert isinstance(use.input, dict) and "city" in use.input
        assert message.stop_reason == "tool_use"
    assert [b.input for b in streamed.content if b.type == "tool_use"] == [
        b.input for b in created.content if b.type == "tool_use"
    ]


# -- hang-ups really stop the server ----------------------------------------------


def _send(url: str, path: str, body: dict[str, Any]) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        more = sock.recv(4096)
        assert more, f"the proxy closed before {marker!r}; got {seen!r}"
        seen += more
    return seen


MID_STREAM = {
    # The first content line of each face's stream: generation is under way.
    "/api/chat": (
        {"model": "tiny", "messages": HELLO, "options": {"num_predict": LONG, "temperature": 0}},
        b'"done":false',
    ),
    "/v1/messages": (
        {"model": "tiny", "max_tokens": LONG, "stream": True, "messages": HELLO},
        b"text_delta",
    ),
}


@pytest.mark.parametrize("path", sorted(MID_STREAM))
def test_hang_up_mid_stream_stops_the_generation(server, proxy, path):
    url, sink = proxy
    body, marker = MID_STREAM[path]
    before = _predicted(server)
    with _send(url, path, body) as sock:
        _read_until(sock, marker)
        assert not slots_idle(server), "the generation should still be running"
    assert wait_until(lambda: slots_idle(server), 5), "the slot kept generating"
    [event] = sink.wait(1)
    assert event["status"] == 499 and event["error_type"] == "client_abort"
    assert event["ok"] is False and event["content_bytes"] > 0
    assert _predicted(server) - before < STOPPED, "the generation went on after the hang-up"


def test_hang_up_with_a_long_prompt_stops_the_generation(server, proxy):
    """The prefill-cancel test's approach: a long prompt, gone before any byte is read.

    (Prefill here lasts milliseconds, so this cannot prove the phase; the queued
    test below pins the before-the-first-byte case.)"""
    url, sink = proxy
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "word " * 600}],  # leaves ~400 to generate
        "options": {"num_predict": LONG, "temperature": 0},
    }
    before = _predicted(server)
    _send(url, "/api/chat", body).close()
    [event] = sink.wait(1)
    assert event["status"] == 499 and event["error_type"] == "client_abort"
    assert wait_until(lambda: slots_idle(server), 5), "the slot kept generating"
    assert _predicted(server) - before < STOPPED, "the generation went on after the hang-up"


@pytest.mark.parametrize("path", sorted(MID_STREAM))
def test_hang_up_while_queued_never_starts_the_generation(server, proxy, path):
    """Both slots busy: the proxied request waits in llama-server's queue with no byte
    sent; the client hangs up; once the slots free up, it must never run."""
    url, sink = proxy
    settings = Settings(max_tokens=LONG, temperature=0)
    busy = [
        _upstream(server).chat_completion_stream(
            [{"role": "user", "content": f"busy {i}"}], settings=settings
        )
        for i in (0, 1)
    ]
    try:
        for response in busy:
            assert next(iter(response)) is not None  # both slots are generating now
        body, _ = MID_STREAM[path]
        with _send(url, path, body):
            assert wait_until(
                lambda: server.metrics().get("llamacpp:requests_deferred", 0) >= 1, 5
            ), "the proxied request was not queued"
        [event] = sink.wait(1)  # recorded while the slots are still busy
        assert event["status"] == 499 and event["error_type"] == "client_abort"
        assert event["content_bytes"] == 0
    finally:
        for response in busy:
            response.cancel()
    assert wait_until(
        lambda: slots_idle(server) and server.metrics().get("llamacpp:requests_deferred", 0) == 0,
        5,
    ), "the abandoned request ran (or stayed queued) once the slots were free"
    assert slots_idle(server)


# -- an upstream failure mid-stream reaches the client ------------------------------


@pytest.fixture
def timing_out_proxy(server: LlamaServer) -> Iterator[tuple[str, UsageSink]]:
    """The proxy over a backend whose whole-request deadline ends mid-generation."""
    sink = UsageSink()
    before = _predicted(server)
    with (
        _upstream(server, request_timeout=0.5) as upstream,
        running_proxy(upstream, usage_log=sink) as url,
    ):
        yield url, sink
    assert wait_until(lambda: slots_idle(server), 10)
    assert _predicted(server) - before < NATURAL_END, "the timed-out generation kept running"


def test_ollama_stream_raises_when_the_upstream_times_out(timing_out_proxy):
    url, sink = timing_out_proxy
    seen: list[str] = []
    stream = _ollama(url).chat(
        model="tiny", messages=HELLO, stream=True, options={"num_predict": LONG}
    )
    with pytest.raises(ollama.ResponseError) as info:
        for part in stream:
            assert not part.done, "a timed-out stream must not end with done"
            seen.append(part.message.content)
    assert seen and "".join(seen).strip(), "the timeout should land mid-stream"
    # A fixed message per class: the upstream's own words stay in the proxy's log.
    assert client_message("timeout", None) in str(info.value)
    [event] = sink.wait(1)
    assert event["ok"] is False and event["error_type"] == "timeout"


def test_ollama_blocking_gets_504_when_the_upstream_times_out(timing_out_proxy):
    url, sink = timing_out_proxy
    with pytest.raises(ollama.ResponseError) as info:
        _ollama(url).chat(model="tiny", messages=HELLO, options={"num_predict": LONG})
    assert info.value.status_code == 504
    [event] = sink.wait(1)
    assert (event["status"], event["error_type"]) == (504, "timeout")


def test_anthropic_stream_raises_when_the_upstream_times_out(timing_out_proxy):
    url, sink = timing_out_proxy
    texts: list[str] = []
    with pytest.raises(anthropic.APIError) as info:
        with _anthropic(url).messages.stream(model="tiny", max_tokens=LONG, messages=HELLO) as s:
            for text in s.text_stream:
                texts.append(text)
            s.get_final_message()
    assert texts, "the timeout should land mid-stream"
    # A fixed message per class: the upstream's own words stay in the proxy's log.
    assert client_message("timeout", None) in str(info.value)
    [event] = sink.wait(1)
    assert event["ok"] is False and event["error_type"] == "timeout"


def test_anthropic_create_gets_504_when_the_upstream_times_out(timing_out_proxy):
    url, _ = timing_out_proxy
    with pytest.raises(anthropic.APIStatusError) as info:
        _anthropic(url).messages.create(model="tiny", max_tokens=LONG, messages=HELLO)
    assert info.value.status_code == 504
    assert info.value.body["error"]["type"] == "api_error"


class _LateClose:
    """WSGI middleware: the server calls the body's `close()` a moment after the last
    write, as a buffering server does once the bytes have left (waitress, a proxy
    in front); the client may well have read everything and gone by then."""

    def __init__(self, app: Any, delay: float) -> None:
        self.app, self.delay = app, delay

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        return _LateCloseBody(self.app(environ, start_response), self.delay)


class _LateCloseBody:
    def __init__(self, body: Any, delay: float) -> None:
        self.body, self.delay = body, delay

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        time.sleep(self.delay)
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


@contextlib.contextmanager
def _late_closing_proxy(upstream: Any, sink: UsageSink) -> Iterator[str]:
    server = make_server(_LateClose(make_app(upstream, usage_log=sink), 0.3), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_usage_event_keeps_the_timeout_when_the_client_leaves(server):
    """The client reads the whole stream, error line included, then closes: it did not
    abort anything, and the usage record must still say the upstream timed out."""
    sink = UsageSink()
    body = {"model": "tiny", "messages": HELLO, "options": {"num_predict": LONG}}
    with (
        _upstream(server, request_timeout=0.5) as upstream,
        _late_closing_proxy(upstream, sink) as url,
    ):
        with _send(url, "/api/chat", body) as sock:
            seen = _read_until(sock, b'"error"')
            while b"\n" not in seen[seen.index(b'"error"') :]:  # the whole error line
                more = sock.recv(4096)
                assert more, f"the proxy closed mid-line: {seen!r}"
                seen += more
        [event] = sink.wait(1)
    # The client got the failure, whole, in the fixed words for its class.
    assert client_message("timeout", None).encode() in seen
    assert (event["status"], event["ok"], event["error_type"]) == (200, False, "timeout")


def test_anthropic_count_tokens_with_the_servers_tokenizer(server, proxy):
    url, _ = proxy
    client = _anthropic(url)
    short = client.messages.count_tokens(model="tiny", messages=HELLO)
    longer = client.messages.count_tokens(
        model="tiny", messages=[{"role": "user", "content": "Say hello. " * 20}]
    )
    # The server's template and tokenizer: exactly the prompt a completion reports.
    assert short.input_tokens == _direct(server, HELLO).prompt_tokens
    assert longer.input_tokens > short.input_tokens
