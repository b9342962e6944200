"""testing: the loopback `ScriptedServer` over real sockets, and `ChatResponder`'s shapes.

Raw sockets check the exact bytes and framing; `requests` checks what a real
client makes of them. Nothing sleeps: tests wait on events with timeouts.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat.testing import (
    ChatResponder,
    Drop,
    Pause,
    RecordedRequest,
    Reply,
    ScriptedServer,
    ScriptError,
    Stall,
    WaitFor,
    Write,
)
from llmchat.testing.wire import BadRequest, RequestParser

GET_CLOSE = b"GET /v1/models HTTP/1.1\r\nHost: loopback\r\nConnection: close\r\n\r\n"
GET_KEEP = b"GET /v1/models HTTP/1.1\r\nHost: loopback\r\n\r\n"


@pytest.fixture(autouse=True)
def no_server_thread_outlives_its_test() -> Iterator[None]:
    yield
    alive = [t.name for t in threading.enumerate() if t.name.startswith("llmchat-testing")]
    assert alive == []


def connect(server: ScriptedServer) -> socket.socket:
    # The timeout only stops a broken test from hanging; no assertion relies on it.
    return socket.create_connection((server.host, server.port), timeout=5)


def read_to_eof(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = bytearray()
    while marker not in data:
        chunk = sock.recv(65536)
        assert chunk, f"EOF before {marker!r}; got {bytes(data)!r}"
        data += chunk
    return bytes(data)


def split_response(data: bytes) -> tuple[str, dict[str, str], bytes]:
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, f"no header block in {data!r}"
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    return status, headers, body


def chunk_payloads(body: bytes) -> list[bytes]:
    """Split a chunked body into its chunks' data; requires the last chunk to be there."""
    payloads = []
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert body == b"\r\n", "no CRLF after the last chunk"
            return payloads
        payloads.append(body[:size])
        assert body[size : size + 2] == b"\r\n"
        body = body[size + 2 :]


def sse_data(body: bytes) -> list[str]:
    """The `data:` payloads of a well-terminated SSE body, in order."""
    frames = body.decode("utf-8").split("\n\n")
    assert frames[-1] == "", "the stream does not end with a blank line"
    return [frame.removeprefix("data: ") for frame in frames[:-1]]


def only_request(server: ScriptedServer) -> RecordedRequest:
    (record,) = server.requests
    assert record.finished.wait(2)
    return record


# -- requests and recording ------------------------------------------------------


def test_json_reply_round_trip_is_recorded_byte_for_byte() -> None:
    request = (
        b"POST /v1/chat/completions?trace=1 HTTP/1.1\r\nHost: loopback\r\n"
        b"X-Trace-Id: abc\r\nContent-Type: application/json\r\nContent-Length: 13\r\n"
        b'Connection: close\r\n\r\n{"ping":true}'
    )
    server = ScriptedServer(Reply.json({"pong": "é"}, headers={"X-Reply": "1"}))
    with server, connect(server) as sock:
        sock.sendall(request)
        status, headers, body = split_response(read_to_eof(sock))

    assert status == "HTTP/1.1 200 OK"
    assert body == '{"pong":"é"}'.encode()
    assert headers["content-length"] == str(len(body))
    assert headers["content-type"] == "application/json"
    assert (headers["server"], headers["x-reply"], headers["connection"]) == (
        "llmchat-testing",
        "1",
        "close",
    )
    record = only_request(server)
    assert record.raw == request
    assert (record.method, record.path, record.http_version) == (
        "POST",
        "/v1/chat/completions?trace=1",
        "HTTP/1.1",
    )
    assert record.headers["x-trace-id"] == record.headers["X-TRACE-ID"] == "abc"
    assert record.body == b'{"ping":true}'
    assert record.json() == {"ping": True}
    assert record.status == 200
    assert record.headers_sent_at is not None and record.first_body_byte_at is not None
    assert record.finished_at is not None
    assert record.received_at <= record.headers_sent_at <= record.first_body_byte_at
    assert record.first_body_byte_at <= record.finished_at
    assert [size for _, size in record.writes] == [len(body)]
    assert not record.disconnected.is_set() and record.disconnected_at is None


