"""llmchat over HTTPS: the loopback server with a test CA made at run time (trustme).

The same real-socket rules as plain HTTP (tests/test_streaming.py): every
fault is scripted on the server, the server side is asserted too (did the
client hang up, on which connection, after how many handshakes), and every
wait is on an event. The CA reaches llmchat through the public API: a
`session=` built by `llmchat.transport.new_session`, so cancel still shuts
the socket down in any phase.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.response import Response
from llmchat.testing import ChatResponder, Drop, Reply, ScriptedServer, Stall, Write

from .support import TestCA

HI = [{"role": "user", "content": "Hi"}]
CLOSED = "Stream closed without [DONE] or a finish reason"
TEXT = "Hello over TLS, one small piece at a time"
WAIT = 10.0
"""Seconds any wait may take before the test fails (a safety bound, not a figure)."""
STREAMS = 5
"""Sequential streamed calls in the reuse tests."""


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def server(ca: TestCA) -> Iterator[ScriptedServer]:
    with ca.server(ChatResponder(TEXT, chunk_size=4)) as srv:
        yield srv


def backend(server: ScriptedServer, ca: TestCA, **kwargs: Any) -> OpenAICommon:
    return OpenAICommon(server.url, session=ca.session(), **kwargs)


def settled(response: Response) -> Response:
    assert response.wait(WAIT).is_done, "the call never settled"
    return response


def sse(*contents: str, finish: str | None = None) -> list[bytes]:
    """`data:` lines for chat.completion.chunk events, one per content (and the finish)."""
    events = [f'{{"choices":[{{"delta":{{"content":"{text}"}}}}]}}' for text in contents]
    if finish is not None:
        events.append(f'{{"choices":[{{"delta":{{}},"finish_reason":"{finish}"}}]}}')
    return [f"data: {event}\n\n".encode() for event in events]


def event_stream(*steps: Write | Drop | Stall, framing: Any = "chunked") -> Reply:
    return Reply(headers={"Content-Type": "text/event-stream"}, framing=framing, steps=steps)


# -- the server's HTTPS mode -------------------------------------------------------------


def test_the_url_is_https_and_tls_must_be_a_context(ca: TestCA) -> None:
    with ca.server(Reply.json({})) as srv:
        assert srv.url.startswith("https://127.0.0.1:") and srv.url.endswith("/v1")
    with pytest.raises(TypeError, match=r"tls must be an ssl\.SSLContext"):
        ScriptedServer(tls=str(ca.ca_path))  # type: ignore[arg-type]


def test_one_handshake_per_connection_counted_on_the_server(ca: TestCA) -> None:
    with ca.server(Reply.json({"ok": True})) as srv:
        for _ in range(2):  # one session each: two connections
            with ca.session() as session:
                assert session.get(srv.url + "/models", timeout=WAIT).json() == {"ok": True}
        assert (srv.connections_accepted, srv.tls_handshakes) == (2, 2)
        assert [r.connection_id for r in srv.requests] == [0, 1]


def test_large_bodies_cross_many_tls_records_both_ways(ca: TestCA) -> None:
    # 16 KiB is the most one record holds: the server reads partial records
    # ("want read") and its writes outrun the kernel's buffer ("want write").
    upload, download = b"u" * 300_000, b"d" * 2_000_000
    with ca.server(Reply(200, {"Content-Type": "text/plain"}, download)) as srv:
        with ca.session() as session:
            got = session.post(srv.url + "/upload", data=upload, timeout=WAIT)
        assert got.content == download and srv.requests[0].body == upload


def test_pipelined_requests_in_one_record_are_both_answered(ca: TestCA) -> None:
    client = ssl.create_default_context(cafile=str(ca.ca_path))
    two = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"
    with ca.server(Reply.json({"ok": True})) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT) as raw:
            with client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(two)  # one write: one TLS record holding both requests
                assert srv.wait_for_requests(2, timeout=WAIT)
                received = b""
                while received.count(b'{"ok":true}') < 2:
                    data = tls.recv(65536)
                    assert data, f"the server closed after {received!r}"
                    received += data
        assert [(r.path, r.connection_id) for r in srv.requests] == [("/a", 0), ("/b", 0)]


def test_a_client_that_does_not_trust_the_certificate_gets_a_tls_failure(
    server: ScriptedServer,
) -> None:
    response = OpenAICommon(server.url).chat_completion(HI)  # the system CAs only
    assert (response.is_success, response.error_class) == (False, "connection")
    assert (response.err or "").startswith("TLS failure: ")
    assert server.requests == [] and server.tls_handshakes == 0  # and no server error


def test_stop_ends_a_handshake_that_never_comes(ca: TestCA) -> None:
    with ca.server(Reply.json({})) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT):
            # Connections are accepted in order: once this request is in, the
            # silent one before it has its thread, waiting in the handshake.
            with ca.session() as session:
                assert session.get(srv.url + "/models", timeout=WAIT).ok
            # Leaving the server's `with` now stops it: it must end that wait.
    assert [r.connection_id for r in srv.requests] == [1]
    assert srv.errors == [] and srv.tls_handshakes == 1


def test_plain_http_to_the_https_port_is_refused_without_a_server_error(
    server: ScriptedServer,
) -> None:
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{server.port}/v1/models", timeout=WAIT)
    assert server.requests == [] and server.tls_handshakes == 0


# -- blocking and streamed calls ---------------------------------------------------------


def test_a_blocking_call_over_https(server: ScriptedServer, ca: TestCA) -> None:
    response = backend(server, ca).chat_completion(HI)
    assert (response.is_success, response.msg) == (True, TEXT)
    assert server.tls_handshakes == 1


def test_a_streamed_call_over_https(server: ScriptedServer, ca: TestCA) -> None:
    response = settled(backend(server, ca).chat_completion_stream(HI))
    assert (response.is_success, response.msg, response.finish_reason) == (True, TEXT, "stop")
    assert "".join(chunk.content for chunk in response) == TEXT
    assert server.tls_handshakes == 1


def test_blocking_calls_share_one_connection_and_one_handshake(
    server: ScriptedServer, ca: TestCA
) -> None:
    llm = backend(server, ca)
    assert all(llm.chat_completion(HI).is_success for _ in range(3))
    assert [r.connection_id for r in server.requests] == [0, 0, 0]
    assert (server.connections_accepted, server.tls_handshakes) == (1, 1)


def test_a_session_verify_loses_to_requests_ca_bundle_while_trust_env_is_on(
    server: ScriptedServer, ca: TestCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Why `TestCA.session` turns trust_env off: requests replaces `session.verify`
    # with REQUESTS_CA_BUNDLE (or CURL_CA_BUNDLE) whenever either is set.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", requests.certs.where())
    session = ca.session()
    session.trust_env = True
    response = OpenAICommon(server.url, session=session).chat_completion(HI)
    assert (response.error_class, (response.err or "")[:12]) == ("connection", "TLS failure:")
    session.trust_env = False
    assert OpenAICommon(server.url, session=session).chat_completion(HI).is_success


# -- cancel, cuts and the client-gone detection over TLS --------------------------------


def test_cancel_during_prefill_closes_the_tls_socket(server: ScriptedServer, ca: TestCA) -> None:
    server.push(Reply(before_headers=[Stall()]))
    response = backend(server, ca).chat_completion_stream(HI)
    assert server.wait_for_requests(1, timeout=WAIT)
    response.cancel()
    assert response.is_cancelled and response.err == "Cancelled by user"
    assert server.requests[0].disconnected.wait(WAIT), "the server never saw the hang-up"
    assert server.requests[0].headers_sent_at is None  # it was still in prefill


def test_cancel_mid_stream_hangs_up_over_tls(server: ScriptedServer, ca: TestCA) -> None:
    server.push(event_stream(*map(Write, sse("so far")), Stall()))
    response = backend(server, ca).chat_completion_stream(HI)
    assert next(iter(response)).content == "so far"
    response.cancel()
    assert response.is_cancelled and response.latest == "so far"
    assert server.requests[0].disconnected.wait(WAIT)


def test_cancel_on_a_pooled_tls_connection_hangs_up(server: ScriptedServer, ca: TestCA) -> None:
    llm = backend(server, ca)
    assert llm.chat_completion(HI).is_success  # pools its connection
    server.push(Reply(before_headers=[Stall()]))
    response = llm.chat_completion_stream(HI)
    assert server.wait_for_requests(2, timeout=WAIT)
    response.cancel()
    assert server.requests[1].disconnected.wait(WAIT), "the server never saw the hang-up"
    assert [r.connection_id for r in server.requests] == [0, 0]


@pytest.mark.parametrize("rst", [False, True], ids=["fin", "reset"])
def test_a_stream_cut_over_tls_is_the_stream_closed_failure(
    server: ScriptedServer, ca: TestCA, rst: bool
) -> None:
    # A `Drop` sends no close_notify: the TLS stream ends as a bare cut.
    server.push(event_stream(*map(Write, sse("a")), Drop(rst=rst)))
    response = settled(backend(server, ca).chat_completion_stream(HI))
    assert (response.error_class, response.err, response.latest) == ("response", CLOSED, "a")


def test_a_close_framed_stream_without_an_end_is_the_stream_closed_failure(
    server: ScriptedServer, ca: TestCA
) -> None:
    # The server closes cleanly (close_notify, then FIN) but the dialect never ended.
    server.push(event_stream(*map(Write, sse("half")), framing="close"))
    response = settled(backend(server, ca).chat_completion_stream(HI))
    assert (response.error_class, response.err, response.latest) == ("response", CLOSED, "half")


def test_the_finish_grace_over_tls_settles_and_hangs_up(server: ScriptedServer, ca: TestCA) -> None:
    server.push(event_stream(*map(Write, sse("x", finish="stop")), Stall()))
    response = settled(backend(server, ca, stream_finish_grace=0.3).chat_completion_stream(HI))
    assert (response.is_success, response.finish_reason) == (True, "stop")
    assert server.requests[0].disconnected.wait(WAIT), "the connection was not dropped"


def test_the_deadline_mid_stream_over_tls_is_a_timeout(server: ScriptedServer, ca: TestCA) -> None:
    server.push(event_stream(*map(Write, sse("slow")), Stall()))
    response = settled(backend(server, ca, request_timeout=0.4).chat_completion_stream(HI))
    assert response.error_class == "timeout" and response.latest == "slow"
    assert server.requests[0].disconnected.wait(WAIT)


# -- keep-alive after streams, and the one resend, over TLS ------------------------------


def test_sequential_streams_share_one_connection_and_one_handshake(
    server: ScriptedServer, ca: TestCA
) -> None:
    llm = backend(server, ca)
    for _ in range(STREAMS):
        assert settled(llm.chat_completion_stream(HI)).is_success
    assert [r.connection_id for r in server.requests] == [0] * STREAMS
    assert (server.connections_accepted, server.tls_handshakes) == (1, 1)


def test_a_blocking_call_after_a_stream_reuses_its_connection(
    server: ScriptedServer, ca: TestCA
) -> None:
    llm = backend(server, ca)
    assert settled(llm.chat_completion_stream(HI)).is_success
    assert llm.chat_completion(HI).is_success
    assert (server.connections_accepted, server.tls_handshakes) == (1, 1)


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
def test_a_dead_pooled_connection_is_resent_once_on_a_new_one(
    server: ScriptedServer, ca: TestCA, streamed: bool
) -> None:
    llm = backend(server, ca)
    call = llm.chat_completion_stream if streamed else llm.chat_completion
    assert settled(call(HI)).is_success  # leaves its connection in the pool
    # The server reads the next request on that connection and hangs up unanswered.
    server.push(Reply(before_headers=[Drop()]))
    response = settled(call(HI))
    assert (response.is_success, response.msg) == (True, TEXT)
    assert [r.connection_id for r in server.requests] == [0, 0, 1]
    assert (server.connections_accepted, server.tls_handshakes) == (2, 2)


def test_a_fresh_connection_that_dies_unanswered_is_not_resent(
    server: ScriptedServer, ca: TestCA
) -> None:
    server.push(Reply(before_headers=[Drop()]))
    response = backend(server, ca).chat_completion(HI)
    assert (response.is_success, response.error_class) == (False, "connection")
    assert len(server.requests) == 1 and server.tls_handshakes == 1


def test_no_resend_once_a_response_byte_arrived_on_a_pooled_connection(
    server: ScriptedServer, ca: TestCA
) -> None:
    llm = backend(server, ca)
    assert llm.chat_completion(HI).is_success  # a blocking call pools its connection
    server.push(event_stream(*map(Write, sse("a")), Drop()))
    response = settled(llm.chat_completion_stream(HI))
    assert (response.err, response.latest) == (CLOSED, "a")
    assert [r.connection_id for r in server.requests] == [0, 0]
