"""Anthropic ``ping`` events while the upstream is silent, through raw SSE and the real SDK.

A stream waits one ping interval for output (a fast failure keeps its HTTP
status); after that it opens with ``message_start`` and pings through every
silence: prefill, a tool call being assembled, an `Inference` chain failing
over, under both servers. A hang-up while pinging still cancels the upstream.
The upstream is llmchat's scripted loopback server, held on events; the tests
wait on pings as events, never on sleeps.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.proxy import make_app
from llmchat.retry import Inference
from llmchat.testing import Reply, ScriptedServer, WaitFor, Write

from ...support.chat_frames import chunk as _chunk
from ...support.chat_frames import usage_chunk as _usage
from ...support.proxy import UsageSink, running_proxy
from ...support.proxy_servers import serve_proxy
from .anthropic_support import (
    HI,
    PING,
    TOOLS,
    WAIT,
    _call,
    _client,
    _RawStream,
    _read_all,
    _stream_body,
    _thinking_tool_events,
)

anthropic = pytest.importorskip("anthropic")
httpx = pytest.importorskip("httpx2")  # this SDK version is built on httpx2


# -- ping -------------------------------------------------------------------------


def test_pings_while_the_upstream_is_in_prefill_then_one_message_start(upstream):
    release = threading.Event()
    upstream.set_script(
        [
            Reply.sse(
                [_chunk({"content": "Late "}), _chunk({"content": "hello."}), _chunk({}, "stop")],
                before_headers=[WaitFor(release, 30)],
            )
        ]
    )
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        raw = _RawStream(url, "/v1/messages", _stream_body())
        try:
            events = raw.events()
            opening = [next(events) for _ in range(3)]  # the upstream has sent nothing yet
            release.set()
            rest = list(events)
        finally:
            release.set()
            raw.close()
    assert raw.status == 200
    assert [name for name, _ in opening] == ["message_start", "ping", "ping"]
    assert opening[1][1] == {"type": "ping"}
    names = [name for name, _ in opening + rest]
    assert names.count("message_start") == 1 and names[-2:] == ["message_delta", "message_stop"]
    text = "".join(d["delta"]["text"] for n, d in rest if n == "content_block_delta")
    assert text == "Late hello."
    assert [d["index"] for n, d in rest if n == "content_block_start"] == [0]


def test_pings_while_a_tool_call_is_assembled(upstream):
    """Arguments arrive whole at the end, so the client sees nothing while they stream."""
    release = threading.Event()
    head = _call(0, name="get_weather", arguments='{"ci')
    head["tool_calls"][0]["id"] = "call_1"
    frames = [
        _chunk({"content": "Let me look."}),
        _chunk(head),
        _chunk(_call(0, arguments='ty": "Oslo"}')),
        _chunk({}, "tool_calls"),
    ]
    steps: list[Any] = [Write(b"data: " + json.dumps(f).encode() + b"\n\n") for f in frames]
    steps.insert(2, WaitFor(release, 30))
    upstream.set_script(
        [Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)]
    )
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        seen = _read_all(url, _stream_body(tools=TOOLS), release, after="content_block_start")
    names = [name for name, _ in seen]
    # The upstream was held until a ping came after the text had begun.
    assert "ping" in names[names.index("content_block_start") :]
    [tool] = [d["content_block"] for n, d in seen if n == "content_block_start"][1:]
    assert tool["type"] == "tool_use" and tool["name"] == "get_weather"
    assert names[-1] == "message_stop"
    assert [d["delta"]["stop_reason"] for n, d in seen if n == "message_delta"] == ["tool_use"]


class _Watching(httpx.HTTPTransport):
    """An httpx transport that sets `seen` once the response body carried a ping event."""

    def __init__(self, seen: threading.Event) -> None:
        super().__init__()
        self.seen = seen

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        inner, seen = response.stream, self.seen

        class Watched(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                for part in inner:  # type: ignore[union-attr]
                    if b"event: ping" in part:
                        seen.set()
                    yield part

            def close(self) -> None:
                inner.close()  # type: ignore[union-attr]

        response.stream = Watched()
        return response


def test_sdk_stream_helpers_read_through_pings(upstream):
    seen = threading.Event()
    upstream.set_script([Reply.sse(_thinking_tool_events(), before_headers=[WaitFor(seen, 30)])])
    try:
        with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
            client = _client(url, httpx.Client(transport=_Watching(seen), timeout=WAIT))
            with client.messages.stream(
                model="m",
                max_tokens=256,
                messages=HI,
                tools=TOOLS,
                thinking={"type": "enabled", "budget_tokens": 1024},
            ) as stream:
                kinds = [event.type for event in stream]
                message = stream.get_final_message()
    finally:
        seen.set()
    assert seen.is_set()  # the upstream was held until a ping had come through
    assert kinds.count("message_start") == 1
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[2].input == {"city": "Oslo"}
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == 9


def test_failure_after_pings_is_an_error_event_in_fixed_words(upstream):
    release = threading.Event()
    secret = "upstream detail at /srv/models/secret.gguf"
    upstream.set_script([Reply.error(500, secret, before_headers=[WaitFor(release, 30)])])
    sink = UsageSink()
    with (
        OpenAICommon(upstream.url) as b,
        running_proxy(b, ping_interval=PING, usage_log=sink) as url,
    ):
        seen = _read_all(url, _stream_body(), release)
        [usage] = sink.wait(1)
    names = [name for name, _ in seen]
    assert names[0] == "message_start" and names[-1] == "error"
    assert "message_stop" not in names
    error = seen[-1][1]["error"]
    assert error["type"] == "api_error" and "secret" not in json.dumps(seen)
    assert (usage["ok"], usage["error_type"]) == (False, "http")


def test_hang_up_while_pinging_cancels_the_upstream(upstream):
    release = threading.Event()
    upstream.set_script(
        [Reply.sse([_chunk({"content": "never"})], before_headers=[WaitFor(release, 30)])]
    )
    sink = UsageSink()
    try:
        with (
            OpenAICommon(upstream.url) as b,
            running_proxy(b, ping_interval=PING, usage_log=sink) as url,
        ):
            raw = _RawStream(url, "/v1/messages", _stream_body())
            events = raw.events()
            assert next(events)[0] == "message_start" and next(events)[0] == "ping"
            raw.response.close()
            raw.close()
            assert upstream.wait_for_requests(1, WAIT)
            record = upstream.requests[0]
            assert record.disconnected.wait(WAIT), "the upstream never saw the proxy hang up"
            [usage] = sink.wait(1)
    finally:
        release.set()
    assert usage["status"] == 499 and usage["error_type"] == "client_abort"


def test_pings_and_hang_up_under_gunicorn(upstream, tmp_path):
    """gunicorn's threaded workers: the pump thread, the pings and the hang-up watch."""
    release = threading.Event()
    upstream.set_script(
        [
            Reply.sse(
                [_chunk({"content": "Late."}), _chunk({}, "stop")],
                before_headers=[WaitFor(release, 30)],
            ),
            Reply.sse([_chunk({"content": "never"})], before_headers=[WaitFor(release, 30)]),
        ]
    )
    options = ("--workers", "1", "--threads", "4", "--ping-interval", str(PING))
    try:
        with serve_proxy("gunicorn", upstream.url, tmp_path, gunicorn_args=options) as proxy:
            seen = _read_all(proxy.url, _stream_body(), release)
            release.clear()
            raw = _RawStream(proxy.url, "/v1/messages", _stream_body())
            events = raw.events()
            assert next(events)[0] == "message_start" and next(events)[0] == "ping"
            raw.response.close()
            raw.close()
            assert upstream.wait_for_requests(2, WAIT)
            assert upstream.requests[1].disconnected.wait(WAIT), "the upstream never saw it"
            usage = proxy.usage.wait(2, route="/v1/messages")
    finally:
        release.set()
    names = [name for name, _ in seen]
    assert names[:2] == ["message_start", "ping"] and names[-1] == "message_stop"
    assert names.count("message_start") == 1
    assert sorted(e["status"] for e in usage) == [200, 499]