def test_chunked_request_body_is_dechunked_and_raw_is_kept() -> None:
    request = (
        b"POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\n\r\n"
    )
    server = ScriptedServer(Reply.text("ok"))
    with server, connect(server) as sock:
        sock.sendall(request)
        status, _, body = split_response(read_to_eof(sock))

    assert (status, body) == ("HTTP/1.1 200 OK", b"ok")
    record = only_request(server)
    assert record.body == b"abcdefg"
    assert record.raw == request
    assert record.json() is None


def test_requests_client_headers_read_case_insensitively_and_repr_redacts() -> None:
    server = ScriptedServer(Reply.json({}))
    with server as url, requests.Session() as session:
        auth = {"Authorization": "Bearer sk-secret-1"}
        with session.post(url + "/chat/completions", json={"a": 1}, headers=auth) as response:
            assert response.json() == {}

    record = only_request(server)
    assert record.headers["authorization"] == "Bearer sk-secret-1"
    assert record.headers.get_all("AUTHORIZATION") == ["Bearer sk-secret-1"]
    assert record.json() == {"a": 1}
    assert "sk-secret-1" not in repr(record)
    assert "sk-secret-1" not in repr(record.headers)


def test_malformed_request_gets_400_and_is_not_recorded() -> None:
    server = ScriptedServer(Reply.text("never"))
    with server, connect(server) as sock:
        sock.sendall(b"HELLO THERE\r\n\r\n")
        status, headers, body = split_response(read_to_eof(sock))

    assert status == "HTTP/1.1 400 Bad Request"
    assert headers["connection"] == "close"
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    assert server.requests == []


def test_request_parser_output_does_not_depend_on_how_bytes_arrive() -> None:
    stream = (
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n0\r\nTrailer: x\r\n\r\n"
        b"\r\nPOST /b HTTP/1.0\nContent-Length: 2\n\nhi"
        b"GET /c HTTP/1.1\r\nConnection: close\r\n\r\n"
    )
    whole = RequestParser().feed(stream)
    assert [(r.target, r.body, r.keep_alive) for r in whole] == [
        ("/a", b"abc", True),
        ("/b", b"hi", False),
        ("/c", b"", False),
    ]
    # `raw` is each request's own bytes: the stray CRLF between requests is in neither.
    assert b"".join(r.raw for r in whole) == stream.replace(b"\r\n\r\n\r\nPOST", b"\r\n\r\nPOST")
    for cut in range(len(stream) + 1):
        parser = RequestParser()
        assert parser.feed(stream[:cut]) + parser.feed(stream[cut:]) == whole, cut
        assert not parser.pending


@pytest.mark.parametrize(
    "head",
    [
        b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET /\r\n\r\n",
    ],
)
def test_request_parser_refuses_malformed_heads(head: bytes) -> None:
    with pytest.raises(BadRequest):
        RequestParser().feed(head)


# -- connections -----------------------------------------------------------------


def test_keep_alive_serves_two_requests_on_one_connection() -> None:
    server = ScriptedServer([Reply.json({"n": 1}), Reply.sse([{"n": 2}])])
    with server as url, requests.Session() as session:
        with session.get(url + "/models") as first:
            assert first.json() == {"n": 1}
        with session.get(url + "/models") as second:
            assert sse_data(second.content) == ['{"n":2}', "[DONE]"]

    assert server.connections_accepted == 1
    assert [record.connection_id for record in server.requests] == [0, 0]


def test_pipelined_requests_are_answered_in_order_on_one_connection() -> None:
    server = ScriptedServer([Reply.text("one"), Reply.text("two")])
    pipelined = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n" + GET_CLOSE.replace(b"/v1/models", b"/b")
    with server, connect(server) as sock:
        sock.sendall(pipelined)
        data = read_to_eof(sock)

    assert data.count(b"HTTP/1.1 200 OK") == 2
    assert data.index(b"\r\n\r\none") < data.index(b"\r\n\r\ntwo")
    assert data.endswith(b"\r\n\r\ntwo")
    assert [record.path for record in server.requests] == ["/a", "/b"]
    assert server.connections_accepted == 1


def test_accepted_sockets_get_tcp_nodelay(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, int, int]] = []
    original = socket.socket.setsockopt

    def spy(sock: socket.socket, level: int, option: int, value: Any) -> None:
        calls.append((sock.getsockname()[1], level, option, value))
        original(sock, level, option, value)

    monkeypatch.setattr(socket.socket, "setsockopt", spy)
    server = ScriptedServer(Reply.text("ok"))
    with server, connect(server) as sock:
        sock.sendall(GET_CLOSE)
        assert read_to_eof(sock).endswith(b"ok")

    assert (server.port, socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) in calls


