"""The Ollama backend over real sockets: endings, cancel, errors, secrets, timing, probe."""

from __future__ import annotations

import json
import logging

import pytest

from llmchat import Settings
from llmchat.backends.ollama import Ollama
from llmchat.pipeline.judge import ERR_STREAM_CLOSED
from llmchat.testing import Drop, RecordedRequest, Reply, ScriptedServer, Stall, Write

from ..support.ollama import HI, NDJSON, call, chat_line, final, ndjson_reply

WAIT = 10.0
KEY = "ollama-key/Zx9+SECRETSECRET_7"
MARKER = "SECRETSECRET"


def backend(server: ScriptedServer, **kwargs: object) -> Ollama:
    return Ollama(server.root, model="m", **kwargs)  # type: ignore[arg-type]


# -- the request on the wire ---------------------------------------------------------


def test_blocking_posts_stream_false_to_api_chat(server: ScriptedServer) -> None:
    server.push(Reply.json(final()))
    response = backend(server).chat_completion(HI)
    assert response.is_success
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/api/chat")
    assert json.loads(request.body)["stream"] is False
    assert "authorization" not in {k.lower() for k, _ in request.headers.items()}


def test_an_api_key_goes_as_a_bearer_token_and_defaults_from_the_env(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", KEY)
    server.push(Reply.json(final()))
    b = backend(server)
    assert b.api_key == KEY and MARKER not in repr(b)
    assert b.chat_completion(HI).is_success
    assert server.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert b.clone(model="other").api_key == KEY and type(b.clone()) is Ollama


# -- streams ---------------------------------------------------------------------------


def test_a_stream_with_thinking_calls_counts_and_timing(server: ScriptedServer) -> None:
    lines = [
        chat_line(thinking="Let me see. "),
        chat_line("It is "),
        chat_line("sunny."),
        chat_line(calls=[call("get_weather", city="Paris")]),
        final("stop", prompt=12, completion=8, prompt_eval_cached_count=4),
    ]
    server.push(ndjson_reply(lines))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert response.is_success, response.err
    assert (response.msg, response.reasoning_text) == ("It is sunny.", "Let me see. ")
    assert [(c.name, c.arguments, c.id) for c in response.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "call_0")
    ]
    assert (response.finish_reason, response.provider_finish_reason) == ("tool_calls", "stop")
    assert (response.prompt_tokens, response.completion_tokens, response.total_tokens) == (
        12,
        8,
        20,
    )
    assert response.cached_tokens == 4 and response.usage is not None
    timing = response.timing
    assert (timing.server_total_seconds, timing.load_seconds) == (2.0, 0.5)
    assert (timing.prompt_eval_seconds, timing.eval_seconds) == (0.25, 1.0)
    assert response.reasoning_parts == [{"dialect": "ollama", "thinking": "Let me see. "}]
    assert json.loads(server.requests[0].body)["stream"] is True


def test_done_ends_the_stream_without_waiting_for_eof(server: ScriptedServer) -> None:
    """The done line is the end: the reader stops there though the server holds the body open."""
    server.push(ndjson_reply([chat_line("hi"), final()], extra_steps=[Stall()]))
    response = backend(server, stream_finish_grace=None).chat_completion_stream(HI).wait(WAIT)
    assert response.is_done and response.is_success and response.msg == "hi"


def test_a_length_stop_fails_as_length(server: ScriptedServer) -> None:
    server.push(ndjson_reply([chat_line("trunc"), final("length")]))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.is_success, response.err, response.finish_reason) == (
        False,
        "Hit max tokens",
        "length",
    )
    assert response.msg == "trunc" and response.completion_tokens == 3


@pytest.mark.parametrize("cut", ["between lines", "mid line"])
def test_a_stream_cut_before_done_is_stream_closed_with_the_text_kept(
    server: ScriptedServer, cut: str
) -> None:
    tail = [Write(b'{"model":"m","message":{"role":"assis')] if cut == "mid line" else []
    server.push(
        ndjson_reply([chat_line("partial "), chat_line("text")], extra_steps=[*tail, Drop()])
    )
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert response.is_done and not response.is_success
    assert (response.error_class, response.err) == ("response", ERR_STREAM_CLOSED)
    assert response.latest == "partial text"


def test_a_clean_eof_without_done_is_stream_closed_too(server: ScriptedServer) -> None:
    server.push(ndjson_reply([chat_line("no end")], "close"))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.err, response.latest) == (ERR_STREAM_CLOSED, "no end")


def test_an_error_line_mid_stream_fails_with_its_message(server: ScriptedServer) -> None:
    server.push(ndjson_reply([chat_line("so far"), {"error": "an error was encountered"}]))
    response = backend(server).chat_completion_stream(HI).wait(WAIT)
    assert (response.error_class, response.err) == ("response", "an error was encountered")
    assert response.latest == "so far"


@pytest.mark.parametrize("stream", [False, True])
def test_an_error_status_is_an_http_failure_with_ollamas_message(
    server: ScriptedServer, stream: bool
) -> None:
    server.push(Reply.json({"error": "model 'nope' not found"}, status=404))
    b = backend(server)
    response = (b.chat_completion_stream(HI) if stream else b.chat_completion(HI)).wait(WAIT)
    assert (response.error_class, response.error_status) == ("http", 404)
    assert response.err is not None and "model 'nope' not found" in response.err


