"""The proxy's pieces on their own: chunk shaping, settings, status mapping, the relay
meter, usage events, the hang-up watcher, and the WSGI app called directly.

tests/test_proxy.py drives the whole proxy with real clients over real sockets;
these pin down each part's contract so a failure there points at one piece.
"""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from llmchat import Chunk, OpenAICommon, Response, ToolCall
from llmchat.cli import main
from llmchat.protocols.anthropic import AnthropicStream
from llmchat.protocols.ollama import OllamaStream
from llmchat.proxy import make_app
from llmchat.proxy.faces.openai.relay_meter import RelayMeter
from llmchat.proxy.server.hangup import HangupWatch
from llmchat.proxy.upstream import (
    Upstream,
    client_message,
    failure_of,
    is_truncation,
    openai_chunk,
)
from llmchat.proxy.usage import UsageEvent, UsageLog
from llmchat.testing import ChatResponder, Reply, ScriptedServer, WaitFor

WAIT = 10.0
NOWHERE = "http://127.0.0.1:9/v1"  # never contacted: these tests fail before any I/O


# -- openai_chunk ---------------------------------------------------------------


def _calls() -> list[ToolCall]:
    return [
        ToolCall("get_weather", {"city": "Oslo"}, id="call_a"),
        # Arguments as the provider wrote them (spacing kept) must survive verbatim.
        ToolCall("get_time", {"tz": "CET"}, id="call_b", arguments_json='{"tz": "CET"}'),
    ]


def _chunks() -> list[Chunk]:
    return [
        Chunk("Hel", raw={"id": "chatcmpl-9"}, model="loopback"),
        Chunk("", thinking="pondering"),
        Chunk("lo"),
        Chunk("", is_final=True, finish_reason="tool_calls", tool_calls=_calls()),
        Chunk("", usage={"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}),
    ]


def test_openai_chunk_content_keeps_id_and_model_and_no_finish() -> None:
    out = openai_chunk(Chunk("Hel", raw={"id": "chatcmpl-9"}, model="loopback"))
    assert out == {
        "id": "chatcmpl-9",
        "model": "loopback",
        "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}],
    }


def test_openai_chunk_thinking_is_reasoning_content() -> None:
    out = openai_chunk(Chunk("", thinking="pondering"))
    assert out == {
        "choices": [
            {"index": 0, "delta": {"reasoning_content": "pondering"}, "finish_reason": None}
        ]
    }


def test_openai_chunk_non_final_never_carries_a_finish_reason() -> None:
    # A parser may keep a reason on a non-final chunk; only the final one may say it.
    out = openai_chunk(Chunk("x", finish_reason="stop", is_final=False))
    assert out["choices"][0]["finish_reason"] is None


def test_openai_chunk_final_with_tool_calls() -> None:
    out = openai_chunk(Chunk("", is_final=True, finish_reason="tool_calls", tool_calls=_calls()))
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["delta"]["tool_calls"]
    assert [c["index"] for c in calls] == [0, 1]
    assert [c["id"] for c in calls] == ["call_a", "call_b"]
    assert all(c["type"] == "function" for c in calls)
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    for call in calls:
        assert isinstance(call["function"]["arguments"], str)
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Oslo"}
    assert calls[1]["function"]["arguments"] == '{"tz": "CET"}'


def test_openai_chunk_final_without_delta_still_has_a_choice() -> None:
    out = openai_chunk(Chunk("", is_final=True, finish_reason="stop"))
    assert out["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]


def test_openai_chunk_usage_only() -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}
    out = openai_chunk(Chunk("", usage=usage))
    assert out == {"choices": [], "usage": usage}
    assert out["usage"] is not usage  # a copy: the chunk is shared by every iterator


def test_openai_chunks_through_ollama_stream_give_each_call_once() -> None:
    stream = OllamaStream("asked-for")
    lines = [stream.delta(openai_chunk(c)) for c in _chunks()]
    lines.append(stream.finish())
    decoded = [json.loads(line) for data in lines for line in data.splitlines()]
    calls = [call for d in decoded for call in d["message"].get("tool_calls", [])]
    assert calls == [
        {
            "id": "call_a",
            "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Oslo"}},
        },
        {"id": "call_b", "function": {"index": 1, "name": "get_time", "arguments": {"tz": "CET"}}},
    ]
    assert "".join(d["message"]["content"] for d in decoded) == "Hello"
    assert [d["message"].get("thinking") for d in decoded if "thinking" in d["message"]] == [
        "pondering"
    ]
    last = decoded[-1]
    assert last["done"] is True
    assert (last["done_reason"], last["prompt_eval_count"], last["eval_count"]) == (
        "tool_calls",
        11,
        6,
    )
    assert {d["model"] for d in decoded} == {"loopback"}  # the upstream named its own
    assert not stream.errored


