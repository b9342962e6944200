"""KoboldCpp: body shape, finish-reason reconciliation, wire quirks, probe and abort.

The loopback server plays KoboldCpp's own habits: close-delimited streams,
the string "null" as a mid-stream finish_reason, a last `data: [DONE]` with no
blank line, no usage chunk, stop sequences reported as `length`, HTTP 200
generation errors, an instant 503 when the queue is full. Nothing sleeps.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from typing import Any

import pytest
import responses

from llmchat import Settings
from llmchat.backends.koboldcpp import KoboldCpp
from llmchat.response import Response
from llmchat.testing import RecordedRequest, Reply, ScriptedServer, Stall, Write

HI = [{"role": "user", "content": "Hi"}]
ABORT = "/api/extra/abort"
SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string"}, "evidence": {"type": "string"}, "aside": {}},
    "required": ["evidence", "verdict"],
}


def chunk(content: str | None = None, finish: Any = "null") -> dict[str, Any]:
    """One KoboldCpp chat chunk; mid-stream it says finish_reason "null" (a string)."""
    delta = {} if content is None else {"role": "assistant", "content": content}
    return {
        "id": "koboldcpp",
        "object": "chat.completion.chunk",
        "model": "koboldcpp/m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def kobold_stream(*events: dict[str, Any]) -> Reply:
    """A KoboldCpp stream: close-delimited, ending in an unterminated `data: [DONE]`."""
    return Reply.sse(events, framing="close", terminate_last=False)


def whole(content: str, finish: str, completion_tokens: int | None = None) -> Reply:
    body: dict[str, Any] = {
        "id": "koboldcpp",
        "object": "chat.completion",
        "model": "koboldcpp/m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
    }
    if completion_tokens is not None:
        body["usage"] = {
            "prompt_tokens": 4,
            "completion_tokens": completion_tokens,
            "total_tokens": 4 + completion_tokens,
        }
    return Reply.json(body, framing="close")


class Kobold:
    """A script callable answering KoboldCpp's side routes; completions come from `push`."""

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.method == "POST" and request.path == ABORT:
            return Reply.json({"success": "true", "done": "true"})
        if request.method == "GET" and request.path == "/api/extra/true_max_context_length":
            return Reply.json({"value": 8192})
        return Reply.error(404, "no route")


# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = Kobold


def paths(server: ScriptedServer) -> list[str]:
    return [r.path for r in server.requests]


# -- request body shape (pure: nothing sent) -----------------------------------


def body_of(settings: Settings, *, stream: bool = False) -> tuple[dict[str, Any], bytes]:
    request = KoboldCpp(model="m").prepare_chat_request(HI, settings=settings, stream=stream)
    return dict(request.body), request.data


def test_every_sampler_field_goes_out_under_its_koboldcpp_name() -> None:
    settings = Settings(
        min_p=0.05,
        typical_p=0.9,
        top_k=40,
        repetition_penalty=1.1,
        max_tokens=200,
        max_context=8192,
        xtc_probability=0.5,
        xtc_threshold=0.1,
        dry_multiplier=0.8,
        dry_base=1.75,
        dry_allowed_length=2,
        dry_sequence_breakers=["\n", ":"],
    )
    body, _ = body_of(settings)
    assert {k: v for k, v in body.items() if k not in ("model", "messages")} == {
        "min_p": 0.05,
        "typical_p": 0.9,
        "top_k": 40,
        "repetition_penalty": 1.1,
        "rep_pen": 1.1,
        "max_tokens": 200,
        "max_length": 200,
        "max_context_length": 8192,
        "xtc_probability": 0.5,
        "xtc_threshold": 0.1,
        "dry_multiplier": 0.8,
        "dry_base": 1.75,
        "dry_allowed_length": 2,
        "dry_sequence_breakers": ["\n", ":"],
    }


def test_nothing_extra_is_sent_when_unset() -> None:
    body, data = body_of(Settings(), stream=True)
    assert body == {"model": "m", "messages": HI, "stream": True}  # no stream_options either
    assert data == b'{"messages":[{"content":"Hi","role":"user"}],"model":"m","stream":true}'


def test_json_schema_goes_native_in_required_order() -> None:
    body, data = body_of(Settings(json_schema=SCHEMA, json_schema_name="verdict"))
    assert body["json_schema"] == SCHEMA and "response_format" not in body
    assert "verdict" not in {k for k in body if k != "json_schema"}  # the name is not sent
    assert data.startswith(
        b'{"json_schema":{"properties":{"evidence":{"type":"string"},'
        b'"verdict":{"type":"string"},"aside":{}},"required":["evidence","verdict"],'
        b'"type":"object"},"messages":'
    )