# -- the script ------------------------------------------------------------------


def get(session: requests.Session, url: str) -> tuple[int, str]:
    with session.get(url + "/models") as response:
        return response.status_code, response.text


def test_list_script_is_used_in_order_then_answers_500() -> None:
    server = ScriptedServer([Reply.text("first"), Reply.text("second", status=201)])
    with server as url, requests.Session() as session:
        replies = [get(session, url) for _ in range(3)]

    assert replies[:2] == [(200, "first"), (201, "second")]
    status, text = replies[2]
    assert status == 500
    error = json.loads(text)["error"]
    assert error["code"] == 500
    assert error["message"].startswith("no scripted reply for request 3")
    assert [record.status for record in server.requests] == [200, 201, 500]
    assert server.errors == []  # running out is a reply, not a server error


def test_push_goes_before_the_script_and_set_script_replaces_it() -> None:
    server = ScriptedServer(Reply.text("base"))
    with server as url, requests.Session() as session:
        server.push(Reply.text("pushed", status=503))
        assert [get(session, url) for _ in range(2)] == [(503, "pushed"), (200, "base")]
        server.set_script([Reply.text("new")])
        assert get(session, url) == (200, "new")
        assert get(session, url)[0] == 500


def test_callable_script_gets_each_recorded_request() -> None:
    seen: list[RecordedRequest] = []

    def script(request: RecordedRequest) -> Reply:
        seen.append(request)
        return Reply.json({"path": request.path, "echo": request.json()})

    server = ScriptedServer(script)
    with server as url, requests.Session() as session:
        with session.post(url + "/chat/completions", json={"x": [1]}) as response:
            assert response.json() == {"path": "/v1/chat/completions", "echo": {"x": [1]}}
        with session.get(url + "/models?limit=1") as response:
            assert response.json() == {"path": "/v1/models?limit=1", "echo": None}

    assert seen == server.requests
    assert [request.index for request in seen] == [0, 1]


def test_failing_callable_answers_500_and_raises_on_exit() -> None:
    def script(request: RecordedRequest) -> Reply:
        raise RuntimeError("boom in script")

    server = ScriptedServer(script)
    with pytest.raises(ScriptError, match="boom in script"):
        with server as url, requests.get(url + "/models") as response:
            assert response.status_code == 500
            assert "boom in script" in response.json()["error"]["message"]
    assert isinstance(server.errors[0], RuntimeError)


def test_wait_for_requests_counts_recorded_requests() -> None:
    server = ScriptedServer(Reply.text("ok"))
    with server as url:
        assert not server.wait_for_requests(1, timeout=0)
        with requests.get(url + "/models") as response:
            assert response.text == "ok"
        assert server.wait_for_requests(1, timeout=2)


# -- framing ---------------------------------------------------------------------


def test_chunked_framing_sends_each_write_as_its_own_chunk() -> None:
    steps = [Write("ab"), Write(""), Write("cdef"), Write("é")]
    server = ScriptedServer(Reply(steps=steps, framing="chunked"))
    with server, connect(server) as sock:
        sock.sendall(GET_CLOSE)
        _, headers, body = split_response(read_to_eof(sock))

    assert headers["transfer-encoding"] == "chunked"
    assert "content-length" not in headers
    # The empty Write sends nothing: an empty chunk would end the body.
    assert chunk_payloads(body) == [b"ab", b"cdef", "é".encode()]
    assert body == b"2\r\nab\r\n4\r\ncdef\r\n2\r\n\xc3\xa9\r\n0\r\n\r\n"
    assert [size for _, size in only_request(server).writes] == [2, 4, 2]


def test_close_framing_has_no_length_and_ends_with_the_connection() -> None:
    server = ScriptedServer(Reply(body="until the close", framing="close"))
    with server, connect(server) as sock:
        sock.sendall(GET_KEEP)  # the client would keep the connection; the reply does not
        _, headers, body = split_response(read_to_eof(sock))

    assert "content-length" not in headers and "transfer-encoding" not in headers
    assert headers["connection"] == "close"
    assert body == b"until the close"


def test_close_framing_body_reads_whole_with_requests() -> None:
    with ScriptedServer(Reply.text("streamed to EOF", framing="close")) as url:
        with requests.get(url + "/models") as response:
            assert response.text == "streamed to EOF"


