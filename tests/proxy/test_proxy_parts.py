"""The proxy's pieces on their own: chunk shaping, settings, status mapping, the relay
meter, usage events, make_app's argument checks and the CLI's.

The WSGI app called directly is test_proxy_app.py's, the hang-up watcher
server/test_hangup.py's; test_proxy.py drives the whole proxy with real clients over real sockets;
these pin down each part's contract so a failure there points at one piece.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from llmchat import Chunk, OpenAICommon, Response, ToolCall
from llmchat.cli import main
from llmchat.protocols.anthropic import AnthropicStream
from llmchat.protocols.ollama import OllamaStream
from llmchat.proxy import make_app
from llmchat.proxy.faces.openai.relay_meter import RelayMeter
from llmchat.proxy.upstream import (
    Upstream,
    client_message,
    failure_of,
    is_truncation,
    openai_chunk,
)
from llmchat.proxy.usage import UsageEvent, UsageLog

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
