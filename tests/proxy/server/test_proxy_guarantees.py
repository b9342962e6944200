"""README "Server guarantees", held under both servers: `make_server` and gunicorn.

Each test runs against the embedded server and a real gunicorn subprocess
(`serve_proxy`), one worker of four threads with one-second deadlines, so a
deadline passes quickly and four quiet sockets are enough to take every
thread of the worker. Waits end on events (the server closing, an answer);
the only time bounds are generous upper bounds that prove "not blocked
until the quiet clients leave".
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

from llmchat.testing import ChatResponder, Reply, ScriptedServer, WaitFor

from ...support.proxy_servers import SERVERS, ServedProxy, parse_answer, read_to_end, serve_proxy

WAIT = 10.0
THREADS = 4
DEADLINE = 1.0
LIMITS = {"header_timeout": DEADLINE, "body_timeout": DEADLINE, "send_timeout": DEADLINE}
ONE_WORKER = ("--workers", "1", "--threads", str(THREADS))


@pytest.fixture(scope="module", params=SERVERS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedProxy]:
    upstream = ScriptedServer(ChatResponder("hello")).start()
    try:
        with serve_proxy(
            request.param,
            upstream.url,
            tmp_path_factory.mktemp(request.param),
            gunicorn_args=ONE_WORKER,
            limits=LIMITS,
        ) as proxy:
            yield proxy
    finally:
        upstream.stop()


def _connect(proxy: ServedProxy) -> socket.socket:
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=WAIT)


def _assert_shape(face: str, status: int, body: Any) -> None:
    if face == "ollama":
        assert set(body) == {"error"} and isinstance(body["error"], str)
    elif face == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert isinstance(body["error"]["message"], str)
    else:
        assert set(body["error"]) == {"message", "type", "code"}
        assert body["error"]["code"] == status


def _ask(proxy: ServedProxy, raw: bytes) -> bytes:
    with _connect(proxy) as sock:
        sock.sendall(raw)
        return read_to_end(sock)


def _fields(count: int) -> bytes:
    return b"".join(b"X-H%d: a\r\n" % i for i in range(count))


# -- every read has a deadline -------------------------------------------------

_QUIET = {
    "partial-head": (b"GET /health HTTP/1.1\r\nX-Slow: ", None),
    "head-and-few-body-bytes": (
        b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"model":',
        "ollama",
    ),
    "huge-chunk-size": (
        b"POST /v1/messages HTTP/1.1\r\nContent-Type: application/json\r\n"
        b'Transfer-Encoding: chunked\r\n\r\nfffffff\r\n{"model":',
        "anthropic",
    ),
    "dribbled-body": (
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n",
        "openai",
    ),
}


def test_quiet_connections_do_not_block_another_client(served: ServedProxy) -> None:
    """As many quiet sockets as a worker has threads; another client is still served.

    Without read deadlines (stock gthread) each quiet socket holds a thread for
    as long as it stays open: the fifth client waits forever.
    """
    quiet = {name: _connect(served) for name in _QUIET}
    for name, sock in quiet.items():
        sock.sendall(_QUIET[name][0])
    stop = threading.Event()

    def dribble() -> None:  # a byte of body every 50 ms, well within any per-read timeout
        while not stop.wait(0.05):
            try:
                quiet["dribbled-body"].send(b" ")
            except OSError:
                return

    dribbler = threading.Thread(target=dribble, daemon=True)
    dribbler.start()
    try:
        started = time.monotonic()
        answer = requests.get(served.url + "/health", timeout=WAIT)
        waited = time.monotonic() - started
        assert answer.status_code == 200
        # The deadline, the linger of a closing answer, and room for a slow machine.
        assert waited < DEADLINE + 5.0
        for name, sock in quiet.items():
            raw = read_to_end(sock)
            face = _QUIET[name][1]
            if face is None:
                assert raw == b"", name  # a slow head is closed unanswered
                continue
            status, headers, body = parse_answer(raw)
            assert (status, headers["connection"]) == (408, "close"), name
            _assert_shape(face, status, body)
    finally:
        stop.set()
        dribbler.join(WAIT)
        for sock in quiet.values():
            sock.close()


_CHAT = json.dumps(
    {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
).encode()
# Two whole requests, a chunked one with a trailer and one of known length, back to back.
_TWO_WHOLE = (
    b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\nX-T: 1\r\n\r\n"
    b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
) % (5, _CHAT[:5], len(_CHAT) - 5, _CHAT[5:], len(_CHAT), _CHAT)


@pytest.mark.parametrize("server", SERVERS)
def test_quiet_bodies_hold_no_thread_for_the_body_deadline(tmp_path: Any, server: str) -> None:
    """A short head deadline and a long body one: quiet bodies block nobody for the body's.

    Under gunicorn a body read in a thread holds that thread until the body
    deadline (60 s here); the worker's poller reads it instead. Quiet bodies
    (a few bytes, a dribble, a huge chunk size, and one pipelined behind two
    whole requests on a kept-alive connection) and partial heads, twice the
    worker's threads in all: another client is served within the head
    deadline and a slow machine's margin, far below the body's 60 s.
    """
    upstream = ScriptedServer(ChatResponder("hello")).start()
    limits = {"header_timeout": 2.0, "body_timeout": 60.0}
    quiet: list[socket.socket] = []
    stop = threading.Event()
    try:
        with serve_proxy(
            server, upstream.url, tmp_path, gunicorn_args=ONE_WORKER, limits=limits
        ) as proxy:
            # As many quiet bodies as threads, each kind at least once, and as many heads.
            bodies = [name for name in _QUIET if name != "partial-head"]
            kinds = [*bodies, *bodies][:THREADS] + ["partial-head"] * THREADS
            for name in kinds:
                quiet.append(_connect(proxy))
                quiet[-1].sendall(_QUIET[name][0])
            # Two whole requests, then the start of a pipelined third that stalls.
            kept = _connect(proxy)
            quiet.append(kept)
            kept.sendall(_TWO_WHOLE + _QUIET["head-and-few-body-bytes"][0])
            dribbled = quiet[kinds.index("dribbled-body")]
            dribbler = threading.Thread(target=_dribble, args=(dribbled, stop), daemon=True)
            dribbler.start()
            started = time.monotonic()
            answer = requests.get(proxy.url + "/health", timeout=WAIT * 9)
            waited = time.monotonic() - started
            reader = kept.makefile("rb")
            answers = [_read_answer(reader), _read_answer(reader)]
            reader.close()  # or closing the socket would not close it
            stop.set()
            dribbler.join(WAIT)
            for sock in quiet:
                sock.close()  # before the server stops: it need not wait them out
    finally:
        stop.set()
        for sock in quiet:
            sock.close()
        upstream.stop()
    assert answer.status_code == 200
    # The 2 s head deadline and room for a slow machine; the body's is 60 s.
    assert waited < 15.0, f"another client waited {waited:.1f} s"
    for status, body in answers:  # each pipelined request answered, in order
        assert status == 200 and body["message"]["content"] == "hello"


def _read_answer(reader: Any) -> tuple[int, Any]:
    """One answer of known length from a kept-alive connection: its status and JSON body."""
    status = int(reader.readline().split()[1])
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, json.loads(reader.read(length))


def _dribble(sock: socket.socket, stop: threading.Event) -> None:
    """A byte of body every 50 ms, well within any per-read timeout."""
    while not stop.wait(0.05):
        try:
            sock.send(b" ")
        except OSError:
            return


@pytest.mark.parametrize("server", SERVERS)
def test_a_client_that_stops_reading_is_let_go(tmp_path: Any, server: str) -> None:
    """Under gunicorn too: one write waits `send_timeout`, then the upstream is cancelled."""
    content = {"choices": [{"index": 0, "delta": {"content": "x" * 4_000_000}}]}
    upstream = ScriptedServer([Reply.sse([content])]).start()
    body = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    try:
        with (
            serve_proxy(
                server, upstream.url, tmp_path, gunicorn_args=ONE_WORKER, limits=LIMITS
            ) as proxy,
            socket.socket() as sock,
        ):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(WAIT)
            host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
            sock.connect((host, int(port)))
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            # Nothing is read until the proxy has given up on this client.
            event = proxy.usage.wait(1, timeout=WAIT, route="/v1/chat/completions")[0]
            assert read_to_end(sock).count(b"x") < 4_000_000
            answer = requests.get(proxy.url + "/health", timeout=WAIT)
            assert answer.status_code == 200
    finally:
        upstream.stop()
    assert (event["status"], event["error_type"]) == (499, "client_abort")


# -- the HTTP layer's own errors, as JSON in the face's shape ----------------------


@pytest.mark.parametrize(
    ("raw", "status", "face"),
    [
        (b"GET /api/tags?q=" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414, "ollama"),
        (b"POST /v1/messages HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", 431, "anthropic"),
        (b"GET /v1/models HTTP/1.1\r\n" + _fields(101) + b"\r\n", 431, "openai"),
        (b"GARBAGE\r\n\r\n", 400, "proxy"),
        (b"GET /api/chat HTTP/x.y\r\n\r\n", 400, "ollama"),
        (b"GET /api/chat HTTP/2.0\r\n\r\n", 505, "ollama"),
        (b"GET /api/tags\r\n\r\n", 400, "ollama"),  # HTTP/0.9
        (b"POST /v1/messages HTTP/1.1\r\nX-A: 1\r\n  Content-Length: 5\r\n\r\n", 400, "anthropic"),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length : 5\r\n\r\n", 400, "openai"),
        # Only SP separates the request line's parts; only VCHAR, obs-text, SP
        # and HTAB make a header value (RFC 9112 §3, RFC 9110 §5.5).
        (b"GET\x0b/api/tags HTTP/1.1\r\n\r\n", 400, "ollama"),
        (b"GET /api/tags\x1cHTTP/1.1\r\n\r\n", 400, "ollama"),
        (b"GET\x85/api/tags HTTP/1.1\r\n\r\n", 400, "ollama"),
        (b"GET /api/tags\xa0HTTP/1.1\r\n\r\n", 400, "ollama"),
        (b"GET  /api/tags HTTP/1.1\r\n\r\n", 400, "ollama"),
        (b"G(T /api/tags HTTP/1.1\r\n\r\n", 400, "ollama"),
        (b"GET /api/tags HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", 400, "ollama"),
        (b"GET /api/tags HTTP/1.1\r\nX-A: a\x7fb\r\n\r\n", 400, "ollama"),
    ],
    ids=[
        "414-url",
        "431-long-header",
        "431-101-headers",
        "400-garbage",
        "400-bad-version",
        "505-http2",
        "400-http09",
        "400-folded",
        "400-space-before-colon",
        "400-vt-separator",
        "400-fs-separator",
        "400-nel-separator",
        "400-nbsp-separator",
        "400-two-spaces",
        "400-method-not-a-token",
        "400-nul-in-value",
        "400-del-in-value",
    ],
)
def test_server_errors_are_json_in_the_face_of_the_path(
    served: ServedProxy, raw: bytes, status: int, face: str
) -> None:
    got, headers, body = parse_answer(_ask(served, raw))
    assert got == status
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    _assert_shape(face, status, body)


def test_exactly_100_headers_are_served(served: ServedProxy) -> None:
    status, _, body = parse_answer(
        _ask(served, b"GET /api/tags HTTP/1.1\r\nConnection: close\r\n" + _fields(99) + b"\r\n")
    )
    assert status == 200 and "models" in body


def test_a_bad_chunked_body_is_a_400_that_closes_and_quotes_nothing(served: ServedProxy) -> None:
    prompt = b"SECRET-PROMPT-TEXT"
    raw = (
        b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz " + prompt + b"\r\n\r\n"
    )
    status, headers, body = parse_answer(_ask(served, raw))
    assert (status, headers["connection"]) == (400, "close")
    _assert_shape("ollama", status, body)
    assert prompt.decode() not in json.dumps(body)
    if served.log is not None:
        served.log.wait_for("HTTP 400")
        assert prompt.decode() not in served.log.text
        assert "Traceback" not in served.log.text


# -- half-close ------------------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("path", ["/api/chat", "/v1/messages"])
def test_a_half_closed_client_is_answered(tmp_path: Any, server: str, path: str) -> None:
    """A client that sends its request then shuts down its sending side still reads the answer.

    Its end-of-file comes during prefill; the proxy cannot tell it from a
    close until it writes, so it writes an interim ``100 Continue``: a closed
    socket would answer that with a reset, this one reads it and waits.
    """
    release = threading.Event()
    prefill = Reply.sse(
        [
            {"choices": [{"index": 0, "delta": {"content": "late"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ],
        before_headers=[WaitFor(release, 30)],
    )
    upstream = ScriptedServer([prefill]).start()
    bodies = {
        "/api/chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "/v1/messages": {
            "model": "c",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        },
    }
    data = json.dumps(bodies[path]).encode()
    try:
        with (
            serve_proxy(server, upstream.url, tmp_path, gunicorn_args=ONE_WORKER) as proxy,
            _connect(proxy) as sock,
        ):
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            assert upstream.wait_for_requests(1, WAIT), "the proxy never asked the upstream"
            sock.shutdown(socket.SHUT_WR)
            interim = b"HTTP/1.1 100 Continue\r\n\r\n"
            got = b""
            while len(got) < len(interim):
                chunk = sock.recv(len(interim) - len(got))
                assert chunk, f"closed after {got!r}"
                got += chunk
            assert got == interim
            release.set()
            answer = read_to_end(sock)
            [event] = proxy.usage.wait(1, route=path)
    finally:
        release.set()
        upstream.stop()
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"late" in answer
    assert event["status"] == 200


# -- Expect: 100-continue ------------------------------------------------------------


def test_100_continue_is_sent_only_when_the_body_is_read(served: ServedProxy) -> None:
    data = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (
        b"POST %s HTTP/1.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
        b"Content-Length: %d\r\n\r\n"
    )
    with _connect(served) as sock:
        sock.sendall(head % (b"/api/chat", len(data)))
        reader = sock.makefile("rb")
        assert reader.readline() == b"HTTP/1.1 100 Continue\r\n" and reader.readline() == b"\r\n"
        sock.sendall(data)
        assert reader.readline().startswith(b"HTTP/1.1 200 ")
    with _connect(served) as sock:
        # Refused unread (no such route): never invited, and the connection closes.
        sock.sendall(head % (b"/api/nowhere", len(data)))
        raw = read_to_end(sock)
    assert raw.startswith(b"HTTP/1.1 404 ")
    status, headers, body = parse_answer(raw)
    assert headers["connection"] == "close"
    _assert_shape("ollama", status, body)