@pytest.mark.parametrize("stream", [False, True])
def test_a_load_only_answer_fails_saying_so(server: ScriptedServer, stream: bool) -> None:
    load = {
        "model": "m",
        "created_at": "x",
        "message": {"role": "assistant", "content": ""},
        "done_reason": "load",
        "done": True,
    }
    server.push(ndjson_reply([load]) if stream else Reply.json(load))
    b = backend(server)
    response = (b.chat_completion_stream([]) if stream else b.chat_completion([])).wait(WAIT)
    assert response.error_class == "response"
    assert response.err is not None and "only loaded the model" in response.err


# -- cancel ----------------------------------------------------------------------------


def test_cancel_during_prefill_closes_the_socket(server: ScriptedServer) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = backend(server).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=5)
    response.cancel()
    assert response.is_cancelled and response.err == "Cancelled by user"
    assert server.requests[0].disconnected.wait(5), "the server never saw the hang-up"
    assert server.requests[0].headers_sent_at is None


def test_cancel_mid_stream_keeps_the_text_and_hangs_up(server: ScriptedServer) -> None:
    server.push(ndjson_reply([chat_line("so far")], extra_steps=[Stall()]))
    b = backend(server)
    response = b.chat_completion_stream(HI)
    assert next(iter(response)).content == "so far"
    b.cancel(response)
    assert response.is_cancelled and response.latest == "so far"
    assert server.requests[0].disconnected.wait(5)


# -- text completions ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_text_completions_post_api_generate_and_read_response(
    server: ScriptedServer, stream: bool
) -> None:
    lines = [
        {"model": "m", "response": "Hel", "thinking": "t", "done": False},
        {
            "model": "m",
            "response": "lo",
            "done": True,
            "done_reason": "stop",
            "context": [1, 2, 3],
            "prompt_eval_count": 4,
            "eval_count": 2,
        },
    ]
    whole = {
        "model": "m",
        "response": "Hello",
        "thinking": "t",
        "done": True,
        "done_reason": "stop",
        "context": [1, 2, 3],
        "prompt_eval_count": 4,
        "eval_count": 2,
    }
    server.push(ndjson_reply(lines) if stream else Reply.json(whole))
    b = backend(server, settings=Settings(max_tokens=2))
    response = (b.text_completion_stream(HI) if stream else b.text_completion(HI)).wait(WAIT)
    assert response.is_success, response.err
    assert (response.msg, response.reasoning_text, response.total_tokens) == ("Hello", "t", 6)
    request = server.requests[0]
    assert request.path == "/api/generate"
    assert json.loads(request.body) == {
        "model": "m",
        "prompt": "Hi",
        "options": {"num_predict": 2},
        "stream": stream,
    }


# -- secrets ---------------------------------------------------------------------------


ECHOES = {
    "401": lambda r: Reply.json({"error": f"bad key {KEY}"}, status=401),
    "error-line": lambda r: Reply(
        200,
        NDJSON,
        framing="chunked",
        steps=[
            Write(json.dumps(chat_line("Hi")) + "\n"),
            Write(json.dumps({"error": f"key {KEY}"}) + "\n"),
        ],
    ),
    "200-error-body": lambda r: Reply.json({"error": f"unauthorized: {KEY}"}),
}


@pytest.mark.parametrize("echo", list(ECHOES))
@pytest.mark.parametrize("stream", [False, True])
def test_the_key_never_appears_in_err_reprs_or_logs(
    echo: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="llmchat")

    def script(request: RecordedRequest) -> Reply:
        return ECHOES[echo](request)

    srv = ScriptedServer(script)
    with srv:
        b = Ollama(srv.root, model="m", api_key=KEY)
        response = (b.chat_completion_stream(HI) if stream else b.chat_completion(HI)).wait(WAIT)
        assert response.is_done and response.error_class is not None
        with pytest.raises(Exception) as info:
            response.raise_for_error()
        texts = [
            response.err or "",
            repr(response),
            repr(b),
            repr(b.prepare_chat_request(HI)),
            str(info.value),
            repr(info.value),
            caplog.text,
            repr(b.probe_server_limits()),
        ]
    for text in texts:
        assert MARKER not in text, text


# -- the probe -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("show", "expected"),
    [
        (
            {"model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}},
            {"source": "ollama", "context_length": 32768},
        ),
        (
            {
                "parameters": 'stop "<|im_end|>"\nnum_ctx                 8192\ntemperature 0.7',
                "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
            },
            {"source": "ollama", "context_length": 8192},
        ),
        (
            {"parameters": "temperature 0.7", "model_info": {"general.architecture": "llama"}},
            {
                "source": "ollama",
                "note": "POST /api/show has no num_ctx and no <arch>.context_length",
            },
        ),
    ],
)
def test_the_probe_reads_api_show(server: ScriptedServer, show: dict, expected: dict) -> None:
    server.push(Reply.json(show))
    assert backend(server).probe_server_limits() == expected
    [request] = server.requests
    assert (request.method, request.path, json.loads(request.body)) == (
        "POST",
        "/api/show",
        {"model": "m"},
    )


def test_the_probe_never_raises(server: ScriptedServer) -> None:
    server.push(Reply.json({"error": "model 'm' not found"}, status=404))
    assert backend(server).probe_server_limits() == {
        "source": "ollama",
        "note": "POST /api/show answered HTTP 404",
    }
    assert Ollama(server.root).probe_server_limits()["note"] == "no model to ask /api/show about"
    server.push(Reply(before_headers=[Stall()]))
    note = backend(server, server_probe_timeout=0.5).probe_server_limits()
    assert note["source"] == "ollama" and "failed" in note["note"]
