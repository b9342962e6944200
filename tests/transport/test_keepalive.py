"""Keep-alive over real sockets: a streamed call's connection goes back to the pool.

After a dialect's explicit end the reader thread settles the Response, then
reads the body to its own end (for at most `reuse_grace`) so that urllib3
pools the connection; every other ending closes it. A pooled connection the
server closed meanwhile is sent once more on a new one, only when no response
byte had arrived. `RecordedRequest.connection_id` tells which connection
carried each request: equal ids are reuse. Waits are on events, never sleeps.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmchat import OpenAICommon, Response
from llmchat.backends.anthropic import Anthropic
from llmchat.backends.gemini import Gemini
from llmchat.backends.ollama import Ollama
from llmchat.backends.responses import OpenAIResponses
from llmchat.testing import (
    ChatResponder,
    Drop,
    Pause,
    Reply,
    ScriptedServer,
    Stall,
    Step,
    WaitFor,
    Write,
)
from llmchat.transport import Exchange, Timeouts, new_session
from llmchat.wirelog import ENV_VAR

from ..support.anthropic import message_events, sse_reply
from ..support.anthropic import sse as anthropic_sse
from ..support.ollama import chat_line, final, ndjson_reply

HI = [{"role": "user", "content": "Hi"}]
BYE = [{"role": "user", "content": "Bye"}]
KEY = "sk-keepalive/SECRET+0123456789"
WAIT = 10.0
DONE = b"data: [DONE]\n\n"


def ids(server: ScriptedServer) -> list[int]:
    return [request.connection_id for request in server.requests]


def frame(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {"id": "c-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def openai_stream(*after_end: Step, before_end: tuple[Step, ...] = ()) -> Reply:
    """An OpenAI stream: text, finish, `before_end`, ``[DONE]``, then `after_end` steps."""
    steps: list[Step] = [Write(frame(chunk("Hel"))), Write(frame(chunk("lo", "stop")))]
    steps += [*before_end, Write(DONE), *after_end]
    return Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)


# -- every dialect's stream, reused --------------------------------------------------


def _anthropic_reply() -> Reply:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    return sse_reply(anthropic_sse(message_events(message)))


def _responses_events(*, done_after: bool) -> Reply:
    delta = {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hello"}
    output = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello"}],
        }
    ]
    response = {"id": "r-1", "object": "response", "model": "m", "status": "completed"}
    completed = {"type": "response.completed", "response": {**response, "output": output}}
    steps: list[Step] = [
        Write(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n") for e in (delta, completed)
    ]
    if done_after:  # OpenRouter's [DONE] after response.completed: harmless, still reused
        steps.append(Write(DONE))
    return Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)


def _gemini_reply() -> Reply:
    def event(text: str, finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
        if finish:
            candidate["finishReason"] = finish
        return frame({"candidates": [candidate]})

    steps: list[Step] = [Write(event("Hel")), Write(event("lo", "STOP"))]
    return Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)


BackendFactory = Callable[[ScriptedServer], OpenAICommon]

DIALECTS: dict[str, tuple[BackendFactory, Callable[[], Reply]]] = {
    "openai": (lambda s: OpenAICommon(s.url), lambda: openai_stream()),
    "openai-length": (
        lambda s: OpenAICommon(s.url),
        lambda: Reply(
            headers={"Content-Type": "text/event-stream"},
            steps=[Write(frame(chunk("Hello", "stop"))), Write(DONE)],
        ),
    ),
    "anthropic": (lambda s: Anthropic(s.url, api_key="k", model="m"), _anthropic_reply),
    "responses": (
        lambda s: OpenAIResponses(s.url, api_key="k", model="m"),
        lambda: _responses_events(done_after=False),
    ),
    "responses-then-done": (
        lambda s: OpenAIResponses(s.url, api_key="k", model="m"),
        lambda: _responses_events(done_after=True),
    ),
    "ollama": (
        lambda s: Ollama(s.root, model="m"),
        lambda: ndjson_reply([chat_line("Hel"), chat_line("lo"), final()]),
    ),
    "gemini": (lambda s: Gemini(s.url, api_key="k", model="g"), _gemini_reply),
}


@pytest.mark.parametrize("name", list(DIALECTS))
def test_sequential_streams_share_one_connection(server: ScriptedServer, name: str) -> None:
    make_backend, make_reply = DIALECTS[name]
    server.set_script(make_reply())
    with make_backend(server) as backend:
        for _ in range(4):
            response = backend.chat_completion_stream(HI).wait(WAIT)
            assert (response.is_success, response.msg) == (True, "Hello"), response.err
    assert ids(server) == [0, 0, 0, 0]
    assert server.connections_accepted == 1


def test_blocking_calls_reuse_their_connection_and_mix_with_streams(
    server: ScriptedServer,
) -> None:
    server.set_script(ChatResponder("Hello"))
    with OpenAICommon(server.url) as backend:
        assert backend.chat_completion(HI).is_success
        assert backend.chat_completion(HI).is_success
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
        assert backend.chat_completion(HI).is_success
    assert ids(server) == [0, 0, 0, 0]


def test_the_response_settles_before_the_body_ends(server: ScriptedServer) -> None:
    release = threading.Event()
    server.set_script([openai_stream(WaitFor(release, WAIT)), openai_stream()])
    with OpenAICommon(server.url, reuse_grace=WAIT) as backend:
        response = backend.chat_completion_stream(HI).wait(WAIT)
        # Done while the server still holds the body open after [DONE].
        assert response.is_done and response.is_success and response.msg == "Hello"
        first = server.requests[0]
        assert not first.finished.is_set()
        release.set()
        assert first.finished.wait(WAIT) and not first.disconnected.is_set()
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 0]


# -- the refusals: each closes the connection ----------------------------------------


def test_a_body_still_open_after_reuse_grace_is_closed(server: ScriptedServer) -> None:
    server.set_script([openai_stream(Stall()), openai_stream()])
    with OpenAICommon(server.url, reuse_grace=0.05) as backend:
        response = backend.chat_completion_stream(HI).wait(WAIT)
        assert response.is_success and response.msg == "Hello"
        assert server.requests[0].disconnected.wait(WAIT)  # the client hung up
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 1]


def test_bytes_after_the_end_close_the_connection(server: ScriptedServer) -> None:
    junk = Write(frame(chunk("late")))
    server.set_script([openai_stream(junk), openai_stream()])
    with OpenAICommon(server.url) as backend:
        response = backend.chat_completion_stream(HI).wait(WAIT)
        assert response.is_success and response.msg == "Hello"  # the late frame is not read
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 1]


@pytest.mark.parametrize(
    ("tail", "reused"),
    [
        (frame(chunk("late")), False),
        (b'data: {"cut', False),  # unfinished: the decoder still held it
        (b": a comment\n\n", False),
        (DONE, True),  # one more [DONE], as OpenRouter sends: harmless
        (b"\n", True),
    ],
    ids=["frame", "unfinished", "comment", "done-again", "blank"],
)
def test_what_follows_the_end_in_the_same_read_counts_as_the_drain_would(
    server: ScriptedServer, tail: bytes, reused: bool
) -> None:
    # One chunk holds the end and what follows: the reader sees both in one read.
    steps = [Write(frame(chunk("Hel"))), Write(frame(chunk("lo", "stop"))), Write(DONE + tail)]
    stream = Reply(headers={"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)
    server.set_script([stream, openai_stream()])
    with OpenAICommon(server.url) as backend:
        response = backend.chat_completion_stream(HI).wait(WAIT)
        assert response.is_success and response.msg == "Hello"
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == ([0, 0] if reused else [0, 1])


@pytest.mark.parametrize("grace", [None, 0])
def test_no_reuse_grace_closes_at_the_end(server: ScriptedServer, grace: float | None) -> None:
    server.set_script(openai_stream())
    with OpenAICommon(server.url, reuse_grace=grace) as backend:
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 1]


def test_a_cancelled_stream_closes_its_connection(server: ScriptedServer) -> None:
    server.set_script([openai_stream(before_end=(Stall(),)), openai_stream()])
    with OpenAICommon(server.url) as backend:
        response = backend.chat_completion_stream(HI)
        assert server.wait_for_requests(1, WAIT)
        next(iter(response))  # the first chunk arrived: mid-stream
        response.cancel()
        assert server.requests[0].disconnected.wait(WAIT)
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 1]


def test_a_deadline_during_the_drain_closes_the_connection(server: ScriptedServer) -> None:
    server.set_script([openai_stream(Stall()), openai_stream()])
    with OpenAICommon(server.url, reuse_grace=WAIT, request_timeout=1.0) as backend:
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
        assert server.requests[0].disconnected.wait(WAIT)
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 1]


def test_a_cut_stream_is_not_reused(server: ScriptedServer) -> None:
    cut = Reply(
        headers={"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[Write(frame(chunk("Hel"))), Drop()],
    )
    server.set_script([cut, openai_stream()])
    with OpenAICommon(server.url) as backend:
        response = backend.chat_completion_stream(HI).wait(WAIT)
        assert (response.is_success, response.msg) == (False, "Hel")
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 1]


class _Lines(logging.Handler):
    """Every line of the `llmchat` logger, with a wait for one that holds some text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._cond = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._cond:
            self.lines.append(record.getMessage())
            self._cond.notify_all()

    def wait_for(self, text: str) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.having(text) != [], WAIT)

    def having(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]