def _sse_events(data: bytes) -> list[dict[str, Any]]:
    events = []
    for block in data.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))
    return events


def test_openai_chunks_through_anthropic_stream_give_each_call_once() -> None:
    stream = AnthropicStream("asked-for")
    data = b"".join(stream.delta(openai_chunk(c)) for c in _chunks()) + stream.finish()
    events = _sse_events(data)
    tool_starts = [
        e["content_block"]
        for e in events
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]
    assert [(b["id"], b["name"]) for b in tool_starts] == [
        ("call_a", "get_weather"),
        ("call_b", "get_time"),
    ]
    # Each call's input, put back together from its deltas, is whole and sent once.
    by_index: dict[int, str] = {}
    for e in events:
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta":
            by_index[e["index"]] = by_index.get(e["index"], "") + e["delta"]["partial_json"]
    assert [json.loads(v) for v in by_index.values()] == [{"city": "Oslo"}, {"tz": "CET"}]
    text = "".join(
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )
    assert text == "Hello"
    assert events[0]["message"]["id"] == "msg_chatcmpl-9"
    (message_delta,) = [e for e in events if e["type"] == "message_delta"]
    assert message_delta["delta"]["stop_reason"] == "tool_use"
    assert message_delta["usage"] == {
        "input_tokens": 11,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 6,
    }
    assert events[-1] == {"type": "message_stop"}
    assert not stream.errored


# -- Upstream._settings ---------------------------------------------------------


def test_settings_fields_and_extra_body() -> None:
    upstream = Upstream(OpenAICommon(NOWHERE))
    settings = upstream._settings(
        {
            "model": "client-model",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [],
            "tool_choice": "auto",
            "stream": True,
            "temperature": 0.25,
            "max_tokens": 64,
            "stop": ["\n\n"],
            "top_p": None,  # None means "not given": neither a field nor extra
            "response_format": {"type": "json_object"},
            "stream_options": {"include_usage": True},
        }
    )
    assert settings.temperature == 0.25
    assert settings.max_tokens == 64
    assert settings.stop == ("\n\n",)
    assert settings.top_p is None
    assert settings.extra_body == {
        "response_format": {"type": "json_object"},
        "stream_options": {"include_usage": True},
        "model": "client-model",
    }


def test_settings_model_kept_when_backend_has_its_own() -> None:
    upstream = Upstream(OpenAICommon(NOWHERE, model="served-model"))
    settings = upstream._settings({"model": "client-model", "temperature": 0.5})
    assert settings.extra_body is None
    assert settings.temperature == 0.5


@pytest.mark.parametrize("model", ["", None, 7])
def test_settings_no_model_forwarded_when_client_names_none(model: Any) -> None:
    upstream = Upstream(OpenAICommon(NOWHERE))
    assert upstream._settings({"model": model}).extra_body is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", -1), ("max_tokens", 0), ("top_p", 2.0)],
)
def test_settings_invalid_value_names_the_field(field: str, value: Any) -> None:
    upstream = Upstream(OpenAICommon(NOWHERE))
    with pytest.raises(ValueError, match=field):
        upstream._settings({field: value})


def test_settings_wrong_type_is_type_error_naming_the_field() -> None:
    upstream = Upstream(OpenAICommon(NOWHERE))
    with pytest.raises(TypeError, match="temperature"):
        upstream._settings({"temperature": "hot"})


