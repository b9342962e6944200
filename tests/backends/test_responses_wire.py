"""OpenAIResponses over real sockets: endings, cancels, error statuses, the key kept secret.

The loopback `ScriptedServer` plays literal Responses-API bytes (and misbehaviour);
the server side is asserted too (when the client hung up). Waits are on events.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from llmchat import Settings
from llmchat.backends.responses import OpenAIResponses
from llmchat.redact import Redactor
from llmchat.testing import Drop, RecordedRequest, Reply, ScriptedServer, Stall, Write
from llmchat.wirelog import ENV_VAR

HI = [{"role": "user", "content": "Hi"}]
CLOSED = "Stream closed without [DONE] or a finish reason"
KEY = "sk-proj/Zx9Qw+SECRETSECRET_7"
MARKER = "SECRETSECRET"
WAIT = 10.0


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def text_delta(text: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "item_id": "msg_1", "delta": text}


def completed(text: str, status: str = "completed", **extra: Any) -> dict[str, Any]:
    output = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    ]
    response = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": status,
        "output": output,
    }
    return {"type": f"response.{status}", "response": {**response, **extra}}


def stream_reply(*steps: Any) -> Reply:
    return Reply(
        headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=list(steps)
    )


def backend(server: ScriptedServer, **kw: Any) -> OpenAIResponses:
    return OpenAIResponses(server.url, api_key=kw.pop("api_key", "sk-test"), **kw)


def test_a_stream_posts_to_responses_and_ends_on_completed(server: ScriptedServer) -> None:
    server.push(
        stream_reply(Write(sse(text_delta("Hel"), text_delta("lo"), completed("Hello"))), Stall())
    )
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    # response.completed is the end: the reader stops there, though the body stays open.
    assert response.is_success and response.msg == "Hello" and response.finish_reason == "stop"
    request = server.requests[0]
    assert request.path.endswith("/responses") and request.json()["stream"] is True
    assert request.headers["Authorization"] == "Bearer sk-test"


def test_a_stream_cut_before_the_end_is_the_stream_closed_failure(server: ScriptedServer) -> None:
    server.push(stream_reply(Write(sse(text_delta("partial"))), Drop()))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.error_class, response.err) == (False, "response", CLOSED)
    assert response.latest == "partial"


def test_a_stream_closed_cleanly_before_the_end_is_the_same_failure(server: ScriptedServer) -> None:
    server.push(stream_reply(Write(sse(text_delta("partial")))))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.error_class, response.err, response.latest) == ("response", CLOSED, "partial")


def test_cancel_during_prefill_closes_the_socket(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = backend(server).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert response.is_done and response.is_cancelled and response.err == "Cancelled by user"
    assert server.requests[0].disconnected.wait(5), "the server never saw the hang-up"
    assert server.requests[0].headers_sent_at is None  # it was still in prefill


def test_cancel_mid_stream_keeps_the_text(server: ScriptedServer) -> None:
    server.push(stream_reply(Write(sse(text_delta("so far"))), Stall()))
    response = backend(server).chat_completion_stream(HI)
    assert next(iter(response)).content == "so far"
    response.cancel()
    assert response.is_cancelled and response.latest == "so far"
    assert server.requests[0].disconnected.wait(5)


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "stream"])
def test_an_error_status_is_an_http_failure_with_the_message(
    server: ScriptedServer, stream: bool
) -> None:
    error = {
        "error": {"code": 400, "message": "llama.cpp does not support 'previous_response_id'."}
    }
    server.push(Reply.json(error, status=400))
    b = backend(server)
    response = b.chat_completion_stream(HI).wait(WAIT) if stream else b.chat_completion(HI)
    assert (response.error_class, response.error_status) == ("http", 400)
    assert response.err == "llama.cpp does not support 'previous_response_id'."


def test_an_incomplete_stream_is_a_length_failure_keeping_the_text(server: ScriptedServer) -> None:
    end = completed("Hel", "incomplete", incomplete_details={"reason": "max_output_tokens"})
    server.push(stream_reply(Write(sse(text_delta("Hel"), end))))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.err, response.finish_reason, response.provider_finish_reason) == (
        "Hit max tokens",
        "length",
        "incomplete:max_output_tokens",
    )
    assert response.latest == "Hel"


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "stream"])
def test_completed_at_the_output_limit_is_reconciled_to_length(
    server: ScriptedServer, stream: bool
) -> None:
    """llama-server says ``completed`` at max_output_tokens; usage is the evidence."""
    usage = {"input_tokens": 3, "output_tokens": 8, "total_tokens": 11}
    end = completed("eight tokens", usage=usage)
    server.set_script(
        lambda r: (
            stream_reply(Write(sse(text_delta("eight tokens"), end)))
            if (r.json() or {}).get("stream")
            else Reply.json(end["response"])
        )
    )
    b = backend(server, settings=Settings(max_tokens=8))
    response = b.chat_completion_stream(HI).wait(WAIT) if stream else b.chat_completion(HI)
    assert (response.err, response.finish_reason, response.provider_finish_reason) == (
        "Hit max tokens",
        "length",
        "completed",
    )
    assert response.finish_reason_evidence == {
        "rule": "output_tokens_at_limit",
        "output_tokens": 8,
        "max_output_tokens": 8,
    }
    under = backend(server, settings=Settings(max_tokens=9))
    again = under.chat_completion_stream(HI).wait(WAIT) if stream else under.chat_completion(HI)
    assert (
        again.is_success and again.finish_reason == "stop" and again.finish_reason_evidence is None
    )


# -- secrets --------------------------------------------------------------------------


def _echo(request: RecordedRequest) -> Reply:
    if (request.json() or {}).get("stream"):
        return stream_reply(
            Write(sse(text_delta("Hi"), {"type": "error", "message": f"bad key {KEY}"}))
        )
    return Reply.json({"error": {"message": f"Incorrect API key provided: {KEY}"}}, status=401)


@pytest.mark.parametrize("mode", ["blocking", "stream"])
def test_the_key_never_appears_in_err_logs_or_reprs(
    server: ScriptedServer,
    mode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = tmp_path / "wire.log"
    monkeypatch.setenv(ENV_VAR, str(wire))
    caplog.set_level(logging.DEBUG, logger="llmchat")
    server.set_script(_echo)
    b = backend(server, api_key=KEY)
    response = (
        b.chat_completion(HI) if mode == "blocking" else b.chat_completion_stream(HI).wait(WAIT)
    )
    assert response.is_done and response.error_class is not None
    with pytest.raises(Exception) as info:
        response.raise_for_error()
    outputs = {
        "err": response.err or "",
        "repr(response)": repr(response),
        "repr(backend)": repr(b),
        "repr(request)": repr(b.prepare_chat_request(HI)),
        "raise_for_error": f"{info.value!s} {info.value!r}",
        "logs": caplog.text + "\n".join(r.getMessage() for r in caplog.records),
        "wire log": wire.read_text(encoding="utf-8"),
    }
    forms = Redactor.of([KEY]).forms
    for name, text in outputs.items():
        leaks = [form for form in forms if form in text] or ([MARKER] if MARKER in text else [])
        assert not leaks, f"{name} leaks {leaks}: {text!r}"
    assert "bad key" in response.err or "Incorrect API key" in (response.err or "")