def test_drop_mid_body_leaves_a_length_framed_body_short() -> None:
    server = ScriptedServer(Reply(steps=[Write("abc"), Drop(), Write("def")]))
    with server, connect(server) as sock:
        sock.sendall(GET_KEEP)
        _, headers, body = split_response(read_to_eof(sock))

    assert headers["content-length"] == "6"
    assert body == b"abc"
    record = only_request(server)
    assert [size for _, size in record.writes] == [3]
    assert not record.disconnected.is_set()  # the server hung up, not the client


def test_reply_headers_replace_defaults_in_place_and_can_lie() -> None:
    lying = Reply(headers={"Content-Length": "100", "X-Extra": "1"}, body="short", framing="close")
    server = ScriptedServer(lying)
    with server, connect(server) as sock:
        sock.sendall(GET_CLOSE)
        data = read_to_eof(sock)

    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[1:] == [
        b"Server: llmchat-testing",
        b"Content-Type: application/json",
        b"Connection: close",
        b"Content-Length: 100",
        b"X-Extra: 1",
    ]
    assert body == b"short"


# -- timing and faults -----------------------------------------------------------


def test_pause_before_headers_delays_the_status_line() -> None:
    server = ScriptedServer(Reply.json({"late": True}, before_headers=[Pause(0.3)]))
    with server as url, requests.get(url + "/models") as response:
        assert response.json() == {"late": True}

    record = only_request(server)
    assert record.headers_sent_at is not None
    assert record.headers_sent_at - record.received_at >= 0.3


def test_stall_before_headers_times_out_the_client_and_sees_it_leave() -> None:
    server = ScriptedServer(Reply(before_headers=[Stall()]))
    with server as url:
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.get(url + "/models", timeout=(5, 0.3))
        assert server.wait_for_requests(1, timeout=2)
        record = server.requests[0]
        assert record.disconnected.wait(2)

    assert record.headers_sent_at is None
    assert record.disconnected_at is not None and record.disconnected_at >= record.received_at
    assert record.finished.is_set()


def test_client_leaving_during_prefill_pause_ends_it_early() -> None:
    # A long prefill the client gives up on: the server notices while it waits.
    server = ScriptedServer(Reply.json({}, before_headers=[Pause(60)]))
    with server:
        with connect(server) as sock:
            sock.sendall(GET_KEEP)
            assert server.wait_for_requests(1, timeout=2)
        record = server.requests[0]
        assert record.disconnected.wait(2)
        assert record.finished.wait(2)
    assert record.headers_sent_at is None


def test_client_leaving_during_a_mid_body_stall_is_recorded() -> None:
    server = ScriptedServer(Reply(steps=[Write("data: 1\n\n"), Stall()], framing="chunked"))
    with server:
        with connect(server) as sock:
            sock.sendall(GET_KEEP)
            read_until(sock, b"data: 1\n\n\r\n")
        record = server.requests[0]
        assert record.disconnected.wait(2)

    assert [size for _, size in record.writes] == [9]
    assert record.disconnected_at is not None
    assert record.disconnected_at >= record.writes[-1][0]
    assert record.finished.is_set()


def test_wait_for_holds_the_body_until_the_test_sets_the_event() -> None:
    gate = threading.Event()
    steps = [Write("a"), WaitFor(gate), Write("b")]
    server = ScriptedServer(Reply(steps=steps, framing="chunked"))
    with server, connect(server) as sock:
        sock.sendall(GET_CLOSE)
        read_until(sock, b"1\r\na\r\n")
        released_at = time.monotonic()
        gate.set()
        rest = read_to_eof(sock)

    assert rest.endswith(b"1\r\nb\r\n0\r\n\r\n")
    record = only_request(server)
    assert record.writes[1][0] >= released_at


@pytest.mark.parametrize("rst", [True, False])
def test_drop_before_headers_resets_or_closes(rst: bool) -> None:
    server = ScriptedServer(Reply.json({}, before_headers=[Drop(rst=rst)]))
    with server, connect(server) as sock:
        sock.sendall(GET_KEEP)
        if rst:
            with pytest.raises(ConnectionResetError):
                read_to_eof(sock)
        else:
            assert read_to_eof(sock) == b""