def test_upstream_rejects_what_cannot_stream() -> None:
    with pytest.raises(TypeError, match="object"):
        Upstream(object())


# -- failure status mapping -------------------------------------------------------


def _failed(error_class: str, status: int | None = None, err: str | None = None) -> Response:
    response = Response()
    assert response._settle(error_class=error_class, error_status=status, err=err)
    return response


@pytest.mark.parametrize("status", [400, 404, 413, 422, 429, 503, 529])
def test_client_side_statuses_pass_through(status: int) -> None:
    failure = failure_of(_failed("http", status, f"upstream said {status}"))
    assert (failure.status, failure.message, failure.error_class) == (
        status,
        client_message("http", status),
        "http",
    )
    assert "upstream said" not in failure.message  # the upstream's words stay in the log


@pytest.mark.parametrize("status", [401, 403, 500, 502])
def test_upstream_faults_are_bad_gateway(status: int) -> None:
    assert failure_of(_failed("http", status, "nope")).status == 502


@pytest.mark.parametrize(
    ("error_class", "status"),
    [("timeout", 504), ("connection", 502), ("response", 502), ("unknown", 502)],
)
def test_non_http_failures(error_class: str, status: int) -> None:
    failure = failure_of(_failed(error_class, None, "went wrong"))
    assert (failure.status, failure.error_class) == (status, error_class)


def test_failure_without_message_or_class_has_defaults() -> None:
    response = Response()
    response.error_class = None
    response.err = None
    failure = failure_of(response)
    assert (failure.status, failure.message, failure.error_class) == (
        502,
        "The upstream request failed",
        "unknown",
    )


def test_is_truncation_only_for_a_length_ending() -> None:
    truncated = Response()
    truncated.finish_reason = "length"
    truncated._settle(error_class="response", err="stopped at the token limit")
    assert is_truncation(truncated)

    filtered = Response()
    filtered.finish_reason = "content_filter"
    filtered._settle(error_class="response", err="filtered")
    assert not is_truncation(filtered)

    http_with_length = Response()
    http_with_length.finish_reason = "length"
    http_with_length._settle(error_class="http", error_status=500, err="boom")
    assert not is_truncation(http_with_length)

    ok = Response()
    ok.finish_reason = "length"
    ok._settle()
    assert ok.is_success and not is_truncation(ok)

    cancelled = Response()
    cancelled.finish_reason = "length"
    cancelled.cancel()
    assert cancelled.is_cancelled and not is_truncation(cancelled)


# -- RelayMeter ---------------------------------------------------------------------


def _frame(obj: dict[str, Any]) -> bytes:
    # CRLF line ends and raw UTF-8 so byte splits land inside both.
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\r\n\r\n"


def _relay_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "model": "loopback",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


ANSWER = "Grüße, 18°C ❄"
SSE_BODY = (
    b": keep-alive comment\r\n\r\n"
    + _frame(_relay_chunk({"role": "assistant"}))
    + _frame(_relay_chunk({"content": "Grüße, "}))
    + _frame(_relay_chunk({"content": "18°C ❄"}))
    + _frame(_relay_chunk({}, "stop"))
    + _frame(
        {
            "id": "c1",
            "model": "loopback",
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
        }
    )
    + b"data: [DONE]\r\n\r\n"
)


def _meter(parts: list[bytes], *, event_stream: bool = True) -> tuple[Any, ...]:
    meter = RelayMeter(event_stream=event_stream)
    for part in parts:
        meter.feed(part)
    meter.close()
    return (meter.input_tokens, meter.output_tokens, meter.content_bytes, meter.finished)


def test_relay_meter_whole_stream() -> None:
    meter = RelayMeter(event_stream=True)
    meter.feed(SSE_BODY)
    meter.close()
    assert (meter.input_tokens, meter.output_tokens) == (9, 4)
    assert meter.content_bytes == len(ANSWER.encode("utf-8"))
    assert meter.finished
    assert meter.model == "loopback"


def test_relay_meter_same_counts_at_every_split() -> None:
    expected = (9, 4, len(ANSWER.encode("utf-8")), True)
    for cut in range(len(SSE_BODY) + 1):
        assert _meter([SSE_BODY[:cut], SSE_BODY[cut:]]) == expected, f"split at byte {cut}"
    assert _meter([bytes([b]) for b in SSE_BODY]) == expected


