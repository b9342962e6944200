"""`Anthropic` over real sockets: endings, faults, cancels, errors, secrets, the tool round trip.

The loopback `ScriptedServer` plays literal Anthropic bytes; nothing sleeps
(waits are on events with timeouts).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from llmchat.backends.anthropic import Anthropic
from llmchat.redact import Redactor
from llmchat.testing import Drop, RecordedRequest, Reply, ScriptedServer, Stall, Write
from llmchat.toolloop import ToolLoop
from llmchat.tools import ToolCall
from llmchat.wirelog import ENV_VAR

from ..support.anthropic import message_events, sse, sse_reply

HI = [{"role": "user", "content": "Hi"}]
WAIT = 10.0
KEY = "sk-ant-api03/Zx9Qw+SECRETSECRET_7"
MARKER = "SECRETSECRET"
CLOSED = "Stream closed without [DONE] or a finish reason"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def message(content: list[dict[str, Any]], reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 5},
    }


TEXT = message([{"type": "text", "text": "Hello there"}])


def backend(server: ScriptedServer, **kwargs: Any) -> Anthropic:
    kwargs.setdefault("api_key", KEY)
    return Anthropic(server.url, model="claude-x", **kwargs)


# -- the request on the wire --------------------------------------------------------------


def test_the_request_reaches_messages_with_anthropic_headers(server: ScriptedServer) -> None:
    server.push(Reply.json(TEXT))
    response = backend(server).chat_completion(HI)
    assert response.is_success and response.msg == "Hello there"
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in {k.lower() for k in request.headers}
    assert request.json() == {"model": "claude-x", "max_tokens": 4096, "messages": HI}


def test_a_bearer_key_for_llama_server(server: ScriptedServer) -> None:
    server.push(Reply.json(TEXT))
    backend(server, auth="bearer").chat_completion(HI)
    headers = server.requests[0].headers
    assert headers["Authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers


# -- endings ---------------------------------------------------------------------------------


def test_a_stream_reads_text_usage_and_ends_at_message_stop(server: ScriptedServer) -> None:
    server.push(sse_reply(sse(message_events(TEXT, pieces=3))))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.msg, response.finish_reason) == (
        True,
        "Hello there",
        "stop",
    )
    assert response.provider_finish_reason == "end_turn"
    assert (response.prompt_tokens, response.completion_tokens, response.total_tokens) == (
        10,
        5,
        15,
    )
    assert (response.cached_tokens, response.model, response.id) == (3, "claude-x", "msg_1")


def test_message_stop_ends_the_stream_even_if_the_server_keeps_the_connection(
    server: ScriptedServer,
) -> None:
    body = sse(message_events(TEXT))
    server.push(
        Reply(
            headers={"Content-Type": "text/event-stream"},
            framing="chunked",
            steps=[Write(body), Stall()],
        )
    )
    response = backend(server, stream_finish_grace=30).chat_completion_stream(HI).wait(WAIT)
    assert response.is_success and response.msg == "Hello there"


def test_eof_after_message_delta_without_message_stop_is_a_success(server: ScriptedServer) -> None:
    events = message_events(TEXT)[:-1]
    server.push(sse_reply(sse(events), framing="close"))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert response.is_success and response.finish_reason == "stop"


def test_a_stream_cut_before_the_end_fails_and_keeps_the_text(server: ScriptedServer) -> None:
    events = message_events(message([{"type": "text", "text": "partial answer"}]), pieces=2)
    head = sse(events[:3])  # message_start, block start, the first text piece
    server.push(
        Reply(
            headers={"Content-Type": "text/event-stream"},
            framing="chunked",
            steps=[Write(head), Drop()],
        )
    )
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.error_class, response.err) == (False, "response", CLOSED)
    assert response.msg == "partial"  # the first of two pieces


def test_a_stream_that_closes_cleanly_without_a_stop_reason_fails(server: ScriptedServer) -> None:
    events = message_events(TEXT)[:-2]
    server.push(sse_reply(sse(events), framing="close"))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.error_class, response.err, response.msg) == ("response", CLOSED, "Hello there")


def test_an_error_event_fails_with_the_provider_message(server: ScriptedServer) -> None:
    events = message_events(TEXT)[:4]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.push(sse_reply(sse([*events, error]), framing="close"))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.error_class, response.err) == (
        False,
        "response",
        "Overloaded",
    )
    assert response.msg == "Hello there"


def test_pings_add_nothing(server: ScriptedServer) -> None:
    events = message_events(TEXT)
    with_pings = [events[0], {"type": "ping"}, *events[1:3], {"type": "ping"}, *events[3:]]
    server.push(sse_reply(sse(with_pings)))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert response.is_success and response.msg == "Hello there"
    assert [c.content for c in response if c.content] == ["Hello ", "there"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (401, "authentication_error"), (529, "overloaded_error")],
)
def test_an_error_status_is_an_http_failure_with_the_message(
    server: ScriptedServer, stream: bool, status: int, kind: str
) -> None:
    body = {
        "type": "error",
        "error": {"type": kind, "message": f"{kind} happened"},
        "request_id": "req_1",
    }
    server.push(Reply.json(body, status))
    b = backend(server)
    response = b.chat_completion_stream(HI).wait(WAIT) if stream else b.chat_completion(HI)
    assert (response.error_class, response.error_status, response.err) == (
        "http",
        status,
        f"{kind} happened",
    )


@pytest.mark.parametrize("reason", ["max_tokens", "model_context_window_exceeded"])
def test_length_reasons_fail_as_length(server: ScriptedServer, reason: str) -> None:
    server.push(Reply.json(message([{"type": "text", "text": "cut"}], reason)))
    response = backend(server).chat_completion(HI)
    assert (response.is_success, response.finish_reason, response.err) == (
        False,
        "length",
        "Hit max tokens",
    )
    assert response.provider_finish_reason == reason and response.msg == "cut"


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_during_prefill_closes_the_socket(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = backend(server).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert response.is_done and response.is_cancelled and response.error_class is None
    assert server.requests[0].disconnected.wait(5), "the server never saw the hang-up"
    assert server.requests[0].headers_sent_at is None


def test_cancel_mid_stream_keeps_the_text(server: ScriptedServer) -> None:
    head = sse(message_events(TEXT, pieces=1)[:3])
    server.push(
        Reply(
            headers={"Content-Type": "text/event-stream"},
            framing="chunked",
            steps=[Write(head), Stall()],
        )
    )
    response = backend(server).chat_completion_stream(HI)
    assert next(c.content for c in response if c.content) == "Hello there"
    response.cancel()
    assert response.is_cancelled and response.msg == "Hello there"
    assert server.requests[0].disconnected.wait(5)


# -- the tool round trip ----------------------------------------------------------------------

THINKING = {"type": "thinking", "thinking": "Need weather.", "signature": "c2lnbmF0dXJl"}
CALL = {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Paris"}}


@pytest.mark.parametrize("stream", [False, True])
def test_to_message_and_a_tool_result_build_the_next_request(
    server: ScriptedServer, stream: bool
) -> None:
    answer = message([THINKING, {"type": "text", "text": "Checking."}, CALL], "tool_use")
    server.push(sse_reply(sse(message_events(answer))) if stream else Reply.json(answer))
    b = backend(server)
    response = (
        b.chat_completion_stream(HI, [WEATHER]).wait(WAIT)
        if stream
        else b.chat_completion(HI, [WEATHER])
    )
    assert response.is_success and response.tool_calls == [
        ToolCall("get_weather", {"city": "Paris"}, "toolu_9")
    ]
    turn = response.to_message()
    assert turn.reasoning_parts == [{"dialect": "anthropic", **THINKING}]
    conversation = [*HI, turn, {"role": "tool", "tool_call_id": "toolu_9", "content": "18C"}]
    sent = json.loads(b.prepare_chat_request(conversation, [WEATHER]).data)
    assert sent["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [THINKING, {"type": "text", "text": "Checking."}, CALL]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "18C"}],
        },
    ]


def test_a_tool_loop_sends_the_thinking_block_back(server: ScriptedServer) -> None:
    first = message([THINKING, CALL], "tool_use")
    final = message([{"type": "text", "text": "It is 18C."}])
    server.set_script([Reply.json(first), Reply.json(final)])
    loop = ToolLoop(backend(server), [WEATHER], lambda call: "18C")
    response = loop.run(HI)
    assert response.is_success and response.msg == "It is 18C."
    second = server.requests[1].json()
    assert second["messages"][1] == {"role": "assistant", "content": [THINKING, CALL]}
    assert second["messages"][2]["content"][0]["tool_use_id"] == "toolu_9"


# -- probe ------------------------------------------------------------------------------------


def test_probe_reads_llama_server_props_at_the_root(server: ScriptedServer) -> None:
    def script(request: RecordedRequest) -> Reply:
        if request.path == "/props":
            return Reply.json({"default_generation_settings": {"n_ctx": 1024}, "total_slots": 2})
        return Reply(404)

    server.set_script(script)
    assert backend(server).probe_server_limits() == {
        "source": "llama.cpp",
        "context_length": 1024,
        "slots": 2,
    }
    assert server.requests[0].headers["x-api-key"] == KEY


def test_probe_never_raises_against_a_server_without_props(server: ScriptedServer) -> None:
    body = {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}
    server.set_script(Reply.json(body, 404))
    result = backend(server).probe_server_limits()
    assert result == {"source": "llama.cpp", "note": "GET /props answered HTTP 404"}
    refused = Anthropic("http://127.0.0.1:9/v1", api_key=KEY, server_probe_timeout=2.0)
    assert "note" in refused.probe_server_limits()


# -- the key never leaks -----------------------------------------------------------------------

FORMS = Redactor.of([KEY]).forms


def leaks(text: str) -> list[str]:
    found = [form for form in FORMS if form in text]
    return found or ([MARKER] if MARKER in text else [])


ECHOES = {
    "401-body": Reply.json(
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"},
        },
        401,
    ),
    "error-event": sse_reply(
        sse(
            [
                *message_events(TEXT)[:3],
                {"type": "error", "error": {"type": "api_error", "message": f"bad {KEY}"}},
            ]
        )
    ),
    "header": Reply.json(TEXT, headers={"X-Debug": f"x-api-key: {KEY}"}),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("echo", list(ECHOES))
def test_the_key_never_leaks(
    server: ScriptedServer,
    echo: str,
    stream: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = tmp_path / "wire.log"
    monkeypatch.setenv(ENV_VAR, str(wire))
    caplog.set_level(logging.DEBUG, logger="llmchat")
    server.set_script(ECHOES[echo])
    b = backend(server)
    response = b.chat_completion_stream(HI).wait(WAIT) if stream else b.chat_completion(HI)
    assert response.is_done
    outputs = {
        "err": response.err or "",
        "repr(response)": repr(response),
        "repr(backend)": repr(b),
        "repr(WireRequest)": repr(b.prepare_chat_request(HI)),
        "logs": caplog.text + "".join(r.getMessage() for r in caplog.records),
        "wire log": wire.read_text(encoding="utf-8") if wire.exists() else "",
    }
    if response.error_class is not None:
        with pytest.raises(Exception) as info:
            response.raise_for_error()
        outputs["raise_for_error"] = f"{info.value} {info.value!r}"
    for name, text in outputs.items():
        assert not leaks(text), f"{name} leaks the key: {text!r}"
    assert (response.error_class is None) == (echo == "header")
    assert KEY in b._secrets()