def test_extra_body_override_reaches_both_spellings() -> None:
    body, _ = body_of(Settings(max_tokens=10, extra_body={"max_tokens": 20}))
    assert (body["max_tokens"], body["max_length"]) == (20, 20)


def test_get_api_settings_leaves_its_input_alone() -> None:
    settings = Settings(repetition_penalty=1.2, max_tokens=5, json_schema=SCHEMA)
    before = copy.deepcopy(settings)
    backend = KoboldCpp()
    first = backend._get_api_settings(settings)
    first["rep_pen"] = 99
    assert settings == before
    assert backend._get_api_settings(settings)["rep_pen"] == 1.2


def test_defaults_url_and_unbounded_headers_timeout() -> None:
    backend = KoboldCpp()
    assert backend.api_url == "http://localhost:5001/v1"
    assert backend.timeouts.headers is None and backend.timeouts.connect == 30.0
    assert KoboldCpp(headers_timeout=5.0).timeouts.headers == 5.0
    assert backend.clone(model="x").timeouts.headers is None
    assert type(backend.clone()) is KoboldCpp


@responses.activate
def test_settings_reach_the_wire_as_bytes() -> None:
    responses.post(
        "http://localhost:5001/v1/chat/completions",
        json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]},
    )
    settings = Settings(repetition_penalty=1.05, max_tokens=64, json_schema=SCHEMA)
    response = KoboldCpp().chat_completion(HI, settings=settings)
    assert response.is_success and response.msg == "ok"
    (call,) = responses.calls
    sent = json.loads(call.request.body)
    assert (sent["rep_pen"], sent["max_length"], sent["json_schema"]) == (1.05, 64, SCHEMA)
    assert call.request.body.index(b'"evidence"') < call.request.body.index(b'"verdict"')
    assert call.request.headers["Content-Type"] == "application/json"


# -- finish-reason reconciliation (pure) -----------------------------------------


def reconcile(
    reason: str, request: dict[str, Any], text: str = "", completion_tokens: int | None = None
) -> tuple[str, Response]:
    response = Response(request)
    response._add_text(text)
    response.completion_tokens = completion_tokens
    frozen = copy.deepcopy(request)
    decided = KoboldCpp()._reconcile_finish_reason(response, reason, request)
    assert request == frozen  # a pure transform: the request is not touched
    return decided, response


def test_token_count_below_max_tokens_is_a_stop() -> None:
    decided, response = reconcile("length", {"max_tokens": 100}, "short", completion_tokens=12)
    assert decided == "stop"
    assert response.finish_reason_evidence == {
        "rule": "completion_tokens",
        "completion_tokens": 12,
        "max_tokens": 100,
    }


def test_max_length_counts_when_max_tokens_is_absent() -> None:
    decided, _ = reconcile("length", {"max_length": 50}, "x", completion_tokens=3)
    assert decided == "stop"


def test_text_ending_in_a_stop_sequence_is_a_stop() -> None:
    request = {"max_tokens": 8, "stop": ["\nUser:", "###"]}
    decided, response = reconcile("length", request, "Sure.\nUser:", completion_tokens=8)
    assert decided == "stop"
    assert response.finish_reason_evidence == {
        "rule": "stop_sequence",
        "stop": "\nUser:",
        "completion_tokens": 8,
        "max_tokens": 8,
    }


def test_a_single_string_stop_counts_too() -> None:
    decided, _ = reconcile("length", {"stop": "END"}, "done END")
    assert decided == "stop"


def test_a_true_max_tokens_stop_stays_length() -> None:
    request = {"max_tokens": 8, "stop": ["\nUser:"]}
    decided, response = reconcile("length", request, "eight tokens of text", completion_tokens=8)
    assert decided == "length" and response.finish_reason_evidence is None


def test_length_without_any_numbers_stays_length() -> None:
    decided, _ = reconcile("length", {}, "text", completion_tokens=None)
    assert decided == "length"


@pytest.mark.parametrize("reason", ["stop", "tool_calls", "content_filter", "error"])
def test_other_reasons_pass_through(reason: str) -> None:
    decided, response = reconcile(reason, {"max_tokens": 100}, "x", completion_tokens=1)
    assert decided == reason and response.finish_reason_evidence is None


# -- blocking path over sockets --------------------------------------------------


def test_blocking_stop_reported_as_length_succeeds(server: ScriptedServer) -> None:
    server.push(whole("Yes.", "length", completion_tokens=3))
    settings = Settings(max_tokens=64, stop=["\nUser:"])
    response = KoboldCpp(server.url).chat_completion(HI, settings=settings)
    assert response.is_success and response.msg == "Yes."
    assert (response.finish_reason, response.provider_finish_reason) == ("stop", "length")
    assert response.finish_reason_evidence["rule"] == "completion_tokens"
    assert server.requests[0].json()["max_length"] == 64


