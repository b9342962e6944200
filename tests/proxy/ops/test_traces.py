"""One OpenTelemetry span per proxied model call, from real requests through the proxy.

The spans land in the SDK's `InMemorySpanExporter`; a span is made when the
request's usage event is, so waiting for the event is waiting for the span.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy.routing import KeyPolicy, KeyRing
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.testing import ChatResponder, Reply, ScriptedServer, WaitFor, Write

from ...support.chat_frames import chunk
from ...support.proxy import UsageSink, running_proxy
from ..faces.gemini_support import generate, request
from ..routing.nodes_support import config, node_config, nodes, routed_proxy
from ..support import cut_stream
from ..test_proxy import _post_and_hang_up

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="needs the otel extra")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

WAIT = 10.0
SECRET = "sk-alice-SECRET-0123456789"
ALICE = KeyPolicy("alice", "ALICE_KEY")
MESSAGES = [{"role": "user", "content": "hi"}]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Spans:
    """A tracer provider whose finished spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = sdk.TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def spans() -> Iterator[Spans]:
    made = Spans()
    yield made
    made.provider.shutdown()


def _only(spans: list[Any], request_id: str) -> Any:
    [span] = [s for s in spans if s.attributes["llmchat.request_id"] == request_id]
    return span


def _no_secret_in(span: Any, secret: str) -> None:
    assert secret not in span.name
    for name, value in span.attributes.items():
        assert secret not in str(value), name


def test_routed_blocking_and_streamed_calls_make_one_span_each(spans: Spans) -> None:
    with nodes("a") as (a,):
        routed = RoutedUpstream(config([node_config(a)], {"coder": [Tier("x", ("a",))]}))
        keys = KeyRing([ALICE], {"ALICE_KEY": SECRET})
        with routed_proxy(routed, keys=keys, traces=spans.provider) as (url, sink):
            auth = {"Authorization": f"Bearer {SECRET}"}
            blocking = requests.post(
                url + "/v1/chat/completions",
                json={"model": "coder", "messages": MESSAGES},
                headers={
                    **auth,
                    "x-request-id": "blk-1",
                    "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
                },
                timeout=WAIT,
            )
            assert blocking.status_code == 200
            streamed = requests.post(
                url + "/api/chat",
                json={"model": "coder", "messages": MESSAGES, "stream": True},
                headers={**auth, "x-request-id": "str-2"},
                timeout=WAIT,
            )
            assert streamed.status_code == 200
            requests.get(url + "/health", timeout=WAIT)  # not a model call: no span
            events = {e["request_id"]: e for e in sink.wait(3)}
    finished = spans.finished()
    assert len(finished) == 2
    for request_id, streams in (("blk-1", False), ("str-2", True)):
        span, event = _only(finished, request_id), events[request_id]
        assert span.name == "chat coder" and span.kind == SpanKind.SERVER
        attributes = dict(span.attributes)
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "coder"
        assert attributes["llmchat.streamed"] is streams
        assert attributes["llmchat.cancelled"] is False
        assert attributes["llmchat.node"] == "a" and attributes["llmchat.alias"] == "coder"
        assert attributes["llmchat.tier"] == 0 and attributes["llmchat.dialect"] == "openai"
        assert attributes["llmchat.key"] == "alice"
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["server.port"] == int(a.url.split(":")[2].split("/")[0])
        assert attributes["http.response.status_code"] == 200
        assert "error.type" not in attributes and span.status.status_code == StatusCode.UNSET
        assert attributes["gen_ai.usage.input_tokens"] == event["input_tokens"]
        assert attributes["gen_ai.usage.output_tokens"] == event["output_tokens"] > 0
        # The span covers the request as its usage event timed it: arrival to the last byte.
        assert span.start_time == int(event["started_at"] * 1e9)
        assert span.end_time - span.start_time == int(event["duration_ms"] * 1e6)
        _no_secret_in(span, SECRET)
    parented = _only(finished, "blk-1")
    assert parented.parent is not None and parented.parent.is_remote
    assert parented.parent.span_id == int(PARENT_ID, 16)
    assert parented.context.trace_id == int(TRACE_ID, 16)
    assert _only(finished, "str-2").parent is None  # no traceparent: a trace of its own