def test_relay_meter_cut_off_stream_is_unfinished() -> None:
    # Cut inside the second text frame: the first counts, the half frame does not.
    cut = SSE_BODY.index("18°C".encode()) + 3
    input_tokens, output_tokens, content_bytes, finished = _meter([SSE_BODY[:cut]])
    assert not finished
    assert (input_tokens, output_tokens) == (None, None)
    assert content_bytes == len("Grüße, ".encode())


def test_relay_meter_unreadable_frame_is_skipped() -> None:
    body = b"data: {not json\r\n\r\n" + SSE_BODY
    assert _meter([body]) == (9, 4, len(ANSWER.encode("utf-8")), True)


def test_relay_meter_whole_json_body() -> None:
    body = json.dumps(
        {
            "id": "c2",
            "object": "chat.completion",
            "model": "loopback",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ANSWER},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        },
        ensure_ascii=False,
    ).encode()
    expected = (3, 5, len(ANSWER.encode("utf-8")), True)
    assert _meter([body], event_stream=False) == expected
    assert _meter([body[:7], body[7:20], body[20:]], event_stream=False) == expected


def test_relay_meter_non_json_body_reads_nothing() -> None:
    assert _meter([b"<html>bad gateway</html>"], event_stream=False) == (None, None, 0, False)


# -- UsageLog -----------------------------------------------------------------------


def _event(request_id: str = "req_1", **fields: Any) -> UsageEvent:
    return UsageEvent(request_id=request_id, face="ollama", route="/api/chat", **fields)


def test_usage_log_path_appends_one_line_per_event(tmp_path: Any) -> None:
    path = tmp_path / "usage.jsonl"
    log = UsageLog(path)
    log.emit(_event("req_1", input_tokens=3, output_tokens=4))
    log.emit(_event("req_2", ok=False, status=502, error_type="http"))
    UsageLog(str(path)).emit(_event("req_3"))  # a second log on the same file appends too
    lines = path.read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["request_id"] for r in records] == ["req_1", "req_2", "req_3"]
    assert (records[0]["input_tokens"], records[0]["output_tokens"]) == (3, 4)
    assert (records[1]["ok"], records[1]["status"], records[1]["error_type"]) == (
        False,
        502,
        "http",
    )
    assert set(records[0]) == set(UsageEvent.__dataclass_fields__)


def test_usage_log_callable_gets_a_dict() -> None:
    seen: list[dict[str, Any]] = []
    UsageLog(seen.append).emit(_event("req_9", model="m"))
    assert len(seen) == 1
    assert seen[0]["request_id"] == "req_9"
    assert seen[0]["model"] == "m"


def test_usage_log_raising_sink_is_swallowed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(record: dict[str, Any]) -> None:
        raise RuntimeError("disk full")

    with caplog.at_level(logging.WARNING, logger="llmchat.proxy"):
        UsageLog(broken).emit(_event("req_broken"))
    assert any("req_broken" in r.getMessage() and r.exc_info for r in caplog.records)


def test_usage_log_none_does_nothing() -> None:
    UsageLog(None).emit(_event())


@pytest.mark.parametrize("target", [42, b"usage.jsonl", ["usage.jsonl"]])
def test_usage_log_bad_target_type(target: Any) -> None:
    with pytest.raises(TypeError, match="usage_log"):
        UsageLog(target)


# -- calling the WSGI app directly ----------------------------------------------------


class _Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = int(status.split()[0])
        self.status_line = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def _call(
    app: Any,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    stream: Any = None,
    content_length: str | None = None,
    extra: dict[str, Any] | None = None,
) -> _Answer:
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ["REQUEST_METHOD"] = method
    environ["PATH_INFO"] = path
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    environ["wsgi.input"] = stream if stream is not None else io.BytesIO(data)
    environ["CONTENT_LENGTH"] = content_length if content_length is not None else str(len(data))
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    environ.update(extra or {})
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, response_headers: list[tuple[str, str]], *_: Any) -> Any:
        started.append((status, response_headers))
        return lambda _data: None

    result = app(environ, start_response)
    try:
        out = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    assert len(started) == 1
    return _Answer(started[0][0], started[0][1], out)