def test_blocking_true_length_fails(server: ScriptedServer) -> None:
    server.push(whole("cut of", "length", completion_tokens=4))
    response = KoboldCpp(server.url).chat_completion(HI, settings=Settings(max_tokens=4))
    assert (response.is_success, response.err, response.finish_reason) == (
        False,
        "Hit max tokens",
        "length",
    )
    assert response.latest == "cut of"


def test_queue_full_503_is_an_http_failure(server: ScriptedServer) -> None:
    server.push(Reply.json({"detail": {"msg": "Server is busy; please try again later."}}, 503))
    response = KoboldCpp(server.url).chat_completion(HI)
    assert (response.error_class, response.error_status) == ("http", 503)
    assert "busy" in (response.err or "")


def test_blocking_200_with_finish_reason_error_fails(server: ScriptedServer) -> None:
    server.push(whole("", "error"))
    response = KoboldCpp(server.url).chat_completion(HI)
    assert not response.is_success and response.error_class == "response"
    assert response.provider_finish_reason == "error"


# -- streams over sockets ---------------------------------------------------------


def test_close_delimited_stream_with_null_strings_and_unterminated_done(
    server: ScriptedServer,
) -> None:
    server.push(kobold_stream(chunk("Hel"), chunk("lo"), chunk(None, "stop")))
    response = KoboldCpp(server.url).chat_completion_stream(HI).wait(10)
    assert response.is_success and response.msg == "Hello"
    assert response.finish_reason == "stop" and response.dropped_frames == 0
    assert response.completion_tokens is None  # no usage chunk: reported as unknown
    sent = server.requests[0]
    assert "stream_options" not in sent.json()
    raw = b"".join(bytes(step.data) for step in sent.reply.body_steps)  # type: ignore[union-attr]
    assert raw.endswith(b"data: [DONE]\n") and b'"finish_reason":"null"' in raw


def test_stream_stop_sequence_reported_as_length_succeeds(server: ScriptedServer) -> None:
    server.push(kobold_stream(chunk("Fine."), chunk("\nUser:"), chunk(None, "length")))
    settings = Settings(max_tokens=300, stop=["\nUser:"])
    response = KoboldCpp(server.url).chat_completion_stream(HI, settings=settings).wait(10)
    assert response.is_success, response.err
    assert (response.finish_reason, response.provider_finish_reason) == ("stop", "length")
    assert response.finish_reason_evidence == {
        "rule": "stop_sequence",
        "stop": "\nUser:",
        "completion_tokens": None,  # KoboldCpp sent no usage chunk
        "max_tokens": 300,
    }


def test_stream_token_count_evidence_from_a_usage_chunk(server: ScriptedServer) -> None:
    final = chunk(None, "length")
    final["usage"] = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
    server.push(kobold_stream(chunk("Seven tokens"), final))
    response = (
        KoboldCpp(server.url).chat_completion_stream(HI, settings=Settings(max_tokens=50)).wait(10)
    )
    assert response.is_success and response.finish_reason == "stop"
    assert response.finish_reason_evidence["completion_tokens"] == 7


def test_stream_true_length_stays_a_failure(server: ScriptedServer) -> None:
    server.push(kobold_stream(chunk("trunc"), chunk(None, "length")))
    settings = Settings(max_tokens=2, stop=["\nUser:"])
    response = KoboldCpp(server.url).chat_completion_stream(HI, settings=settings).wait(10)
    assert (response.is_success, response.err, response.finish_reason) == (
        False,
        "Hit max tokens",
        "length",
    )


def test_stream_200_finish_reason_error_fails(server: ScriptedServer) -> None:
    server.push(kobold_stream(chunk("par"), chunk(None, "error")))
    response = KoboldCpp(server.url).chat_completion_stream(HI).wait(10)
    assert (response.is_success, response.error_class) == (False, "response")
    assert response.latest == "par" and "error" in (response.err or "")


def test_stream_503_is_an_http_failure(server: ScriptedServer) -> None:
    server.push(Reply.error(503, "Server is busy"))
    response = KoboldCpp(server.url).chat_completion_stream(HI).wait(10)
    assert (response.error_class, response.error_status) == ("http", 503)


# -- cancel posts /api/extra/abort -------------------------------------------------


def live_stream() -> Reply:
    return Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="close",
        steps=[Write(f"data: {json.dumps(chunk('so far'))}\n\n"), Stall()],
    )


