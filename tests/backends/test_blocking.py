"""Blocking chat and text completions over real sockets, against the loopback server.

Every error class and timeout has its own test; the server side is asserted
too (what bytes arrived, whether and when the client hung up).
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon, Settings
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.testing import ChatResponder, Drop, Pause, Reply, ScriptedServer, Stall, Write

from ..support.paths import CAPTURES_DIR

KEY = "sk-loopback-SECRET-4242"
HI = [{"role": "user", "content": "Hi there"}]


def chat_body(content: str = "ok", finish: str | None = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        **extra,
    }


# The `server` fixture (tests/conftest.py) runs this script, fresh for each test.
SERVER_SCRIPT = functools.partial(ChatResponder, "Hello back.")


def backend(server: ScriptedServer, **kwargs: Any) -> OpenAICommon:
    return OpenAICommon(server.url, **kwargs)


# -- success -----------------------------------------------------------------


def test_round_trip_posts_the_exact_bytes(server: ScriptedServer) -> None:
    b = backend(server, model="m", settings=Settings(max_tokens=9))
    response = b.chat_completion(HI)
    assert response.is_success and response.is_done and response.error_class is None
    assert (response.msg, response.finish_reason, response.model) == (
        "Hello back.",
        "stop",
        "loopback",
    )
    assert response.prompt_tokens == 2 and response.completion_tokens is not None
    (seen,) = server.requests
    assert seen.method == "POST" and seen.path == "/v1/chat/completions"
    assert seen.body == b.prepare_chat_request(HI).data
    assert seen.headers["Content-Type"] == "application/json"
    assert "Authorization" not in seen.headers
    chunks = list(response)
    assert len(chunks) == 1 and chunks[0].is_final and chunks[0].content == "Hello back."


def test_bearer_key_sent_only_when_set(server: ScriptedServer) -> None:
    backend(server, api_key=KEY).chat_completion(HI)
    assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"


def test_connections_are_pooled(server: ScriptedServer) -> None:
    b = backend(server)
    assert b.chat_completion(HI).is_success and b.chat_completion(HI).is_success
    assert server.connections_accepted == 1


def test_a_callers_session_is_used(server: ScriptedServer) -> None:
    with requests.Session() as session:
        session.headers["X-From-Session"] = "yes"
        assert backend(server, session=session).chat_completion(HI).is_success
    assert server.requests[0].headers["X-From-Session"] == "yes"


def test_reasoning_and_tool_calls_are_lifted(server: ScriptedServer) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    body = chat_body("", "tool_calls")
    body["choices"][0]["message"].update({"reasoning_content": "think", "tool_calls": [call]})
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 0}
    server.push(Reply.json(body))
    response = backend(server).chat_completion(HI)
    assert response.is_success and response.finish_reason == "tool_calls"
    assert response.reasoning_text == "think" and response.msg == ""
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("f", {"x": 1})]
    assert response.cached_tokens == 0 and response.reasoning_tokens is None


def test_json_parsed_whatever_the_content_type(server: ScriptedServer) -> None:
    server.push(Reply.text(json.dumps(chat_body("plain")), content_type="text/html"))
    assert backend(server).chat_completion(HI).msg == "plain"


def test_ascii_escaped_json_decodes(server: ScriptedServer) -> None:
    # Bytes that are not UTF-8 fail (tests/test_wire.py); \u escapes are plain ASCII.
    server.push(Reply(200, None, json.dumps(chat_body("caf\u00e9")).encode("ascii")))
    assert backend(server).chat_completion(HI).msg == "caf\u00e9"


# -- the finish-reason rules -------------------------------------------------


@pytest.mark.parametrize(
    ("finish", "err"),
    [
        ("length", "Hit max tokens"),
        ("content_filter", "Blocked by content filter"),
        ("eos", "Unknown finish reason: eos"),
    ],
)
def test_terminal_finish_reasons_fail_and_keep_everything(
    server: ScriptedServer, finish: str, err: str
) -> None:
    server.push(Reply.json(chat_body("partial answer", finish)))
    response = backend(server).chat_completion(HI)
    assert (response.is_success, response.error_class, response.err) == (False, "response", err)
    assert response.latest == "partial answer" and response.completion_tokens == 2
    assert response.finish_reason == finish == response.provider_finish_reason


@pytest.mark.parametrize("finish", [None, "", "null"])
def test_no_finish_reason_is_success(server: ScriptedServer, finish: str | None) -> None:
    server.push(Reply.json(chat_body("x", finish)))
    response = backend(server).chat_completion(HI)
    assert response.is_success and response.finish_reason is None


def test_reconcile_hook_decides_and_records_evidence(server: ScriptedServer) -> None:
    class Gateway(OpenAICommon):
        def _reconcile_finish_reason(self, response: Response, reason: str, request: Any) -> str:
            response.finish_reason_evidence = {"saw": reason, "max_tokens": request["max_tokens"]}
            return "stop" if reason == "eos" else reason

    server.push(Reply.json(chat_body("x", "eos")))
    response = Gateway(server.url, settings=Settings(max_tokens=4)).chat_completion(HI)
    assert response.is_success and response.finish_reason == "stop"
    assert response.provider_finish_reason == "eos"
    assert response.finish_reason_evidence == {"saw": "eos", "max_tokens": 4}


def test_reconcile_hook_that_raises_keeps_the_providers_reason(server: ScriptedServer) -> None:
    class Broken(OpenAICommon):
        def _reconcile_finish_reason(self, response: Response, reason: str, request: Any) -> str:
            raise RuntimeError("bug")

    server.push(Reply.json(chat_body("x", "length")))
    response = Broken(server.url).chat_completion(HI)
    assert response.finish_reason == "length" and response.err == "Hit max tokens"


def test_on_blocking_complete_runs_before_done(server: ScriptedServer) -> None:
    seen: list[tuple[bool, str]] = []

    class Hooked(OpenAICommon):
        def _on_blocking_complete(self, response: Response) -> None:
            seen.append((response.is_done, response.msg))

    assert Hooked(server.url).chat_completion(HI).is_success
    assert seen == [(False, "Hello back.")]


def test_on_blocking_complete_that_raises_fails_the_response(server: ScriptedServer) -> None:
    class Hooked(OpenAICommon):
        def _on_blocking_complete(self, response: Response) -> None:
            raise KeyError("cost")

    response = Hooked(server.url).chat_completion(HI)
    assert response.error_class == "unknown" and "KeyError" in (response.err or "")
    assert response.msg == "Hello back."


def test_lift_usage_hook_gets_the_payload_unchanged(server: ScriptedServer) -> None:
    payloads: list[str] = []

    class Lifting(OpenAICommon):
        def _lift_usage(self, response: Response, payload: Any) -> None:
            before = json.dumps(payload, sort_keys=True)
            super()._lift_usage(response, payload)
            payloads.append(before)
            assert json.dumps(payload, sort_keys=True) == before

    assert Lifting(server.url).chat_completion(HI).prompt_tokens == 2
    assert len(payloads) == 1


# -- http, response and in-band failures --------------------------------------


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
def test_http_errors_carry_status_and_the_providers_words(
    server: ScriptedServer, status: int
) -> None:
    server.push(Reply.error(status, f"nope {status}"))
    response = backend(server).chat_completion(HI)
    assert (response.error_class, response.error_status, response.err) == (
        "http",
        status,
        f"nope {status}",
    )


def test_html_error_page_is_kept_as_text(server: ScriptedServer) -> None:
    server.push(Reply.text("<html>502 Bad Gateway</html>", status=502, content_type="text/html"))
    response = backend(server).chat_completion(HI)
    assert response.error_status == 502 and "502 Bad Gateway" in (response.err or "")


def test_server_echoing_the_key_never_leaks_it(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: Any
) -> None:
    log_path = tmp_path / "wire.log"
    monkeypatch.setenv("LLMCHAT_DEBUG", str(log_path))
    caplog.set_level(logging.DEBUG, logger="llmchat")
    server.push(Reply.error(401, f"Incorrect API key provided: {KEY}"))
    b = backend(server, api_key=KEY)
    response = b.chat_completion(HI)
    assert response.error_status == 401
    texts = [response.err or "", repr(response), repr(b), str(b), log_path.read_text()]
    texts += [record.getMessage() for record in caplog.records]
    assert all(KEY not in text for text in texts)
    assert "[redacted]" in (response.err or "")


@pytest.mark.parametrize(
    ("reply", "err"),
    [
        (Reply(200, None, b""), "Empty response body"),
        (Reply.text("<html>hi</html>"), "Response is not a JSON object: <html>hi</html>"),
        (Reply.json([1, 2]), "Response is not a JSON object: [1,2]"),
        (Reply.json({"object": "chat.completion"}), "Response has no choices"),
        (Reply.json({"error": {"message": "model overloaded"}}), "model overloaded"),
        (
            Reply.json(
                {"choices": [{"error": {"message": "upstream died"}, "finish_reason": "error"}]}
            ),
            "upstream died",
        ),
    ],
)
def test_unusable_200_bodies_are_response_failures(
    server: ScriptedServer, reply: Reply, err: str
) -> None:
    server.push(reply)
    response = backend(server).chat_completion(HI)
    assert response.error_class == "response" and not response.is_success
    assert (response.err or "").startswith(err)


# -- transport failures over real sockets -------------------------------------


def test_refused_port_is_a_connection_failure() -> None:
    with ScriptedServer() as url:
        pass  # the port is closed again
    response = OpenAICommon(url).chat_completion(HI)
    assert (response.error_class, response.err) == ("connection", "Connection refused")


def test_reset_before_any_byte_is_a_connection_failure(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Drop(rst=True)]))
    response = backend(server).chat_completion(HI)
    assert response.error_class == "connection"


def test_black_hole_times_out_waiting_for_headers(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = backend(server, headers_timeout=0.3).chat_completion(HI)
    assert (response.error_class, response.err) == ("timeout", "No response headers within 0.3s")
    assert server.requests[0].disconnected.wait(5), "the server never saw the client leave"


def test_slow_headers_within_the_limit_succeed(server: ScriptedServer) -> None:
    server.push(Reply.json(chat_body("late"), before_headers=[Pause(0.2)]))
    response = backend(server, headers_timeout=5).chat_completion(HI)
    assert response.is_success and response.msg == "late"
    seen = server.requests[0]
    assert seen.headers_sent_at is not None and seen.headers_sent_at - seen.received_at >= 0.2


def test_deadline_mid_body_drops_the_connection(server: ScriptedServer) -> None:
    server.push(Reply(steps=[Write(b'{"choices": ['), Stall()], framing="chunked"))
    response = backend(server, request_timeout=0.4).chat_completion(HI)
    assert (response.error_class, response.err) == (
        "timeout",
        "No complete response within request_timeout (0.4s)",
    )
    seen = server.requests[0]
    assert seen.disconnected.wait(5) and seen.disconnected_at is not None
    assert seen.writes and seen.disconnected_at >= seen.writes[-1][0]


def test_trickling_body_is_stopped_by_the_deadline_not_the_read_gap(
    server: ScriptedServer,
) -> None:
    trickle: list[Any] = []
    for _ in range(100):
        trickle += [Write(b" "), Pause(0.05)]
    server.push(Reply(steps=trickle, framing="chunked"))
    response = backend(server, headers_timeout=1.0, request_timeout=0.5).chat_completion(HI)
    assert response.error_class == "timeout" and "request_timeout" in (response.err or "")


def test_body_cut_off_is_a_response_failure(server: ScriptedServer) -> None:
    body = json.dumps(chat_body("cut")).encode()
    server.push(
        Reply(
            steps=[Write(body[:20]), Drop()],
            framing="length",
            headers={"Content-Length": str(len(body))},
        )
    )
    response = backend(server).chat_completion(HI)
    assert response.error_class == "response" and "Body cut off" in (response.err or "")


# -- text completions ----------------------------------------------------------


def test_text_completion_renders_the_template(server: ScriptedServer) -> None:
    b = backend(server, template=ChatML(), message_normalization="alternate-roles")
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    response = b.text_completion(messages)
    assert response.is_success and response.msg == "Hello back."
    seen = server.requests[0]
    assert seen.path == "/v1/completions"
    assert seen.json()["prompt"] == "<|im_start|>user\na\n\nb<|im_end|>\n<|im_start|>assistant\n"


def test_text_completion_length_is_a_failure(server: ScriptedServer) -> None:
    server.push(Reply.json({"choices": [{"text": "trunc", "finish_reason": "length"}]}))
    response = backend(server, template=ChatML()).text_completion(HI, continuation=True)
    assert (response.err, response.latest) == ("Hit max tokens", "trunc")
    assert server.requests[0].json()["prompt"].endswith("Hi there")


def test_text_completion_without_a_template_fails_before_io(server: ScriptedServer) -> None:
    with pytest.raises(ValueError, match="template"):
        backend(server).text_completion(HI)
    assert server.requests == []


# -- golden bodies from a real llama-server ----------------------------------------


def _captured(name: str) -> tuple[int, Any]:
    path = CAPTURES_DIR / "llamacpp" / name
    if not path.is_file():
        pytest.skip(f"{path} absent")
    data = json.loads(path.read_text(encoding="utf-8"))
    return (data[0], data[1]) if isinstance(data, list) else (data["status"], data["response"])


def test_captured_length_body(server: ScriptedServer) -> None:
    status, body = _captured("chat_nonstream_length.json")
    server.push(Reply.json(body, status))
    response = backend(server).chat_completion(HI)
    assert response.err == "Hit max tokens"
    assert response.latest == body["choices"][0]["message"]["content"]
    assert response.prompt_tokens == body["usage"]["prompt_tokens"]


def test_captured_context_exceeded(server: ScriptedServer) -> None:
    status, body = _captured("error_context_exceeded.json")
    server.push(Reply.json(body, status))
    response = backend(server).chat_completion(HI)
    assert (response.error_class, response.error_status) == ("http", 400)
    assert response.err == body["error"]["message"]


# -- probe ----------------------------------------------------------------------


def test_probe_reads_props(server: ScriptedServer) -> None:
    assert backend(server).probe_server_limits() == {
        "source": "llama.cpp",
        "context_length": 4096,
        "slots": 2,
    }
    assert server.requests[0].path == "/props"


def test_probe_reads_captured_props(server: ScriptedServer) -> None:
    status, body = _captured("props.json")
    server.push(Reply.json(body, status))
    limits = backend(server).probe_server_limits()
    assert limits["context_length"] == body["default_generation_settings"]["n_ctx"]
    assert limits["slots"] == body["total_slots"]


@pytest.mark.parametrize(
    ("reply", "note"),
    [
        (Reply.error(404, "File Not Found"), "GET /props answered HTTP 404"),
        (Reply.json({"total_slots": 1}), "no default_generation_settings.n_ctx"),
        (Reply.text("not json"), "did not answer a JSON object"),
        (Reply(before_headers=[Stall()]), "GET /props failed"),
    ],
)
def test_probe_never_raises(server: ScriptedServer, reply: Reply, note: str) -> None:
    server.push(reply)
    limits = backend(server, server_probe_timeout=0.3).probe_server_limits()
    assert limits["source"] == "llama.cpp" and note in limits["note"]


def test_probe_is_bounded_in_total_against_a_trickle(server: ScriptedServer) -> None:
    trickle: list[Any] = []
    for _ in range(100):
        trickle += [Write(b" "), Pause(0.05)]
    server.push(Reply(steps=trickle, framing="chunked"))
    limits = backend(server, server_probe_timeout=0.4).probe_server_limits()
    assert "request_timeout (0.4s)" in limits["note"]


# -- debug wire log -----------------------------------------------------------------


def test_wire_log_has_replayable_bytes_and_timings(
    server: ScriptedServer, tmp_path: Path, monkeypatch: Any
) -> None:
    log_path = tmp_path / "wire.log"
    monkeypatch.setenv("LLMCHAT_DEBUG", str(log_path))
    b = backend(server, api_key=KEY, model="m")
    assert b.chat_completion(HI).is_success
    text = log_path.read_text(encoding="utf-8")
    body_lines = [line for line in text.splitlines() if " >>> body " in line]
    assert len(body_lines) == 1
    assert body_lines[0].split(" >>> body ", 1)[1].encode() == server.requests[0].body
    assert "<<< 200 +" in text and "first body byte +" in text
    assert "'Authorization': '[redacted]'" in text and KEY not in text


def test_retry_after_is_kept_on_the_response(server: ScriptedServer) -> None:
    server.push(Reply.error(429, "slow down", headers={"Retry-After": "7"}))
    response = backend(server).chat_completion(HI)
    assert (response.error_status, response.retry_after) == (429, "7")
    assert backend(server).chat_completion(HI).retry_after is None