@pytest.fixture
def offline_app() -> Any:
    return make_app(OpenAICommon(NOWHERE))


def test_health_and_root(offline_app: Any) -> None:
    health = _call(offline_app, "GET", "/health")
    assert (health.status, health.json()) == (200, {"status": "ok"})
    assert health.headers["content-type"] == "application/json"

    root = _call(offline_app, "GET", "/")
    assert (root.status, root.body) == (200, b"Ollama is running")
    assert root.headers["content-type"].startswith("text/plain")

    head = _call(offline_app, "HEAD", "/")
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-length"] == str(len(b"Ollama is running"))


def test_not_found_is_shaped_for_the_face_asked(offline_app: Any) -> None:
    ollama = _call(offline_app, "GET", "/api/x")
    assert ollama.status == 404
    assert set(ollama.json()) == {"error"} and isinstance(ollama.json()["error"], str)

    anthropic = _call(offline_app, "POST", "/v1/messages/x")
    assert anthropic.status == 404
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "not_found_error"
    assert isinstance(anthropic.json()["error"]["message"], str)
    assert anthropic.headers["request-id"] == anthropic.headers["x-request-id"]

    openai = _call(offline_app, "GET", "/v1/x")
    assert openai.status == 404
    error = openai.json()["error"]
    assert isinstance(error["message"], str)
    assert (error["type"], error["code"]) == ("invalid_request_error", 404)

    other = _call(offline_app, "GET", "/elsewhere")
    assert other.status == 404 and "message" in other.json()["error"]


def test_wrong_method_is_405(offline_app: Any) -> None:
    answer = _call(offline_app, "GET", "/api/chat")
    assert answer.status == 405
    assert answer.status_line == "405 Method Not Allowed"
    assert "GET" in answer.json()["error"]

    relay = _call(offline_app, "DELETE", "/v1/chat/completions")
    assert relay.status == 405 and relay.json()["error"]["code"] == 405


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"", "needs a JSON object"),
        (b"[1, 2]", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
    ],
)
@pytest.mark.parametrize("path", ["/api/chat", "/v1/messages", "/v1/chat/completions"])
def test_bad_bodies_are_400(offline_app: Any, path: str, body: bytes, says: str) -> None:
    answer = _call(offline_app, "POST", path, body)
    assert answer.status == 400
    assert says in answer.body.decode()


def test_non_numeric_content_length_is_400(offline_app: Any) -> None:
    answer = _call(offline_app, "POST", "/api/chat", b"{}", content_length="ten")
    assert answer.status == 400


class _Untouchable(io.RawIOBase):
    """A request body that fails the test if anyone reads it."""

    def read(self, *args: Any) -> bytes:  # type: ignore[override]
        raise AssertionError("the body was read")

    readline = readlines = read  # type: ignore[assignment]


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate", "/v1/messages"])
def test_oversized_content_length_is_413_unread(path: str) -> None:
    app = make_app(OpenAICommon(NOWHERE), max_body_bytes=100)
    answer = _call(app, "POST", path, stream=_Untouchable(), content_length="101")
    assert answer.status == 413
    assert "100 bytes" in answer.body.decode()


def test_oversized_relay_body_is_413_unread() -> None:
    app = make_app(OpenAICommon(NOWHERE), max_body_bytes=100)
    answer = _call(
        app, "POST", "/v1/chat/completions", stream=_Untouchable(), content_length="5000000"
    )
    assert answer.status == 413
    assert answer.json()["error"]["code"] == 413


def test_chunked_body_over_the_limit_is_413() -> None:
    app = make_app(OpenAICommon(NOWHERE), max_body_bytes=100)
    answer = _call(
        app,
        "POST",
        "/api/chat",
        stream=io.BytesIO(b"{" + b" " * 200 + b"}"),
        content_length="",
        headers={"Transfer-Encoding": "chunked"},
        extra={"wsgi.input_terminated": True},  # a server that de-chunks (gunicorn)
    )
    assert answer.status == 413