def test_backend_cancel_hangs_up_then_posts_abort(server: ScriptedServer) -> None:
    server.push(live_stream())
    backend = KoboldCpp(server.url, api_key="k-secret")
    response = backend.chat_completion_stream(HI)
    assert next(iter(response)).content == "so far"
    backend.cancel(response)
    assert response.is_cancelled and response.latest == "so far"
    assert server.requests[0].disconnected.wait(5)
    assert server.wait_for_requests(2, timeout=5), paths(server)
    abort = server.requests[1]
    assert (abort.method, abort.path, abort.body) == ("POST", ABORT, b"{}")
    assert abort.headers["Content-Type"] == "application/json"
    assert abort.headers["Authorization"] == "Bearer k-secret"


def test_response_cancel_during_prefill_posts_abort(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = KoboldCpp(server.url).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert server.wait_for_requests(2, timeout=5) and paths(server)[1] == ABORT


def test_leaving_a_with_block_posts_abort(server: ScriptedServer) -> None:
    server.push(live_stream())
    with KoboldCpp(server.url).chat_completion_stream(HI) as response:
        assert server.wait_for_requests(1, timeout=5)
    assert response.is_cancelled
    assert server.wait_for_requests(2, timeout=5) and paths(server)[1] == ABORT


def test_cancelling_a_blocking_call_from_another_thread_posts_abort(
    server: ScriptedServer,
) -> None:
    server.push(Reply(before_headers=[Stall()]))
    backend = KoboldCpp(server.url)
    made: list[Response] = []
    created = threading.Event()

    class Recording(KoboldCpp):
        def make_response(self, request: Any) -> Response:
            made.append(super().make_response(request))
            created.set()
            return made[0]

    worker = threading.Thread(target=Recording(server.url).chat_completion, args=(HI,))
    worker.start()
    assert created.wait(5) and server.wait_for_requests(1, timeout=5)
    backend.cancel(made[0])
    worker.join(5)
    assert not worker.is_alive() and made[0].is_cancelled
    assert server.wait_for_requests(2, timeout=5) and paths(server)[1] == ABORT


def test_no_abort_after_a_finished_response(server: ScriptedServer) -> None:
    server.push(kobold_stream(chunk("done"), chunk(None, "stop")))
    response = KoboldCpp(server.url).chat_completion_stream(HI).wait(10)
    assert response.is_success
    response.cancel()
    server.push(whole("next", "stop"))  # the next request proves nothing came between
    assert KoboldCpp(server.url).chat_completion(HI).msg == "next"
    assert ABORT not in paths(server)


class _Seen(logging.Handler):
    """Sets `event` when a record containing `needle` is logged."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.DEBUG)
        self.needle = needle
        self.event = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.needle in message:
            self.messages.append(message)
            self.event.set()


def test_a_failing_abort_is_logged_at_debug_and_swallowed() -> None:
    srv = ScriptedServer(Reply.error(500, "abort exploded"))
    srv.push(Reply(before_headers=[Stall()]))
    seen = _Seen("KoboldCpp abort")
    logger = logging.getLogger("llmchat")
    old_level = logger.level
    logger.addHandler(seen)
    logger.setLevel(logging.DEBUG)
    try:
        with srv:
            response = KoboldCpp(srv.url).chat_completion_stream(HI)
            assert srv.wait_for_requests(1, timeout=5)
            response.cancel()  # returns at once; the abort runs in its own thread
            assert response.is_cancelled and response.error_class is None
            assert seen.event.wait(5), "the abort's failure was not logged"
    finally:
        logger.removeHandler(seen)
        logger.setLevel(old_level)
    assert srv.requests[1].path == ABORT
    assert seen.messages == ["KoboldCpp abort: POST /api/extra/abort answered HTTP 500"]


# -- server limits -----------------------------------------------------------------


def test_probe_reads_true_max_context_length(server: ScriptedServer) -> None:
    assert KoboldCpp(server.url).probe_server_limits() == {
        "source": "koboldcpp",
        "context_length": 8192,
    }
    assert paths(server) == ["/api/extra/true_max_context_length"]


def test_probe_on_a_server_without_the_route_gives_a_note(server: ScriptedServer) -> None:
    server.push(Reply.error(404, "no"))
    result = KoboldCpp(server.url).probe_server_limits()
    assert result["source"] == "koboldcpp" and "404" in result["note"]


def test_probe_without_a_value_gives_a_note(server: ScriptedServer) -> None:
    server.push(Reply.json({"value": "lots"}))
    assert KoboldCpp(server.url).probe_server_limits() == {
        "source": "koboldcpp",
        "note": "GET /api/extra/true_max_context_length has no value",
    }


def test_probe_of_a_black_hole_is_bounded(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    result = KoboldCpp(server.url, server_probe_timeout=0.3).probe_server_limits()
    assert result["source"] == "koboldcpp" and "note" in result