@pytest.fixture
def wire() -> Iterator[_Lines]:
    logger = logging.getLogger("llmchat")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_drain_is_logged(server: ScriptedServer, wire: _Lines) -> None:
    server.set_script([openai_stream(), openai_stream(Stall())])
    with OpenAICommon(server.url, api_key=KEY, reuse_grace=0.05) as backend:
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
        assert backend.chat_completion_stream(HI).wait(WAIT).is_success
        assert wire.wait_for("--- connection closed")
    assert len(wire.having("--- connection back in the pool")) == 1
    [closed] = wire.having("--- connection closed")
    assert "the body did not end within reuse_grace (0.05s)" in closed
    assert all(KEY not in line for line in wire.lines)


def test_a_request_waits_for_a_connection_being_drained(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The body ends a little after [DONE], so the next request usually starts
    # while the previous connection is still being drained: it waits for it.
    monkeypatch.setattr("llmchat.transport.pool.DRAIN_WAIT", WAIT)
    server.set_script(openai_stream(Pause(0.02)))
    with OpenAICommon(server.url) as backend:
        for _ in range(3):
            assert backend.chat_completion_stream(HI).wait(WAIT).is_success
    assert ids(server) == [0, 0, 0]


# -- the one resend after a dead pooled connection -----------------------------------


OK = Reply.json(
    {
        "id": "c-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello"},
                "finish_reason": "stop",
            }
        ],
    }
)
NO_ANSWER = {
    "fin": Reply(before_headers=[Drop()]),
    "reset": Reply(before_headers=[Drop(rst=True)]),
}