def test_chunked_body_under_a_server_that_cannot_end_it_is_411() -> None:
    class Unreadable(io.RawIOBase):
        def read(self, size: int = -1) -> bytes:
            raise AssertionError("the body must not be read: wsgiref would block here")

    app = make_app(OpenAICommon(NOWHERE))
    answer = _call(
        app,
        "POST",
        "/api/chat",
        stream=Unreadable(),
        content_length="",
        headers={"Transfer-Encoding": "chunked"},
    )
    assert answer.status == 411


GENERATED_ID = re.compile(r"req_[0-9a-f]{32}")


@pytest.mark.parametrize("given", ["trace-1", "a.b:c_d-E9", "x" * 128])
def test_well_formed_request_id_is_echoed(offline_app: Any, given: str) -> None:
    answer = _call(offline_app, "GET", "/health", headers={"X-Request-Id": given})
    assert answer.headers["x-request-id"] == given


@pytest.mark.parametrize(
    "given",
    [
        "abc def",
        "abc\r\nSet-Cookie: x=1",
        "abc\n",
        "x" * 129,
        "",
        "naïve",
        "a/b",
    ],
)
def test_malformed_request_id_is_replaced(offline_app: Any, given: str) -> None:
    answer = _call(offline_app, "GET", "/health", headers={"X-Request-Id": given})
    assert GENERATED_ID.fullmatch(answer.headers["x-request-id"])
    assert all("\n" not in v and "\r" not in v for v in answer.headers.values())


def test_generated_request_ids_differ(offline_app: Any) -> None:
    ids = {_call(offline_app, "GET", "/health").headers["x-request-id"] for _ in range(5)}
    assert len(ids) == 5


# -- secrets never leak ---------------------------------------------------------------


UPSTREAM_KEY = "sk-secret-123"
PROXY_KEY = "proxy-key"


@pytest.fixture
def upstream_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder("Bonjour from upstream.", chunk_size=5))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_no_secret_reaches_log_responses_or_repr(
    tmp_path: Any, upstream_server: ScriptedServer
) -> None:
    log_path = tmp_path / "usage.jsonl"
    app = make_app(
        OpenAICommon(upstream_server.url, api_key=UPSTREAM_KEY),
        usage_log=log_path,
        api_key=PROXY_KEY,
    )
    bearer = {"Authorization": f"Bearer {PROXY_KEY}"}
    messages = [{"role": "user", "content": "Hi"}]
    answers = [
        _call(
            app,
            "POST",
            "/api/chat",
            {"model": "m", "messages": messages, "stream": False},
            headers=bearer,
        ),
        _call(app, "POST", "/api/chat", {"model": "m", "messages": messages}, headers=bearer),
        _call(
            app,
            "POST",
            "/v1/messages",
            {"model": "m", "max_tokens": 20, "messages": messages},
            headers={"x-api-key": PROXY_KEY},
        ),
        _call(
            app,
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": messages, "stream": True},
            headers=bearer,
        ),
        _call(app, "GET", "/api/tags", headers=bearer),
        _call(app, "GET", "/api/tags", headers={"Authorization": "Bearer wrong"}),
        _call(app, "GET", "/api/tags"),
    ]
    assert [a.status for a in answers] == [200, 200, 200, 200, 200, 401, 401]
    assert answers[0].json()["message"]["content"] == "Bonjour from upstream."
    assert b'"content":"Bonjo"' in answers[1].body  # streamed in 5-character pieces
    assert b'"content":"Bonjo"' in answers[3].body
    assert answers[2].json()["content"][0]["text"] == "Bonjour from upstream."

    records = [json.loads(line) for line in log_path.read_bytes().splitlines()]
    assert len(records) == len(answers)  # one event per request, streams included
    assert [r["status"] for r in records] == [a.status for a in answers]
    assert [r["request_id"] for r in records] == [a.headers["x-request-id"] for a in answers]
    assert [r["face"] for r in records] == ["ollama"] * 2 + ["anthropic", "openai"] + ["ollama"] * 3
    assert all(r["content_bytes"] == len(b"Bonjour from upstream.") for r in records[:4])

    everything = [log_path.read_bytes(), repr(app).encode()]
    for answer in answers:
        everything.append(answer.body)
        everything.extend(f"{k}: {v}".encode() for k, v in answer.headers.items())
    for secret in (UPSTREAM_KEY, PROXY_KEY):
        assert not any(secret.encode() in blob for blob in everything), secret

    # The upstream key was really in play, and the client's proxy key stayed here.
    seen = upstream_server.requests
    assert seen and all(r.headers.get("authorization") == f"Bearer {UPSTREAM_KEY}" for r in seen)
    assert not any(PROXY_KEY.encode() in r.raw for r in seen)


