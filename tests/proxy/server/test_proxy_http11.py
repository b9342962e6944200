"""The proxy's own server speaks HTTP/1.1: keep-alive, chunked answers and bodies, on real sockets.

Reuse is proven on the server's side: the server counts the connections it
accepted. Every wait ends on an event (an answer, the server closing the
connection) bounded by a generous socket timeout (`WAIT`), never on a sleep.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import selectors
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.backends.mock import MockBackend
from llmchat.proxy import make_app, make_server
from llmchat.proxy.server import ProxyServer
from llmchat.testing import ChatResponder, Reply, ScriptedServer

from ...support.proxy import UsageSink

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

WAIT = 10.0
TEXT = "Hello there, this is a streamed answer."
MESSAGES = [{"role": "user", "content": "hi"}]
App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Counted:
    """A serving `ProxyServer` and the client addresses it accepted, in order."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server
        self.accepted: list[Any] = []
        self.url = server.url
        accept = server.get_request

        def counting() -> tuple[socket.socket, Any]:
            pair = accept()
            self.accepted.append(pair[1])
            return pair

        server.get_request = counting  # type: ignore[method-assign]

    def connect(self) -> socket.socket:
        host, port = self.server.server_address[:2]
        return socket.create_connection((str(host), int(port)), timeout=WAIT)

    def http(self) -> http.client.HTTPConnection:
        host, port = self.server.server_address[:2]
        return http.client.HTTPConnection(str(host), int(port), timeout=WAIT)


@contextlib.contextmanager
def serving(app: App, **limits: Any) -> Iterator[Counted]:
    server = make_server(app, "127.0.0.1", 0, **limits)
    counted = Counted(server)
    thread = threading.Thread(target=server.serve_forever, name="test-proxy", daemon=True)
    thread.start()
    try:
        yield counted
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder(TEXT, chunk_size=5)).start()
    yield server
    server.stop()


@contextlib.contextmanager
def proxying(upstream: ScriptedServer, **limits: Any) -> Iterator[Counted]:
    """The proxy's app over `upstream`, served under `limits`."""
    with OpenAICommon(upstream.url) as backend, serving(make_app(backend), **limits) as counted:
        yield counted


@pytest.fixture
def proxy(upstream: ScriptedServer) -> Iterator[Counted]:
    with proxying(upstream) as counted:
        yield counted


_OPEN: list[Raw] = []


@pytest.fixture(autouse=True)
def _close_raw_sockets() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