def _call(backend: OpenAICommon, stream: bool, messages: list[dict[str, str]] = HI) -> Response:
    if stream:
        return backend.chat_completion_stream(messages).wait(WAIT)
    return backend.chat_completion(messages)


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "stream"])
@pytest.mark.parametrize("how", list(NO_ANSWER))
def test_a_dead_pooled_connection_is_resent_once_on_a_new_one(
    server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    stream: bool,
) -> None:
    log = tmp_path / "wire.log"
    monkeypatch.setenv(ENV_VAR, str(log))
    answer = openai_stream() if stream else OK
    # The server reads the second request on the pooled connection, then closes
    # it without a byte: the client cannot have seen the close when it took it.
    server.set_script([answer, NO_ANSWER[how], answer])
    with OpenAICommon(server.url, api_key=KEY) as backend:
        assert _call(backend, stream).is_success
        response = _call(backend, stream, BYE)
        assert (response.is_success, response.msg) == (True, "Hello"), response.err
    assert ids(server) == [0, 0, 1]
    assert server.requests[1].body == server.requests[2].body
    text = log.read_text()
    assert text.count("--- resent on a new connection") == 1
    assert KEY not in text


def test_no_resend_once_a_response_byte_arrived(server: ScriptedServer) -> None:
    server.set_script([OK, Reply(before_headers=[Write(b"HTTP/1.1 5"), Drop()]), OK])
    with OpenAICommon(server.url) as backend:
        assert backend.chat_completion(HI).is_success
        response = backend.chat_completion(HI)
    assert not response.is_success and response.error_class == "connection"
    assert len(server.requests) == 2