# -- HangupWatch ----------------------------------------------------------------------


class _Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.called = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.called.set()


def _watch_threads() -> int:
    return sum(t.name == "llmchat-proxy-hangup" for t in threading.enumerate())


def test_hangup_fires_once_when_the_peer_closes() -> None:
    ours, theirs = socket.socketpair()
    counter = _Counter()
    watch = HangupWatch(ours, counter).start()
    try:
        assert not watch.hung_up.is_set()
        theirs.close()
        assert counter.called.wait(WAIT)
        assert watch.hung_up.is_set()
    finally:
        watch.stop()
        ours.close()
    watch.stop()  # a second stop is harmless
    assert counter.calls == 1


def test_stop_without_hangup_is_prompt_and_silent() -> None:
    ours, theirs = socket.socketpair()
    counter = _Counter()
    watch = HangupWatch(ours, counter).start()
    assert watch.watching
    stopper = threading.Thread(target=watch.stop)
    stopper.start()
    stopper.join(WAIT)
    assert not stopper.is_alive(), "stop() did not return"
    theirs.close()  # after stop: nobody is watching any more
    ours.close()
    assert not watch.hung_up.is_set()
    assert counter.calls == 0


def test_no_socket_no_thread() -> None:
    before = _watch_threads()
    counter = _Counter()
    watch = HangupWatch(None, counter).start()
    assert not watch.watching and watch.ended.is_set() and _watch_threads() == before
    watch.stop()

    closed, other = socket.socketpair()
    closed.close()
    other.close()
    watch = HangupWatch(closed, counter).start()
    assert not watch.watching and _watch_threads() == before
    watch.stop()
    assert counter.calls == 0


def test_pipelined_data_is_not_a_hangup() -> None:
    ours, theirs = socket.socketpair()
    counter = _Counter()
    watch = HangupWatch(ours, counter).start()
    assert watch.watching
    try:
        theirs.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        # The watcher lets go once it sees data it must not consume.
        assert watch.ended.wait(WAIT) and not watch.watching
        assert not watch.hung_up.is_set()
        assert counter.calls == 0
        # Only peeked at: the next request is still there for the server to read.
        assert ours.recv(100) == b"GET /health HTTP/1.1\r\n\r\n"
    finally:
        watch.stop()
        theirs.close()
        ours.close()
    assert counter.calls == 0


def test_raising_hangup_callback_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ours, theirs = socket.socketpair()
    called = threading.Event()

    def boom() -> None:
        called.set()
        raise RuntimeError("cancel failed")

    with caplog.at_level(logging.WARNING, logger="llmchat.proxy"):
        watch = HangupWatch(ours, boom).start()
        theirs.close()
        assert called.wait(WAIT)
        watch.stop()  # waits for a callback under way, so its log record is in
    ours.close()
    assert watch.hung_up.is_set()
    assert any("hang-up callback raised" in r.getMessage() for r in caplog.records)


def test_every_watch_shares_one_thread_and_fires_only_for_its_own_socket() -> None:
    pairs = [socket.socketpair() for _ in range(20)]
    counters = [_Counter() for _ in pairs]
    watches = [HangupWatch(ours, c).start() for (ours, _), c in zip(pairs, counters, strict=True)]
    try:
        assert _watch_threads() == 1
        for _, theirs in pairs[::2]:
            theirs.close()
        for counter in counters[::2]:
            assert counter.called.wait(WAIT)
        for watch in watches[::2]:
            assert watch.ended.wait(WAIT)
        assert all(w.watching and not w.hung_up.is_set() for w in watches[1::2])
    finally:
        for watch in watches:
            watch.stop()
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
    assert [c.calls for c in counters] == [1, 0] * 10


