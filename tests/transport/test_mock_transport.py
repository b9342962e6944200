"""MockTransport: scripted answers under the real pipeline, with no socket.

Waits here are on events (the handler's, the exchange's abort), never on
sleeps: a step that must be "in progress" is one the test saw start.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.response import Response
from llmchat.testing import Drop, Reply, ScriptedServer, Write
from llmchat.transport import (
    BodyTooLarge,
    Cut,
    Exchange,
    MockAborted,
    MockRequest,
    MockResponse,
    MockTransport,
    Pause,
    Raise,
    Stall,
    TimedOut,
    Transport,
    classify_exception,
)
from llmchat.transport.timeouts import Timeouts

HI = [{"role": "user", "content": "Hi"}]
URL = "http://mock.invalid/v1"
WAIT = 5.0
CAPTURES = Path("/work/shared/captures/openai-chat")


def chunk(content: str = "", finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content, **delta}, "finish_reason": finish}],
    }


COMPLETION = {
    "id": "x1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def backend_for(answer: MockResponse | Any, **options: Any) -> tuple[OpenAICommon, MockTransport]:
    handler = answer if callable(answer) else (lambda request: answer)
    transport = MockTransport(handler)
    return OpenAICommon(URL, transport=transport, **options), transport


def opened(
    answer: MockResponse, exchange: Exchange | None = None, read_timeout: float | None = None
) -> Any:
    transport = MockTransport(lambda request: answer)
    return transport.open(
        "POST",
        URL + "/chat/completions",
        {},
        b"{}",
        exchange or Exchange(),
        connect_timeout=None,
        read_timeout=read_timeout,
    )


def classified(exc: BaseException, exchange: Exchange, *, after_headers: bool) -> tuple[str, str]:
    return classify_exception(
        exc, exchange=exchange, after_headers=after_headers, timeouts=Timeouts(headers=0.05)
    )


# -- the seam itself -----------------------------------------------------------


def test_is_a_transport_and_exported() -> None:
    import llmchat.transport as transport

    assert issubclass(MockTransport, Transport)
    for name in ("MockTransport", "MockResponse", "MockRequest", "Pause", "Stall", "Cut"):
        assert name in transport.__all__


def test_pieces_bytes_str_and_status_headers() -> None:
    answer = MockResponse(201, {"X-One": "1"}, [b"ab", "cé", b"", Pause(0)])
    http = opened(answer)
    assert http.status_code == 201
    assert http.headers["x-one"] == "1"  # case-insensitive, as requests' headers
    assert list(http.iter_bytes()) == [b"ab", "cé".encode()]
    http.close()
    http.close()  # idempotent


def test_read_applies_the_limit_through_bounded() -> None:
    http = opened(MockResponse(body=[b"abcd", b"efgh", b"ijkl"]))
    got: list[bytes] = []
    with pytest.raises(BodyTooLarge) as info:
        for data in http.iter_bytes(6):
            got.append(data)
    assert got == [b"abcd", b"ef"] and info.value.limit == 6
    assert opened(MockResponse(body="xyz")).read() == b"xyz"


def test_requests_are_recorded_with_parsed_json() -> None:
    backend, transport = backend_for(MockResponse.json(COMPLETION))
    backend.chat_completion(HI)
    (request,) = transport.requests
    assert isinstance(request, MockRequest)
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.url == URL + "/chat/completions"
    assert request.json["messages"] == HI and request.body.startswith(b"{")
    assert request.headers["user-agent"].startswith("llmchat/")
    with pytest.raises(TypeError):
        request.headers["X"] = "y"  # type: ignore[index]
    raw = opened(MockResponse())
    assert raw.status_code == 200
    odd = MockTransport(lambda r: MockResponse())
    odd.open("GET", URL, {}, None, Exchange(), connect_timeout=None, read_timeout=None)
    assert odd.requests[0].body == b"" and odd.requests[0].json is None


def test_handler_that_raises_answers_500_and_is_kept() -> None:
    def handler(request: MockRequest) -> MockResponse:
        raise KeyError("missing")

    backend, transport = backend_for(handler)
    r = backend.chat_completion(HI)
    assert (r.error_class, r.error_status) == ("http", 500)
    assert "KeyError" in (r.err or "")
    assert [type(e) for e in transport.errors] == [KeyError]
    with pytest.raises(RuntimeError, match="1 MockTransport handler error"):
        transport.check()
    bad, transport = backend_for(lambda request: b"not a MockResponse")
    assert bad.chat_completion(HI).error_status == 500
    assert isinstance(transport.errors[0], TypeError)


def test_bad_scripts_raise_at_construction() -> None:
    with pytest.raises(ValueError):
        Pause(-1)
    with pytest.raises(TypeError):
        MockResponse(body=[3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        MockResponse(before_headers=[b"early"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        MockResponse(status=42)
    with pytest.raises(TypeError):
        MockTransport("handler")  # type: ignore[arg-type]


# -- steps ---------------------------------------------------------------------


def test_cut_in_the_body_is_a_response_failure() -> None:
    exchange = Exchange()
    http = opened(MockResponse(body=[b"par", Cut()]), exchange)
    got: list[bytes] = []
    with pytest.raises(Exception) as info:
        got.extend(http.iter_bytes())
    assert got == [b"par"]
    error_class, message = classified(info.value, exchange, after_headers=True)
    assert error_class == "response" and message.startswith("Body cut off")


def test_cut_before_headers_is_a_connection_failure() -> None:
    exchange = Exchange()
    with pytest.raises(ConnectionResetError) as info:
        opened(MockResponse(before_headers=[Cut()]), exchange)
    assert classified(info.value, exchange, after_headers=False) == (
        "connection",
        "Connection reset before a response",
    )


def test_raise_step_refused_and_unknown() -> None:
    backend, _ = backend_for(MockResponse(before_headers=[Raise(ConnectionRefusedError())]))
    r = backend.chat_completion(HI)
    assert (r.error_class, r.err) == ("connection", "Connection refused")
    backend, _ = backend_for(MockResponse(before_headers=[Raise(RuntimeError("odd"))]))
    assert backend.chat_completion(HI).err == "RuntimeError: odd"


def test_stall_before_headers_honours_read_timeout() -> None:
    backend, _ = backend_for(MockResponse(before_headers=[Stall()]), headers_timeout=0.05)
    r = backend.chat_completion(HI)
    assert (r.error_class, r.err) == ("timeout", "No response headers within 0.05s")
    s = backend.chat_completion_stream(HI).wait(WAIT)
    assert (s.error_class, s.err) == ("timeout", "No response headers within 0.05s")


def test_a_pause_longer_than_read_timeout_times_out_like_a_socket() -> None:
    backend, _ = backend_for(MockResponse(before_headers=[Pause(30)]), headers_timeout=0.05)
    started = time.monotonic()
    assert backend.chat_completion(HI).err == "No response headers within 0.05s"
    assert time.monotonic() - started < WAIT


def test_stall_in_the_body_honours_read_timeout() -> None:
    answer = MockResponse.sse([chunk("Hi"), Stall()], done=False)
    backend, _ = backend_for(answer, headers_timeout=0.05)
    r = backend.chat_completion_stream(HI).wait(WAIT)
    assert (r.error_class, r.err, r.latest) == ("timeout", "Body silent for more than 0.05s", "Hi")


def test_timed_out_fires_at_once_in_both_phases() -> None:
    backend, _ = backend_for(MockResponse(before_headers=[TimedOut()]))  # headers_timeout 60s
    started = time.monotonic()
    assert backend.chat_completion(HI).err == "No response headers within 60s"
    answer = MockResponse.sse([chunk("a"), TimedOut()], done=False)
    backend, _ = backend_for(answer)
    assert backend.chat_completion_stream(HI).wait(WAIT).err == "Body silent for more than 60s"
    assert time.monotonic() - started < WAIT


def test_pauses_and_bytes_reset_the_silence() -> None:
    # Three pauses of 30 ms with bytes between never reach a 200 ms read timeout.
    pieces = [chunk("a"), Pause(0.03), chunk("b"), Pause(0.03), chunk("c", "stop")]
    backend, _ = backend_for(MockResponse.sse(pieces), headers_timeout=0.2)
    r = backend.chat_completion_stream(HI).wait(WAIT)
    assert r.is_success and r.msg == "abc"


# -- aborts --------------------------------------------------------------------


def test_abort_wakes_a_stall_before_headers() -> None:
    entered = threading.Event()
    exchange = Exchange()

    def handler(request: MockRequest) -> MockResponse:
        entered.set()
        return MockResponse(before_headers=[Stall()])

    transport = MockTransport(handler)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            transport.open("POST", URL, {}, b"", exchange, connect_timeout=None, read_timeout=None)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert entered.wait(WAIT)
    exchange.abort("cancel")
    thread.join(WAIT)
    assert not thread.is_alive()
    assert isinstance(failure[0], MockAborted) and failure[0].reason == "cancel"


def test_cancel_in_prefill_settles_at_once() -> None:
    entered = threading.Event()

    def handler(request: MockRequest) -> MockResponse:
        entered.set()
        return MockResponse.sse([chunk("never", "stop")], before_headers=[Stall()])

    backend, _ = backend_for(handler)
    r = backend.chat_completion_stream(HI)
    assert entered.wait(WAIT)
    r.cancel()
    assert r.is_cancelled and r.err == "Cancelled by user" and r.latest == ""
    assert r.wait(WAIT).is_done


def test_cancel_mid_body_ends_iteration_with_an_exception() -> None:
    exchange = Exchange()
    http = opened(MockResponse(body=[b"one", Stall(), b"two"]), exchange)
    pieces = http.iter_bytes()
    assert next(pieces) == b"one"
    threading.Timer(0, exchange.abort, args=("cancel",)).start()  # from another thread
    with pytest.raises(MockAborted):
        next(pieces)


def test_cancel_mid_stream_through_the_backend() -> None:
    answer = MockResponse.sse([chunk("Hel"), chunk("lo"), Stall(), chunk(" never", "stop")])
    backend, _ = backend_for(answer)
    r = backend.chat_completion_stream(HI)
    seen = ""
    for c in r:
        seen += c.content
        if seen == "Hello":
            r.cancel()
    assert r.is_cancelled and r.latest == "Hello"


def test_abort_after_the_last_piece_is_not_a_clean_end() -> None:
    exchange = Exchange()
    http = opened(MockResponse(body=[b"all"]), exchange)
    pieces = http.iter_bytes()
    assert next(pieces) == b"all"
    exchange.abort("cancel")
    with pytest.raises(MockAborted):
        next(pieces)


def test_an_aborted_exchange_never_reaches_the_handler() -> None:
    exchange = Exchange()
    exchange.abort("cancel")
    transport = MockTransport(lambda request: MockResponse())
    with pytest.raises(MockAborted):
        transport.open("POST", URL, {}, b"", exchange, connect_timeout=None, read_timeout=None)
    assert transport.requests == []


def test_deadline_is_a_timeout_in_prefill_and_mid_body() -> None:
    backend, _ = backend_for(MockResponse(before_headers=[Stall()]), request_timeout=0.05)
    r = backend.chat_completion(HI)
    assert (r.error_class, r.err) == (
        "timeout",
        "No complete response within request_timeout (0.05s)",
    )
    answer = MockResponse.sse([chunk("part"), Stall()], done=False)
    backend, _ = backend_for(answer, request_timeout=0.05)
    s = backend.chat_completion_stream(HI).wait(WAIT)
    assert s.error_class == "timeout" and s.latest == "part"
    assert s.err == "No complete response within request_timeout (0.05s)"


def test_finish_grace_ends_a_stall_after_the_finish_chunk() -> None:
    answer = MockResponse.sse([chunk("done", "stop"), Stall()], done=False)
    backend, _ = backend_for(answer, stream_finish_grace=0.05)
    r = backend.chat_completion_stream(HI).wait(WAIT)
    assert r.is_success and r.msg == "done"


def test_add_abort_callback_runs_once_and_at_once_when_late() -> None:
    exchange = Exchange()
    calls: list[str] = []
    exchange.add_abort_callback(lambda: calls.append("early"))
    exchange.add_abort_callback(lambda: 1 / 0)  # what a callback raises is ignored
    exchange.abort("cancel")
    exchange.abort("deadline")
    exchange.add_abort_callback(lambda: calls.append("late"))
    assert calls == ["early", "late"] and exchange.aborted == "cancel"
    finished = Exchange()
    finished.add_abort_callback(lambda: calls.append("dropped"))
    finished.finish()
    finished.abort("cancel")
    assert "dropped" not in calls


# -- threads -------------------------------------------------------------------


def test_concurrent_opens_are_each_recorded_and_answered() -> None:
    def handler(request: MockRequest) -> MockResponse:
        text = request.json["messages"][0]["content"]
        reply = {
            **COMPLETION,
            "choices": [
                {**COMPLETION["choices"][0], "message": {"role": "assistant", "content": text}}
            ],
        }
        return MockResponse.json(reply)

    backend, transport = backend_for(handler)
    results: dict[int, Response] = {}
    go = threading.Event()

    def call(index: int) -> None:
        go.wait(WAIT)
        if index % 2:
            results[index] = backend.chat_completion([{"role": "user", "content": f"n{index}"}])
        else:
            stream = backend.chat_completion_stream([{"role": "user", "content": f"n{index}"}])
            results[index] = stream.wait(WAIT)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(WAIT)
    assert not any(t.is_alive() for t in threads)
    assert len(transport.requests) == 16
    assert {r.msg for r in results.values()} == {f"n{i}" for i in range(16)}
    assert all(results[i].msg == f"n{i}" and results[i].is_success for i in range(16))


# -- the same Response as a real socket ----------------------------------------


def snapshot(r: Response) -> dict[str, Any]:
    fields = (
        "msg reasoning_text tool_calls refusal citations model id usage prompt_tokens "
        "completion_tokens total_tokens reasoning_tokens cached_tokens finish_reason "
        "provider_finish_reason is_success is_cancelled err error_class error_status "
        "dropped_frames"
    )
    out = {name: getattr(r, name) for name in fields.split()}
    out["chunks"] = [
        (c.content, c.is_final, c.model, c.finish_reason, c.tool_calls, c.thinking, c.usage)
        for c in r
    ]
    return out


def sse_events(data: bytes) -> list[bytes]:
    return [m.group(0) for m in re.finditer(rb"(?s).*?(?:\n\n|\r\n\r\n|$)", data) if m.group(0)]


def over_socket(reply: Reply, *, stream: bool) -> Response:
    with ScriptedServer(reply) as url:
        backend = OpenAICommon(url)
        try:
            return (
                backend.chat_completion_stream(HI).wait(WAIT)
                if stream
                else backend.chat_completion(HI)
            )
        finally:
            backend.close()


def over_mock(answer: MockResponse, *, stream: bool) -> Response:
    backend, _ = backend_for(answer)
    return backend.chat_completion_stream(HI).wait(WAIT) if stream else backend.chat_completion(HI)


def stream_cases() -> Iterator[Any]:
    yield pytest.param(
        [f"data: {e}\n\n".encode() for e in ('{"choices":[{"index":0,"delta":{"content":"a"}}]}',)]
        + [b"data: [DONE]\n\n"],
        id="no-finish-but-done",
    )
    if CAPTURES.is_dir():
        for path in sorted(CAPTURES.glob("*.sse.txt")):
            yield pytest.param(sse_events(path.read_bytes()), id=path.name)


@pytest.mark.parametrize("events", list(stream_cases()))
def test_streamed_bytes_give_the_same_response_as_a_socket(events: list[bytes]) -> None:
    headers = {"Content-Type": "text/event-stream"}
    real = over_socket(
        Reply(200, headers, framing="chunked", steps=[Write(e) for e in events]), stream=True
    )
    mocked = over_mock(MockResponse(200, headers, events), stream=True)
    assert snapshot(mocked) == snapshot(real)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, COMPLETION),
        (200, {**COMPLETION, "choices": [{**COMPLETION["choices"][0], "finish_reason": "length"}]}),
        (429, {"error": {"message": "slow down", "type": "rate_limit"}}),
        (200, {"error": {"message": "in band"}}),
    ],
)
def test_blocking_bytes_give_the_same_response_as_a_socket(status: int, body: Any) -> None:
    real = over_socket(Reply.json(body, status), stream=False)
    mocked = over_mock(MockResponse.json(body, status), stream=False)
    assert snapshot(mocked) == snapshot(real)


def test_capture_json_bodies_match_a_socket() -> None:
    if not CAPTURES.is_dir():
        pytest.skip("no captures on this machine")
    for path in sorted(CAPTURES.glob("*.json")):
        data = path.read_bytes()
        headers = {"Content-Type": "application/json"}
        real = over_socket(Reply(200, headers, data), stream=False)
        mocked = over_mock(MockResponse(200, headers, data), stream=False)
        assert snapshot(mocked) == snapshot(real), path.name


@pytest.mark.parametrize("stream", [True, False])
def test_cut_gives_the_same_failure_as_a_socket_reset(stream: bool) -> None:
    if stream:
        headers = {"Content-Type": "text/event-stream"}
        first = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    else:
        headers = {"Content-Type": "application/json"}
        first = b'{"choices":'
    real = over_socket(
        Reply(200, headers, framing="chunked", steps=[Write(first), Drop(rst=True)]),
        stream=stream,
    )
    mocked = over_mock(MockResponse(200, headers, [first, Cut()]), stream=stream)
    assert (
        (mocked.error_class, mocked.latest)
        == (real.error_class, real.latest)
        == (
            "response",
            "a" if stream else "",
        )
    )
    assert mocked.err is not None and real.err is not None
    if stream:
        assert mocked.err == real.err == "Stream closed without [DONE] or a finish reason"
    else:
        assert mocked.err.startswith("Body cut off") and real.err.startswith("Body cut off")