@pytest.mark.parametrize("how", ["generateContent", "sse"])
def test_a_gemini_call_is_a_chat_span_of_its_face_with_no_query_key(spans: Spans, how) -> None:
    """The route is the method's pattern, the model the name Gemini CLI asked for (an
    alias here); a ``?key=`` reaches no attribute. The model list makes no span."""
    with nodes("a") as (a,):
        routed = RoutedUpstream(config([node_config(a)], {"gemini-2.5-pro": [Tier("x", ("a",))]}))
        keys = KeyRing([ALICE], {"ALICE_KEY": SECRET})
        with routed_proxy(routed, keys=keys, traces=spans.provider) as (url, sink):
            answer, _ = generate(url, how, key=SECRET)
            assert answer.status == 200, answer
            listed = request(url, "GET", f"/v1beta/models?key={SECRET}")
            assert listed.status == 200, listed
            [event] = [e for e in sink.wait(2) if e["route"] != "/v1beta/models"]
    [span] = spans.finished()
    method = "generateContent" if how == "generateContent" else "streamGenerateContent"
    assert span.name == "chat gemini-2.5-pro" and span.kind == SpanKind.SERVER
    attributes = dict(span.attributes)
    assert attributes["llmchat.face"] == "gemini"
    assert attributes["llmchat.route"] == f"/v1beta/models/{{model}}:{method}"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == attributes["llmchat.alias"] == "gemini-2.5-pro"
    assert attributes["llmchat.streamed"] is (how == "sse")
    assert (attributes["llmchat.node"], attributes["llmchat.key"]) == ("a", "alice")
    assert attributes["gen_ai.usage.output_tokens"] == event["output_tokens"] > 0
    assert attributes["http.response.status_code"] == 200 and "error.type" not in attributes
    _no_secret_in(span, SECRET)


def test_an_upstream_failure_and_a_failure_mid_stream_carry_the_error_type(
    spans: Spans,
) -> None:
    script = [Reply.error(500, "down"), cut_stream()]
    sink = UsageSink()
    with ScriptedServer(script) as upstream_url, OpenAICommon(upstream_url) as backend:
        with running_proxy(backend, usage_log=sink, traces=spans.provider) as url:
            failed = requests.post(
                url + "/v1/messages",
                json={"model": "m", "max_tokens": 8, "messages": MESSAGES},
                headers={"x-request-id": "fail-1"},
                timeout=WAIT,
            )
            assert failed.status_code == 502
            cut = requests.post(
                url + "/api/chat",
                json={"model": "m", "messages": MESSAGES, "stream": True},
                headers={"x-request-id": "cut-2"},
                timeout=WAIT,
            )
            assert cut.status_code == 200  # the stream had started: its error is a line
            events = {e["request_id"]: e for e in sink.wait(2)}
    finished = spans.finished()
    assert len(finished) == 2
    for request_id, status in (("fail-1", 502), ("cut-2", 200)):
        span = _only(finished, request_id)
        attributes = dict(span.attributes)
        assert attributes["error.type"] == events[request_id]["error_type"] is not None
        assert span.status.status_code == StatusCode.ERROR
        assert attributes["http.response.status_code"] == status
        assert attributes["llmchat.cancelled"] is False
        assert "llmchat.node" not in attributes  # one upstream: no routed node
        assert attributes["server.address"] == "127.0.0.1"
    assert _only(finished, "fail-1").attributes["error.type"] == "http"
    assert _only(finished, "cut-2").attributes["llmchat.streamed"] is True


def test_a_client_that_hangs_up_mid_stream_makes_a_cancelled_span(spans: Spans) -> None:
    release = threading.Event()
    held = Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[
            Write(b"data: " + json.dumps(chunk({"content": "first "})).encode() + b"\n\n"),
            WaitFor(release, 30),  # held until the test ends
        ],
    )
    sink = UsageSink()
    body = {"model": "m", "stream": True, "messages": MESSAGES}
    try:
        with ScriptedServer([held]) as upstream_url, OpenAICommon(upstream_url) as backend:
            with running_proxy(backend, usage_log=sink, traces=spans.provider) as url:
                _post_and_hang_up(url, "/api/chat", body, read_until=b"first ")
                [event] = sink.wait(1)
    finally:
        release.set()
    assert event["error_type"] == "client_abort"
    [span] = spans.finished()
    attributes = dict(span.attributes)
    assert attributes["llmchat.cancelled"] is True and attributes["llmchat.streamed"] is True
    # The client left: not the proxy's error, and no status was sent to anyone.
    assert "error.type" not in attributes and "http.response.status_code" not in attributes
    assert span.status.status_code == StatusCode.UNSET
    assert span.end_time - span.start_time == int(event["duration_ms"] * 1e6)


def test_traces_must_be_a_tracer_provider() -> None:
    with ScriptedServer(ChatResponder()) as upstream_url, OpenAICommon(upstream_url) as backend:
        from llmchat.proxy import make_app

        with pytest.raises(TypeError, match="traces must be"):
            make_app(backend, traces="yes")
        assert make_app(backend, traces=False).traces is None