def test_a_socket_closed_while_watched_does_not_block_its_descriptors_next_owner() -> None:
    ours, theirs = socket.socketpair()
    forgotten = HangupWatch(ours, _Counter()).start()
    number = ours.fileno()
    ours.close()  # closed without stop(): its registration is stale
    theirs.close()
    reused = [socket.socketpair() for _ in range(4)]
    mine = next(((a, b) for a, b in reused if a.fileno() == number), None)
    try:
        # POSIX hands out the lowest free descriptor number: the closed one.
        assert mine is not None, (number, [a.fileno() for a, _ in reused])
        counter = _Counter()
        watch = HangupWatch(mine[0], counter).start()
        assert watch.watching
        mine[1].close()
        assert counter.called.wait(WAIT) and watch.hung_up.is_set()
        watch.stop()
    finally:
        forgotten.stop()
        for a, b in reused:
            a.close()
            b.close()


@pytest.mark.parametrize(
    "path",
    [
        "/api/chat",
        "/v1/messages",
        "/v1/chat/completions",
    ],
)
def test_hang_up_in_prefill_cancels_upstream_on_every_face(path: str) -> None:
    release = threading.Event()
    frames = [_relay_chunk({"content": "late"}), _relay_chunk({}, "stop")]
    server = ScriptedServer([Reply.sse(frames, before_headers=[WaitFor(release, 30)])])
    server.start()
    ours, theirs = socket.socketpair()
    body = json.dumps(
        {
            "model": "m",
            "stream": True,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ.update(
        REQUEST_METHOD="POST",
        PATH_INFO=path,
        CONTENT_LENGTH=str(len(body)),
        **{"wsgi.input": io.BytesIO(body), "llmchat.client_socket": ours},
    )
    events: list[dict[str, Any]] = []
    app = make_app(OpenAICommon(server.url), usage_log=events.append)

    def serve() -> None:
        result = app(environ, lambda *_: None)
        try:
            b"".join(result)
        finally:
            getattr(result, "close", lambda: None)()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        assert server.wait_for_requests(1, WAIT)
        theirs.close()  # the client gives up while the upstream is still in prefill
        disconnected = server.requests[0].disconnected.wait(3.0)
    finally:
        release.set()
        worker.join(WAIT)
        server.stop()
        ours.close()
    assert disconnected, "the upstream kept generating for a client that was gone"
    assert server.requests[0].headers_sent_at is None
    assert [e["status"] for e in events] == [499]


# -- make_app argument checks ---------------------------------------------------------


@pytest.mark.parametrize("api_key", ["", 123, b"key"])
def test_make_app_bad_api_key(api_key: Any) -> None:
    with pytest.raises(TypeError, match="api_key"):
        make_app(OpenAICommon(NOWHERE), api_key=api_key)


@pytest.mark.parametrize("limit", [0, -1])
def test_make_app_body_limit_below_one(limit: int) -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        make_app(OpenAICommon(NOWHERE), max_body_bytes=limit)


@pytest.mark.parametrize("limit", [True, 1.5, "100"])
def test_make_app_body_limit_wrong_type(limit: Any) -> None:
    with pytest.raises(TypeError, match="max_body_bytes"):
        make_app(OpenAICommon(NOWHERE), max_body_bytes=limit)


def test_make_app_bad_upstream_and_usage_log() -> None:
    with pytest.raises(TypeError, match="upstream"):
        make_app("http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match="usage_log"):
        make_app(OpenAICommon(NOWHERE), usage_log=42)


# -- the CLI ---------------------------------------------------------------------


def test_cli_proxy_without_upstream_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LLMCHAT_API_URL", raising=False)
    assert main(["proxy"]) == 2
    assert "--upstream" in capsys.readouterr().err


def test_cli_proxy_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["proxy", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "--upstream" in out and "--usage-log" in out
