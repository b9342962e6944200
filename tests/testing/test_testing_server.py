"""testing: the loopback `ScriptedServer` over real sockets: requests, connections, the
script, framing, timing and faults (`Reply` and `ChatResponder`: test_testing_responder.py).

Raw sockets check the exact bytes and framing; `requests` checks what a real
client makes of them. Nothing sleeps: tests wait on events with timeouts.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest
import requests

from llmchat.testing import (
    Drop,
    Pause,
    Pings,
    RecordedRequest,
    Reply,
    ScriptedServer,
    ScriptError,
    Stall,
    WaitFor,
    Write,
)
from llmchat.testing.wire import BadRequest, RequestParser

from .support import (
    GET_CLOSE,
    GET_KEEP,
    chunk_payloads,
    connect,
    only_request,
    read_to_eof,
    read_until,
    split_response,
    sse_data,
)

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


def test_pings_repeat_until_the_client_leaves() -> None:
    """`Pings`: a server that keeps a stream alive with comments and never answers."""
    reply = Reply(
        steps=[Write(b"data: 1\n\n"), Pings(0.01)],
        framing="chunked",
        headers={"Content-Type": "text/event-stream"},
    )
    server = ScriptedServer(reply)
    with server as url:
        with requests.get(url + "/models", stream=True, timeout=5) as answer:
            lines = answer.iter_lines()
            assert next(lines) == b"data: 1"
            pings = [line for line, _ in zip(lines, range(8), strict=False) if line == b":"]
        assert len(pings) >= 3
        record = server.requests[0]
        assert record.disconnected.wait(5)  # closing the reply ended the pings
    assert len(record.writes) >= 4


def test_pings_need_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="every"):
        Pings(0)


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
