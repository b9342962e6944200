"""The Gemini backend over real sockets (and the MockTransport): endings, cancel, keys, probe."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from llmchat.backends.gemini import Gemini
from llmchat.pipeline.judge import ERR_STREAM_CLOSED as CLOSED
from llmchat.testing import Drop, Reply, ScriptedServer, Stall, Write
from llmchat.transport.mock import MockTransport
from llmchat.transport.mock_script import MockRequest, MockResponse
from llmchat.wirelog import ENV_VAR

HI = [{"role": "user", "content": "Hi"}]
KEY = "AIza/Secret+KEY_0123456789"
WAIT = 10.0


def event(*parts: dict[str, Any], finish: str | None = None, **top: Any) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return b"data: " + json.dumps({"candidates": [candidate], **top}).encode() + b"\n\n"


def sse(*steps: Any) -> Reply:
    return Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=list(steps))


def gemini(server: ScriptedServer, **kwargs: Any) -> Gemini:
    return Gemini(server.url, api_key=KEY, model="gemini-test", **kwargs)


def test_stream_then_clean_eof_after_the_finish_is_success(server: ScriptedServer) -> None:
    usage = {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    server.push(
        sse(
            Write(event({"text": "Hel"}, modelVersion="g-1", responseId="r-1")),
            Write(event({"text": "lo"}, finish="STOP", usageMetadata=usage)),
        )
    )
    response = gemini(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.msg, response.finish_reason) == (True, "Hello", "stop")
    assert (response.prompt_tokens, response.completion_tokens, response.total_tokens) == (3, 2, 5)
    assert (response.model, response.id) == ("g-1", "r-1")


def test_request_goes_to_the_model_url_with_the_key_header(server: ScriptedServer) -> None:
    server.push(sse(Write(event({"text": "x"}, finish="STOP"))))
    assert gemini(server).chat_completion_stream(HI).wait(WAIT).is_success
    request = server.requests[-1]
    assert request.path == "/v1/models/gemini-test:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
    assert KEY not in request.path


def test_stream_cut_before_the_finish_is_stream_closed_with_text_kept(
    server: ScriptedServer,
) -> None:
    server.push(sse(Write(event({"text": "partial "})), Write(event({"text": "text"})), Drop()))
    response = gemini(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.error_class) == (False, "response")
    assert response.err == CLOSED
    assert response.latest == "partial text"


def test_clean_eof_before_the_finish_is_stream_closed(server: ScriptedServer) -> None:
    server.push(
        Reply(
            200,
            {"Content-Type": "text/event-stream"},
            framing="close",
            steps=[Write(event({"text": "so"}))],
        )
    )
    response = gemini(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.error_class, response.err, response.latest) == ("response", CLOSED, "so")


def test_cancel_during_prefill_closes_the_socket(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = gemini(server).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert response.is_done and response.is_cancelled
    assert server.requests[0].disconnected.wait(5), "the server never saw the hang-up"
    assert server.requests[0].headers_sent_at is None


@pytest.mark.parametrize("stream", [False, True])
def test_error_status_is_an_http_failure_with_googles_message(
    server: ScriptedServer, stream: bool
) -> None:
    body = {"error": {"code": 403, "message": "Permission denied", "status": "PERMISSION_DENIED"}}
    server.push(Reply.json(body, 403))
    backend = gemini(server)
    response = (
        backend.chat_completion_stream(HI).wait(WAIT) if stream else backend.chat_completion(HI)
    )
    assert (response.error_class, response.error_status, response.err) == (
        "http",
        403,
        "Permission denied",
    )


def test_error_event_mid_stream_fails_with_its_message(server: ScriptedServer) -> None:
    error = b'data: {"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}\n\n'
    server.push(sse(Write(event({"text": "so far"})), Write(error)))
    response = gemini(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.error_class, response.err, response.latest) == (
        "response",
        "Internal error",
        "so far",
    )


def test_a_json_array_answer_to_a_stream_is_read_whole(server: ScriptedServer) -> None:
    items = [
        {"candidates": [{"content": {"parts": [{"text": "a"}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "MAX_TOKENS"}]},
    ]
    server.push(Reply.json(items))
    response = gemini(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.msg, response.finish_reason, response.err) == (
        "ab",
        "length",
        "Hit max tokens",
    )


def test_the_key_is_in_no_output(
    server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = tmp_path / "wire.log"
    monkeypatch.setenv(ENV_VAR, str(wire))
    caplog.set_level(logging.DEBUG, logger="llmchat")
    message = f"API key not valid: {KEY}"
    server.push(
        Reply.json({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, 400)
    )
    server.push(
        sse(
            Write(event({"text": "x"})),
            Write(f'data: {{"error": {{"message": "bad {KEY}"}}}}\n\n'.encode()),
        )
    )
    backend = gemini(server)
    blocking = backend.chat_completion(HI)
    streamed = backend.chat_completion_stream(HI).wait(WAIT)
    outputs = [
        blocking.err or "",
        streamed.err or "",
        repr(blocking),
        repr(backend),
        repr(backend.prepare_chat_request(HI)),
        caplog.text,
        wire.read_text(encoding="utf-8"),
    ]
    for response in (blocking, streamed):
        with pytest.raises(Exception) as info:
            response.raise_for_error()
        outputs += [str(info.value), repr(info.value)]
    assert blocking.error_class == "http" and streamed.error_class == "response"
    for text in outputs:
        assert "Secret+KEY" not in text and "Secret%2BKEY" not in text, text


def test_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    assert Gemini(model="m").api_key == "g-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gem-key")
    assert Gemini(model="m").api_key == "gem-key"
    assert Gemini(model="m", api_key="given").api_key == "given"
    with pytest.raises(ValueError, match="GEMINI_API_KEY"):
        monkeypatch.setenv("GEMINI_API_KEY", "bad\n")
        Gemini(model="m")


def test_probe_reads_the_model_limits(server: ScriptedServer) -> None:
    server.push(
        Reply.json(
            {"name": "models/gemini-test", "inputTokenLimit": 1048576, "outputTokenLimit": 65536}
        )
    )
    assert gemini(server).probe_server_limits() == {
        "source": "gemini",
        "context_length": 1048576,
        "max_output_tokens": 65536,
    }
    request = server.requests[-1]
    assert (request.method, request.path) == ("GET", "/v1/models/gemini-test")
    assert request.headers["x-goog-api-key"] == KEY


def test_probe_never_raises(server: ScriptedServer) -> None:
    server.push(Reply.json({"error": {"message": "nope"}}, 404))
    assert gemini(server).probe_server_limits() == {
        "source": "gemini",
        "note": "GET model answered HTTP 404",
    }
    server.push(Reply.json({"name": "x"}))
    assert "note" in gemini(server).probe_server_limits()
    assert "model" in Gemini(server.url, api_key=KEY).probe_server_limits()["note"]


def test_a_tool_loop_round_trips_calls_and_signatures() -> None:
    """`to_message()` of a call, then its result, builds a valid next request (MockTransport)."""
    seen: list[Any] = []

    def handler(request: MockRequest) -> MockResponse:
        seen.append(request.json)
        if len(seen) == 1:
            part = {
                "functionCall": {"name": "add", "args": {"a": 1, "b": 2}},
                "thoughtSignature": "SIG",
            }
            body = {
                "candidates": [
                    {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}
                ]
            }
        else:
            body = {"candidates": [{"content": {"parts": [{"text": "3"}]}, "finishReason": "STOP"}]}
        return MockResponse(200, {"Content-Type": "application/json"}, json.dumps(body))

    backend = Gemini(
        "http://gemini.test/v1beta", api_key=KEY, model="m", transport=MockTransport(handler)
    )
    first = backend.chat_completion(HI, tools=[{"type": "function", "function": {"name": "add"}}])
    assert (first.finish_reason, [c.name for c in first.tool_calls]) == ("tool_calls", ["add"])
    history = [
        *HI,
        first.to_message(),
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "3"},
    ]
    second = backend.chat_completion(history)
    assert second.is_success and second.msg == "3"
    assert seen[1]["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "add", "args": {"a": 1, "b": 2}},
                    "thoughtSignature": "SIG",
                }
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "add", "response": {"result": "3"}}}],
        },
    ]