@pytest.mark.parametrize("fails", [False, True])
def test_pings_while_an_inference_chain_is_still_starting(fails):
    """A chain returns only once a backend has content: its prefill is inside start()."""
    release = threading.Event()
    broken = ScriptedServer([Reply.error(500, "down")]).start()
    late = (
        Reply.error(503, "busy", before_headers=[WaitFor(release, 30)])
        if fails
        else Reply.sse(
            [_chunk({"content": "From the second."}), _chunk({}, "stop"), _usage(2, 3)],
            before_headers=[WaitFor(release, 30)],
        )
    )
    slow = ScriptedServer([late]).start()
    sink = UsageSink()
    try:
        with OpenAICommon(broken.url) as first, OpenAICommon(slow.url) as second:
            chain = Inference([first, second], max_retries=0, timeout=WAIT)
            with running_proxy(chain, ping_interval=PING, usage_log=sink) as url:
                seen = _read_all(url, _stream_body(), release)
                [usage] = sink.wait(1)
    finally:
        release.set()
        broken.stop()
        slow.stop()
    names = [name for name, _ in seen]
    assert names[:2] == ["message_start", "ping"] and names.count("message_start") == 1
    if fails:
        assert names[-1] == "error" and "message_stop" not in names
        assert seen[-1][1]["error"]["type"] == "api_error"
        assert usage["ok"] is False
    else:
        text = "".join(d["delta"]["text"] for n, d in seen if n == "content_block_delta")
        assert text == "From the second." and names[-1] == "message_stop"
        assert usage["ok"] and usage["output_tokens"] == 3


def test_a_fast_upstream_failure_still_gets_its_http_status(upstream):
    upstream.set_script([Reply.error(429, "slow down")])
    with OpenAICommon(upstream.url) as b, running_proxy(b, ping_interval=PING) as url:
        with pytest.raises(anthropic.RateLimitError):
            with _client(url).messages.stream(model="m", max_tokens=8, messages=HI) as s:
                s.get_final_message()


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan")])
def test_ping_interval_is_validated(upstream, bad):
    with OpenAICommon(upstream.url) as b, pytest.raises(ValueError, match="ping_interval"):
        make_app(b, ping_interval=bad)
    with OpenAICommon(upstream.url) as b, pytest.raises(TypeError, match="ping_interval"):
        make_app(b, ping_interval="5")