def test_no_resend_when_a_fresh_connection_fails(server: ScriptedServer) -> None:
    server.set_script([Reply(before_headers=[Drop()]), OK])
    with OpenAICommon(server.url) as backend:
        response = backend.chat_completion(HI)
    assert not response.is_success and response.err == "Connection reset before a response"
    assert len(server.requests) == 1


def test_never_more_than_one_resend(server: ScriptedServer) -> None:
    dead = Reply(before_headers=[Drop()])
    server.set_script([OK, dead, dead, OK])
    with OpenAICommon(server.url) as backend:
        assert backend.chat_completion(HI).is_success
        response = backend.chat_completion(HI)
    assert not response.is_success and response.error_class == "connection"
    assert ids(server) == [0, 0, 1]


def test_a_deadline_before_the_answer_is_not_resent(server: ScriptedServer, wire: _Lines) -> None:
    server.set_script([OK, Reply(before_headers=[Stall()]), OK])
    session = new_session()
    with OpenAICommon(server.url, session=session) as first:
        assert first.chat_completion(HI).is_success
        hurried = first.clone(request_timeout=0.2)
        response = hurried.chat_completion(HI)
    session.close()
    assert response.error_class == "timeout"
    assert ids(server) == [0, 0]
    assert wire.having("resent") == []


class _Capturing(OpenAICommon):
    """Hands each blocking call's Response to the test before it is sent."""

    made: list[Response]

    def make_response(self, request: Any) -> Response:
        response = super().make_response(request)
        self.made.append(response)
        return response


def test_a_cancel_before_the_answer_is_not_resent(server: ScriptedServer, wire: _Lines) -> None:
    server.set_script([OK, Reply(before_headers=[Stall()]), OK])
    with _Capturing(server.url) as backend:
        backend.made = []
        assert backend.chat_completion(HI).is_success
        out: list[Response] = []
        thread = threading.Thread(target=lambda: out.append(backend.chat_completion(HI)))
        thread.start()
        assert server.wait_for_requests(2, WAIT)
        backend.made[-1].cancel()
        thread.join(WAIT)
    assert out[0].is_cancelled
    assert len(server.requests) == 2
    assert wire.having("resent") == []


# -- the pieces ---------------------------------------------------------------------


def test_reuse_grace_is_checked_and_cloned() -> None:
    assert Timeouts().reuse_grace == 1.0
    assert Timeouts(reuse_grace=0).reuse_grace == 0
    with pytest.raises(ValueError, match="reuse_grace"):
        OpenAICommon("http://127.0.0.1:9/v1", reuse_grace=-1)
    with pytest.raises(TypeError, match="reuse_grace"):
        OpenAICommon("http://127.0.0.1:9/v1", reuse_grace=True)
    backend = OpenAICommon("http://127.0.0.1:9/v1", reuse_grace=0.25)
    assert backend.clone().timeouts.reuse_grace == 0.25
    assert backend.clone(reuse_grace=None).timeouts.reuse_grace is None


def test_a_socket_detached_before_the_abort_is_left_alone() -> None:
    import socket

    left, right = socket.socketpair()
    with left, right:
        exchange = Exchange()
        exchange.attach_socket(left)
        assert exchange.detach_socket(left)  # pooled: the abort must not reach it
        exchange.abort("cancel")
        right.sendall(b"x")
        assert left.recv(1) == b"x"
        late = Exchange()
        late.attach_socket(right)
        late.abort("cancel")
        assert not late.detach_socket(right)  # aborted first: never pool it