def test_drop_with_rst_mid_body_is_a_reset_for_requests() -> None:
    server = ScriptedServer(Reply(steps=[Write("x"), Drop(rst=True)], framing="chunked"))
    with server as url:
        with pytest.raises(requests.exceptions.RequestException) as caught:
            with requests.get(url + "/models") as response:
                response.content  # noqa: B018  (reading the body is the point)
    assert "reset" in str(caught.value).lower()


def test_stop_returns_while_a_handler_is_stalled() -> None:
    server = ScriptedServer(Reply(steps=[Stall()], framing="chunked"))
    server.start()
    try:
        with connect(server) as sock:
            sock.sendall(GET_KEEP)
            read_until(sock, b"\r\n\r\n")  # headers out: the handler is in the stall
            name = f"llmchat-testing-{server.port}-conn-0"
            handler = next(t for t in threading.enumerate() if t.name == name)
            server.stop()
            handler.join(2)
            assert not handler.is_alive()
            assert read_to_eof(sock) == b""  # stopping closed the connection
    finally:
        server.stop()

    record = only_request(server)
    assert not record.disconnected.is_set()


def test_stop_wakes_an_idle_keep_alive_connection() -> None:
    server = ScriptedServer(Reply.text("ok"))
    server.start()
    try:
        with connect(server) as sock:
            sock.sendall(GET_KEEP)
            read_until(sock, b"\r\n\r\nok")
            server.stop()
            assert read_to_eof(sock) == b""
    finally:
        server.stop()
    assert server.connections_accepted == 1


# -- the Reply model -------------------------------------------------------------


def test_sse_reply_frames_events_pauses_and_done() -> None:
    reply = Reply.sse([{"a": "é"}, "event: ping\ndata: x\n\n"], delay=0.5, terminate_last=False)
    assert reply.framing == "chunked"
    assert ("Content-Type", "text/event-stream") in reply.header_pairs
    assert reply.body_steps == (
        Write('data: {"a":"é"}\n\n'),
        Pause(0.5),
        Write("event: ping\ndata: x\n\n"),
        Pause(0.5),
        Write("data: [DONE]\n"),
    )
    kobold = Reply.sse([{"a": 1}], done=False, terminate_last=False)
    assert kobold.body_steps == (Write(b'data: {"a":1}\n'),)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"body": "x", "steps": [Write("y")]}, ValueError),
        ({"framing": "gzip"}, ValueError),
        ({"status": 42}, ValueError),
        ({"steps": ["not a step"]}, TypeError),
        ({"headers": {"X": "a\r\nInjected: 1"}}, ValueError),
    ],
)
def test_reply_refuses_bad_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Reply(**kwargs)


def test_script_refuses_a_list_of_non_replies() -> None:
    with pytest.raises(TypeError, match="Reply"):
        ScriptedServer(["text"])  # type: ignore[list-item]


# -- ChatResponder ---------------------------------------------------------------

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Say hello please"}]},
]


def post(url: str, body: dict[str, Any]) -> requests.Response:
    with requests.post(url, json=body) as response:
        response.content  # noqa: B018  (read it all before the connection closes)
        return response