class Raw:
    """A raw client socket whose answers are parsed by `http.client`, several in a row.

    Closed after the test (`_close_raw_sockets`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._io = socket.SocketIO(sock, "rb")
        self._file = _Kept(self._io)
        _OPEN.append(self)

    def close(self) -> None:
        self._io.close()
        self.sock.close()

    def makefile(self, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return self._file

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self, method: str = "GET") -> tuple[http.client.HTTPResponse, bytes]:
        response = http.client.HTTPResponse(self, method=method)  # type: ignore[arg-type]
        response.begin()
        return response, response.read()

    def ended(self) -> bool:
        """Whether the server closed the connection (waits for it, up to `WAIT`)."""
        try:
            return self._file.read(1) == b""
        except ConnectionResetError:
            return True


class _Kept(io.BufferedReader):
    """A reader `http.client` may "close" after each answer while the next one still follows."""

    def close(self) -> None:
        pass


def _post(path: str, body: bytes, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json", *extra]
    if not any(h.lower().startswith("transfer-encoding") for h in extra):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


CHAT = json.dumps({"model": "m", "stream": False, "messages": MESSAGES}).encode()


# -- keep-alive reuse ---------------------------------------------------------


def test_several_requests_on_one_http_client_connection(proxy: Counted) -> None:
    conn = proxy.http()
    try:
        for _ in range(3):
            conn.request("GET", "/health")
            answer = conn.getresponse()
            assert answer.status == 200 and json.loads(answer.read()) == {"status": "ok"}
            assert answer.getheader("Connection") is None  # HTTP/1.1: kept alive by default
        conn.request("POST", "/api/chat", body=CHAT, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        assert json.loads(answer.read())["message"]["content"] == TEXT
    finally:
        conn.close()
    assert len(proxy.accepted) == 1


def test_a_requests_session_reuses_one_connection(proxy: Counted) -> None:
    with requests.Session() as session:
        for _ in range(5):
            answer = session.post(proxy.url + "/api/chat", data=CHAT, timeout=WAIT)
            assert answer.status_code == 200 and answer.json()["message"]["content"] == TEXT
    assert len(proxy.accepted) == 1


def test_the_openai_client_reuses_one_connection_and_streams(proxy: Counted) -> None:
    with openai.OpenAI(
        base_url=proxy.url + "/v1", api_key="k", max_retries=0, timeout=WAIT
    ) as client:
        for _ in range(3):
            reply = client.chat.completions.create(model="m", messages=MESSAGES)
            assert reply.choices[0].message.content == TEXT
        assert len(proxy.accepted) == 1
        for _ in range(2):
            stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert text == TEXT
    # The SDK's Stream closes its response at `[DONE]`, before reading the chunked
    # end, so its HTTP client drops that connection: streams cost one each.
    assert len(proxy.accepted) <= 3


# -- chunked streamed answers, read by the real clients ------------------------


def test_streams_are_chunked_to_http11_clients(proxy: Counted) -> None:
    body = json.dumps({"model": "m", "stream": True, "messages": MESSAGES}).encode()
    conn = proxy.http()
    try:
        for _ in range(2):  # the chunked end leaves the connection in step
            conn.request("POST", "/api/chat", body=body)
            answer = conn.getresponse()
            assert answer.getheader("Transfer-Encoding") == "chunked"
            assert answer.getheader("Content-Length") is None
            lines = [json.loads(x) for x in answer.read().splitlines() if x]
            assert "".join(x["message"]["content"] for x in lines) == TEXT and lines[-1]["done"]
    finally:
        conn.close()
    assert len(proxy.accepted) == 1


def test_the_ollama_client_streams_chunked_on_one_connection(proxy: Counted) -> None:
    with ollama.Client(host=proxy.url, timeout=WAIT) as client:
        for _ in range(3):
            parts = list(client.chat(model="m", messages=MESSAGES, stream=True))
            assert "".join(p.message.content for p in parts) == TEXT and parts[-1].done
        assert client.chat(model="m", messages=MESSAGES).message.content == TEXT
    assert len(proxy.accepted) == 1


def test_the_anthropic_client_streams_chunked_on_one_connection(proxy: Counted) -> None:
    with anthropic.Anthropic(
        base_url=proxy.url, api_key="k", max_retries=0, timeout=WAIT
    ) as client:
        for _ in range(3):
            with client.messages.stream(model="m", max_tokens=64, messages=MESSAGES) as s:
                assert "".join(s.text_stream) == TEXT
                assert s.get_final_message().stop_reason == "end_turn"
        message = client.messages.create(model="m", max_tokens=64, messages=MESSAGES)
        assert message.content[0].text == TEXT
    assert len(proxy.accepted) == 1


def _failing_midway(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"the first part "
    raise RuntimeError("the app broke after its headers went out")


def test_an_app_failing_mid_stream_cuts_the_chunked_body() -> None:
    with serving(_failing_midway) as counted:
        conn = counted.http()
        try:
            conn.request("GET", "/anything")
            answer = conn.getresponse()
            assert answer.status == 200 and answer.getheader("Transfer-Encoding") == "chunked"
            with pytest.raises(http.client.IncompleteRead) as info:
                answer.read()
            assert info.value.partial == b"the first part "
        finally:
            conn.close()
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            requests.get(counted.url + "/again", timeout=WAIT)


def test_an_app_writing_less_than_its_content_length_closes() -> None:
    def short(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Length", "10")])
        return [b"12345"]

    with serving(short) as counted:
        raw = Raw(counted.connect())
        raw.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        # Closed, not kept: kept, the client would wait for 5 more bytes (a timeout here).
        with pytest.raises(http.client.IncompleteRead) as info:
            raw.answer()
        assert info.value.partial == b"12345"


# -- HTTP/1.0 clients, Connection: close, HEAD, pipelining ----------------------


def test_connection_close_is_honoured(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer, body = raw.answer()
    assert answer.status == 200 and json.loads(body) == {"status": "ok"}
    assert answer.getheader("Connection") == "close"
    assert raw.ended()


def test_an_http10_client_gets_one_answer_then_the_close(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    raw.send(b"GET /health HTTP/1.0\r\n\r\n")
    answer, body = raw.answer()
    assert answer.status == 200 and json.loads(body) == {"status": "ok"}
    assert answer.getheader("Connection") == "close"
    assert raw.ended()


def test_an_http10_keep_alive_client_is_kept(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    for _ in range(2):
        raw.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        answer, body = raw.answer()
        assert answer.getheader("Connection") == "keep-alive" and json.loads(body)["status"]
    raw.sock.close()
    assert len(proxy.accepted) == 1


def test_an_http10_stream_is_close_delimited(proxy: Counted) -> None:
    body = json.dumps({"model": "m", "stream": True, "messages": MESSAGES}).encode()
    raw = Raw(proxy.connect())
    raw.send(
        b"POST /api/chat HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )
    answer, data = raw.answer()
    assert answer.getheader("Transfer-Encoding") is None
    assert answer.getheader("Connection") == "close"
    lines = [json.loads(x) for x in data.splitlines() if x]
    assert "".join(x["message"]["content"] for x in lines) == TEXT
    assert raw.ended()


def test_head_has_no_body_and_keeps_the_connection(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    raw.send(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head, none = raw.answer("HEAD")
    _, body = raw.answer()
    assert head.status == 200 and none == b""
    assert head.getheader("Content-Length") == str(len(body))
    assert body == b"Ollama is running"
    raw.sock.close()


def test_pipelined_requests_are_answered_in_order(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    raw.send(
        _post("/api/chat", CHAT)
        + b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n"
        + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    assert json.loads(raw.answer()[1])["message"]["content"] == TEXT
    assert "version" in json.loads(raw.answer()[1])
    assert json.loads(raw.answer()[1]) == {"status": "ok"}
    raw.sock.close()


# -- request bodies ------------------------------------------------------------


def test_chunked_bodies_on_a_session_share_one_connection(
    proxy: Counted, upstream: ScriptedServer
) -> None:
    def chunks(i: int) -> Iterator[bytes]:
        yield b'{"model": "m", "stream": false,'
        yield b' "messages": [{"role": "user", "content": "part %d"}]}' % i

    with requests.Session() as session:
        for i in range(3):
            answer = session.post(proxy.url + "/api/chat", data=chunks(i), timeout=WAIT)
            assert answer.request.headers["Transfer-Encoding"] == "chunked"
            assert answer.json()["message"]["content"] == TEXT
    sent = [r.json()["messages"][0]["content"] for r in upstream.requests]
    assert sent == ["part 0", "part 1", "part 2"]
    assert len(proxy.accepted) == 1


def test_a_chunked_body_over_the_limit_is_the_faces_413() -> None:
    with serving(make_app(MockBackend(), max_body_bytes=100)) as counted:
        raw = Raw(counted.connect())
        body = b'{"model": "m", "messages": [], "pad": "' + b"x" * 300 + b'"}'
        chunked = (
            b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:50], body[50:])) + b"0\r\n\r\n"
        )
        raw.send(_post("/v1/messages", chunked, "Transfer-Encoding: chunked"))
        answer, data = raw.answer()
        assert answer.status == 413
        assert json.loads(data)["error"]["type"] == "request_too_large"  # Anthropic's shape
        assert answer.getheader("Connection") == "close"  # the rest of the body is unread
        assert raw.ended()


@pytest.mark.parametrize(
    ("framing", "status"),
    [
        (b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400),
        (b"Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400),
        (b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400),
        (b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
        (b"Content-Length: +3\r\n\r\nabc", 400),
        (b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    ],
    ids=["bad-size", "bare-lf", "both-framings", "gzip", "signed-length", "two-lengths"],
)
def test_a_body_that_cannot_be_framed_is_refused_and_closed(
    proxy: Counted, framing: bytes, status: int
) -> None:
    raw = Raw(proxy.connect())
    raw.send(b"POST /api/chat HTTP/1.1\r\nHost: x\r\n" + framing)
    answer, data = raw.answer()
    assert answer.status == status and isinstance(json.loads(data)["error"], str)
    assert raw.ended()


def _unread(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """Answers without reading its body, so the server must keep the connection in step."""
    data = environ["PATH_INFO"].encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


def test_an_unread_body_does_not_desync_the_connection() -> None:
    with serving(_unread) as counted:
        raw = Raw(counted.connect())
        fake_request = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
        raw.send(_post("/first", fake_request) + b"GET /second HTTP/1.1\r\nHost: x\r\n\r\n")
        assert raw.answer()[1] == b"/first"
        assert raw.answer()[1] == b"/second"  # the body was drained, not read as a request
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(fake_request), fake_request)
        raw.send(_post("/third", chunked, "Transfer-Encoding: chunked"))
        answer, data = raw.answer()
        assert data == b"/third" and answer.getheader("Connection") == "close"
        assert raw.ended()
    assert len(counted.accepted) == 1


def test_a_large_unread_body_closes_the_connection() -> None:
    with serving(_unread) as counted:
        raw = Raw(counted.connect())
        raw.send(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 1000)
        answer, data = raw.answer()
        assert data == b"/big" and answer.getheader("Connection") == "close"
        assert raw.ended()


def test_expect_100_continue_is_sent_when_the_body_is_read(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    raw.send(
        b"POST /api/chat HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        b"Content-Length: %d\r\n\r\n" % len(CHAT)
    )
    interim = raw.makefile().readline()
    assert interim == b"HTTP/1.1 100 Continue\r\n" and raw.makefile().readline() == b"\r\n"
    raw.send(CHAT)
    answer, data = raw.answer()
    assert answer.status == 200 and json.loads(data)["message"]["content"] == TEXT
    raw.sock.close()


def test_expect_100_continue_refused_unread_gets_no_invitation() -> None:
    with serving(make_app(MockBackend(), api_key="sekrit-key")) as counted:
        raw = Raw(counted.connect())
        raw.send(
            b"POST /api/chat HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: 50\r\n\r\n"
        )
        reader = raw.makefile()
        assert reader.readline().startswith(b"HTTP/1.1 401 ")  # no 100 Continue before it
        rest = reader.read()  # to the server's close
        assert b"Connection: close" in rest and b"sekrit" not in rest


# -- deadlines on kept-alive connections ---------------------------------------


def test_an_idle_kept_alive_connection_is_closed(upstream: ScriptedServer) -> None:
    with proxying(upstream, idle_timeout=0.3) as proxy:
        raw = Raw(proxy.connect())
        raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = raw.answer()[0]
        assert answer.status == 200 and answer.getheader("Connection") is None
        assert raw.ended()  # after the idle timeout, with no request
        assert proxy.server.connections == 0


def test_slow_headers_of_a_second_request_are_cut() -> None:
    with serving(make_app(MockBackend()), idle_timeout=WAIT, header_timeout=0.3) as counted:
        raw = Raw(counted.connect())
        raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert raw.answer()[0].status == 200
        raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        assert raw.ended()
        assert counted.server.connections == 0


def test_a_slow_body_of_a_second_request_is_a_408() -> None:
    with serving(make_app(MockBackend()), body_timeout=0.3) as counted:
        raw = Raw(counted.connect())
        raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert raw.answer()[0].status == 200
        raw.send(b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n{")
        answer, data = raw.answer()
        assert answer.status == 408 and "in time" in json.loads(data)["error"]
        assert answer.getheader("Connection") == "close"
        assert raw.ended()


def test_a_kept_alive_client_that_stops_reading_is_let_go() -> None:
    content = {"choices": [{"index": 0, "delta": {"content": "x" * 4_000_000}}]}
    upstream = ScriptedServer([Reply.sse([content])]).start()
    sink = UsageSink()
    body = json.dumps({"model": "m", "stream": True, "messages": MESSAGES}).encode()
    try:
        with (
            OpenAICommon(upstream.url) as backend,
            serving(make_app(backend, usage_log=sink), send_timeout=0.3) as counted,
            socket.socket() as sock,
        ):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(WAIT)
            sock.connect(counted.server.server_address[:2])
            raw = Raw(sock)
            raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert raw.answer()[0].status == 200
            raw.send(_post("/v1/chat/completions", body))
            event = sink.wait(2)[1]  # nothing is read until the proxy has given up
            while raw.sock.recv(65536):
                pass  # to the close, whose slot was freed before it
            assert counted.server.connections == 0
    finally:
        upstream.stop()
    assert (event["status"], event["error_type"]) == (499, "client_abort")


# -- the connection cap with kept-alive connections ------------------------------


def test_at_the_cap_an_idle_kept_alive_connection_makes_room(upstream: ScriptedServer) -> None:
    with proxying(upstream, max_connections=2) as proxy:
        idle = [Raw(proxy.connect()) for _ in range(2)]
        for raw in idle:
            raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert raw.answer()[0].status == 200
        newcomer = Raw(proxy.connect())
        newcomer.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer, body = newcomer.answer()
        assert answer.status == 200 and json.loads(body) == {"status": "ok"}
        # One idle connection went (the longest idle: which one that is depends on
        # when each thread got back to waiting), rather than the newcomer refused.
        with selectors.DefaultSelector() as watch:
            for raw in idle:
                watch.register(raw.sock, selectors.EVENT_READ, raw)
            [gone] = [key.data for key, _ in watch.select(WAIT)]
        assert gone.ended()
        [kept] = [raw for raw in idle if raw is not gone]
        kept.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert kept.answer()[0].status == 200


def test_at_the_cap_of_busy_connections_a_newcomer_gets_the_503(upstream: ScriptedServer) -> None:
    with proxying(upstream, max_connections=1) as proxy:
        busy = Raw(proxy.connect())
        busy.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # in the middle of its request
        newcomer = Raw(proxy.connect())
        newcomer.send(b"GET /api/tags HTTP/1.1\r\nHost: x\r\n\r\n")
        answer, body = newcomer.answer()
        assert answer.status == 503 and "limit of 1 connections" in json.loads(body)["error"]
        busy.send(b"\r\n")
        assert busy.answer()[0].status == 200
        busy.sock.close()


def test_closing_the_server_ends_idle_kept_alive_connections(proxy: Counted) -> None:
    raw = Raw(proxy.connect())
    raw.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw.answer()[0].status == 200
    proxy.server.shutdown()
    proxy.server.server_close()
    assert raw.ended()