def test_chat_responder_blocking_shape() -> None:
    with ScriptedServer(ChatResponder("Hello there", model="m1")) as url:
        response = post(url + "/chat/completions", {"messages": MESSAGES})

    assert response.status_code == 200
    assert response.json() == {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "m1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello there"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


@pytest.mark.parametrize("include_usage", [True, False])
def test_chat_responder_stream_shape(include_usage: bool) -> None:
    body: dict[str, Any] = {"messages": MESSAGES, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    responder = ChatResponder("Hello there", chunk_size=4, finish_reason="length")
    with ScriptedServer(responder) as url:
        response = post(url + "/chat/completions", body)

    assert response.headers["Content-Type"] == "text/event-stream"
    payloads = sse_data(response.content)
    assert payloads[-1] == "[DONE]"
    events = [json.loads(payload) for payload in payloads[:-1]]
    assert {event["object"] for event in events} == {"chat.completion.chunk"}
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    deltas = [
        event["choices"][0]["delta"].get("content") for event in events[1:] if event["choices"]
    ]
    assert "".join(delta for delta in deltas if delta) == "Hello there"
    finish = events[4] if include_usage else events[-1]
    assert finish["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    usage_events = [event for event in events if "usage" in event]
    if include_usage:
        assert usage_events == [events[-1]]
        assert events[-1]["choices"] == []
        assert events[-1]["usage"] == {
            "prompt_tokens": 5,
            "completion_tokens": 3,
            "total_tokens": 8,
        }
    else:
        assert usage_events == []


def test_chat_responder_text_completions() -> None:
    with ScriptedServer(ChatResponder("abcdef", chunk_size=3)) as url:
        whole = post(url + "/completions", {"prompt": "one two"}).json()
        stream = post(url + "/completions", {"prompt": "one two", "stream": True})

    assert whole["object"] == "text_completion"
    assert whole["choices"][0]["text"] == "abcdef"
    assert whole["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    payloads = sse_data(stream.content)
    assert payloads[-1] == "[DONE]"
    events = [json.loads(payload) for payload in payloads[:-1]]
    assert [event["choices"][0]["text"] for event in events] == ["abc", "def", ""]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["usage"]["completion_tokens"] == 2


def test_chat_responder_props_and_models() -> None:
    server = ScriptedServer(ChatResponder(model="tiny", n_ctx=2048, total_slots=3))
    with server, requests.Session() as session:
        with session.get(server.root + "/props") as props:
            assert props.json() == {
                "default_generation_settings": {"n_ctx": 2048},
                "total_slots": 3,
            }
        with session.get(server.url + "/models") as models:
            assert [model["id"] for model in models.json()["data"]] == ["tiny"]


def test_chat_responder_unknown_path_is_llama_cpp_404() -> None:
    with ScriptedServer(ChatResponder()) as url:
        response = post(url + "/embeddings", {"input": "x"})

    assert response.status_code == 404
    assert response.json() == {
        "error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}
    }


def test_chat_responder_requires_messages() -> None:
    with ScriptedServer(ChatResponder()) as url:
        response = post(url + "/chat/completions", {"model": "x"})

    assert response.status_code == 400
    assert response.json()["error"]["message"] == "'messages' is required"


# -- Content-Encoding ---------------------------------------------------------


def _decompressor(encoding: str) -> Any:
    """A streaming decompressor with one `feed(bytes) -> bytes` per encoding."""
    import zlib

    if encoding in ("gzip", "deflate"):
        z = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
        return z.decompress
    if encoding == "br":
        import brotli

        return brotli.Decompressor().process
    from urllib3.response import ZstdDecoder  # type: ignore[attr-defined]

    return ZstdDecoder().decompress


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_compressed_reply_sets_the_header_and_flushes_every_write(encoding: str) -> None:
    frames = [b"data: one\n\n", b"data: two\n\n", b"", b"data: three\n\n"]
    reply = Reply(
        200,
        {"Content-Type": "text/event-stream"},
        framing="chunked",
        steps=[Write(f) for f in frames],
        content_encoding=encoding,  # type: ignore[arg-type]
    )
    server = ScriptedServer(reply)
    with server:
        sock = connect(server)
        sock.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, headers, body = split_response(read_to_eof(sock))
        sock.close()
    assert status.startswith("HTTP/1.1 200") and headers["content-encoding"] == encoding
    payloads = chunk_payloads(body)
    assert len(payloads) == 4  # three non-empty writes, then the compressed stream's end
    feed = _decompressor(encoding)
    # Each write decodes on its own, as it arrives: the flush made it complete.
    assert [feed(p) for p in payloads[:3]] == [f for f in frames if f]


def test_compressed_length_reply_counts_compressed_bytes() -> None:
    import gzip

    reply = Reply.json({"text": "é" * 500}, content_encoding="gzip")
    server = ScriptedServer(reply)
    with server:
        answer = requests.get(server.url + "/x", stream=True, timeout=5)
        wire = answer.raw.read(decode_content=False)
    assert int(answer.headers["Content-Length"]) == len(wire) < 500
    assert json.loads(gzip.decompress(wire)) == {"text": "é" * 500}


def test_compressed_reply_is_frozen_data_and_checks_its_encoding() -> None:
    a = Reply.sse([{"x": 1}], content_encoding="deflate")
    b = Reply.sse([{"x": 1}], content_encoding="deflate")
    assert a == b and a.body_steps == b.body_steps
    assert Reply.sse([{"x": 1}]) != a
    with pytest.raises(ValueError, match="content_encoding"):
        Reply(body="x", content_encoding="lzma")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        a.content_encoding = "gzip"  # type: ignore[misc]
