"""The proxy's own HTTP server against hostile and careless clients, on real sockets.

Each test serves the real app with `make_server` on loopback with small
limits, so a deadline passes within a second; every wait is bounded by a
generous socket timeout (`WAIT`) and ends on an event (the server closing the
connection), never on a sleep.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.backends.mock import MockBackend
from llmchat.proxy import make_app, make_server
from llmchat.proxy.server import ProxyServer
from llmchat.testing import Reply, ScriptedServer

from ...support.paths import REPO_ROOT
from ...support.proxy import UsageSink
from ...support.proxy_servers import parse_answer, read_to_end

WAIT = 10.0


@contextlib.contextmanager
def serving(upstream: Any = None, usage_log: Any = None, **limits: Any) -> Iterator[ProxyServer]:
    """`make_server(make_app(upstream), **limits)` serving in a thread on a free port."""
    app = make_app(upstream if upstream is not None else MockBackend(), usage_log=usage_log)
    server = make_server(app, "127.0.0.1", 0, **limits)
    thread = threading.Thread(target=server.serve_forever, name="test-proxy", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


def _connect(server: ProxyServer) -> socket.socket:
    host, port = server.server_address[:2]
    return socket.create_connection((str(host), int(port)), timeout=WAIT)


def _assert_pool_free(server: ProxyServer) -> None:
    """Every pool thread is back for the next request: more requests than threads, each at once."""
    pool = server.pool_threads
    assert pool and all(thread.is_alive() for thread in pool)
    with requests.Session() as session:
        for _ in range(len(pool) + 1):
            assert session.get(server.url + "/health", timeout=WAIT).status_code == 200


def _assert_shape(face: str, status: int, body: Any, *, anthropic_type: str | None = None) -> None:
    if face == "ollama":
        assert set(body) == {"error"} and isinstance(body["error"], str)
    elif face == "anthropic":
        assert body["type"] == "error"
        expected = anthropic_type or ("invalid_request_error" if status < 500 else "api_error")
        assert body["error"]["type"] == expected
        assert isinstance(body["error"]["message"], str)
    else:
        assert set(body["error"]) == {"message", "type", "code"}
        assert body["error"]["code"] == status


# -- 1. deadlines ------------------------------------------------------------


def test_dribbled_headers_are_cut_at_the_header_deadline() -> None:
    """A byte every 50 ms never trips a per-read timeout; the total header deadline cuts it."""
    with serving(idle_timeout=WAIT, header_timeout=0.5) as server:
        socks = [_connect(server) for _ in range(20)]
        done = threading.Event()

        def dribble() -> None:
            stream = itertools.chain(b"GET /health HTTP/1.1\r\n", itertools.cycle(b"X-Slow: 1\r\n"))
            live = list(socks)
            for byte in stream:
                for sock in list(live):
                    try:
                        sock.send(bytes([byte]))
                    except OSError:
                        live.remove(sock)
                if not live or done.wait(0.05):
                    return

        dribbler = threading.Thread(target=dribble, daemon=True)
        dribbler.start()
        try:
            for sock in socks:
                assert read_to_end(sock) == b""  # closed unanswered
        finally:
            done.set()
            dribbler.join(WAIT)
            for sock in socks:
                sock.close()
        assert server.connections == 0


def test_body_never_sent_is_cut_and_the_threads_are_free() -> None:
    head = (
        b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with serving(body_timeout=0.5, threads=4) as server:
        socks = [_connect(server) for _ in range(20)]
        for sock in socks:
            sock.sendall(head + b'{"model":')
        for sock in socks:
            status, _, body = parse_answer(read_to_end(sock))
            sock.close()
            assert status == 408
            _assert_shape("ollama", status, body)
        assert server.connections == 0
        _assert_pool_free(server)


def test_idle_connection_is_closed() -> None:
    with serving(idle_timeout=0.3) as server:
        socks = [_connect(server) for _ in range(20)]
        for sock in socks:
            assert read_to_end(sock) == b""
            sock.close()
        assert server.connections == 0


# -- 2. the connection cap ---------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "face"),
    [
        (b"GET /api/tags HTTP/1.1\r\nHost: x\r\n\r\n", "ollama"),
        (
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\n\r\n{}",
            "anthropic",
        ),
        (b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", "openai"),
    ],
)
def test_over_the_cap_gets_a_503_in_its_face(request_bytes: bytes, face: str) -> None:
    with serving(max_connections=3, idle_timeout=WAIT) as server:
        # Accepted in connect order, so the fourth is counted after these three.
        holders = [_connect(server) for _ in range(3)]
        extra = _connect(server)
        extra.sendall(request_bytes)
        status, headers, body = parse_answer(read_to_end(extra))
        extra.close()
        assert status == 503
        assert headers["connection"] == "close"
        _assert_shape(face, status, body, anthropic_type="overloaded_error")
        for sock in holders:
            sock.sendall(b"GET /health HTTP/1.0\r\n\r\n")
            assert parse_answer(read_to_end(sock))[0] == 200  # the slot is free once it closes
            sock.close()
        answer = requests.get(server.url + "/health", timeout=WAIT)
        assert answer.status_code == 200 and answer.json() == {"status": "ok"}


def test_the_backlog_holds_many_pending_connections() -> None:
    server = make_server(make_app(MockBackend()), "127.0.0.1", 0)
    try:
        assert server.request_queue_size >= 128
        # Not serving yet: every connect below waits in the listen queue. With
        # socketserver's old backlog of 5 the kernel drops the later SYNs.
        socks = [_connect(server) for _ in range(64)]
        for sock in socks:
            sock.close()
    finally:
        server.server_close()


# -- 3. the accept loop at the descriptor limit ------------------------------

_FD_SERVER = """
import logging, os, resource, sys
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
from llmchat.backends.mock import MockBackend
from llmchat.proxy import make_app, make_server
server = make_server(make_app(MockBackend()), "127.0.0.1", 0, max_connections=1000,
                     idle_timeout=60)
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
print(server.server_address[1], flush=True)
server.serve_forever()
"""

# The same under gunicorn: the limit is lowered in the worker, once its app is built.
_FD_GUNICORN = """
import logging, os, resource, sys
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
from llmchat.backends.mock import MockBackend
from llmchat.proxy import make_app
from llmchat.proxy.gunicorn_app import WorkerOptions, serve
def build():
    app = make_app(MockBackend())
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
    return app, app.close
options = WorkerOptions(workers=1, threads=4, max_connections=1000)
serve(build, "127.0.0.1", 0, options, announce=lambda url: print(url.rsplit(":", 1)[1], flush=True))
"""


def _line_with(text: str, lines: queue.Queue[str]) -> None:
    """Wait for a line with `text`, skipping others (gunicorn's own)."""
    while text not in (line := lines.get(timeout=WAIT)):
        assert "Traceback" not in line, line


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("script", [_FD_SERVER, _FD_GUNICORN], ids=["embedded", "gunicorn"])
def test_descriptor_exhaustion_backs_off_and_recovers(script: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None and proc.stdout is not None
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True)
    reader.start()
    socks: list[socket.socket] = []
    try:
        port = int(proc.stdout.readline())
        socks = [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(40)]
        _line_with("cannot accept connections", lines)
        before, started = _cpu_seconds(proc.pid), time.monotonic()
        threading.Event().wait(1.0)  # a measuring window, not a wait for anything
        used, window = _cpu_seconds(proc.pid) - before, time.monotonic() - started
        assert used < 0.5 * window, f"the accept loop used {used:.2f}s CPU in {window:.2f}s"
        for sock in socks:
            sock.close()
        answer = requests.get(f"http://127.0.0.1:{port}/health", timeout=WAIT)
        assert answer.status_code == 200
        _line_with("accepting connections again", lines)
    finally:
        for sock in socks:
            sock.close()
        proc.terminate()
        proc.wait(WAIT)
        reader.join(WAIT)  # ends at the pipe's end, now the process is gone
        proc.stdout.close()
        proc.stderr.close()


# -- 4. the HTTP layer's own errors: tests/test_proxy_guarantees.py, under both servers


# -- 5. deep nesting ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "face"),
    [("/api/chat", "ollama"), ("/v1/messages", "anthropic"), ("/v1/chat/completions", "openai")],
)
def test_deeply_nested_body_is_a_400_in_the_face(path: str, face: str) -> None:
    with serving() as server:
        answer = requests.post(
            server.url + path,
            data=b'{"model": "m", "messages": ' + b"[" * 100000,
            headers={"Content-Type": "application/json"},
            timeout=WAIT,
        )
    assert answer.status_code == 400
    body = answer.json()
    _assert_shape(face, 400, body)
    assert "nested too deeply" in json.dumps(body)


# -- 6. streams outlast the read deadlines -----------------------------------

_SMALL = {"idle_timeout": 0.3, "header_timeout": 0.3, "body_timeout": 0.3, "send_timeout": 0.3}


def test_a_stream_longer_than_every_deadline_arrives_whole() -> None:
    text = "one two three four five six seven eight nine ten"
    backend = MockBackend([{"text": text}], chunk_delay=0.1)
    with serving(backend, **_SMALL) as server:
        started = time.monotonic()
        with requests.post(
            server.url + "/api/chat",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
            stream=True,
            timeout=WAIT,
        ) as answer:
            parts = [json.loads(line) for line in answer.iter_lines() if line]
        lasted = time.monotonic() - started
    assert lasted > 3 * 0.3  # the premise: the stream outlived the deadlines
    assert "".join(p["message"]["content"] for p in parts) == text
    assert parts[-1]["done"] is True


def test_a_relayed_stream_longer_than_every_deadline_arrives_whole() -> None:
    events = [
        {"choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]}
        for i in range(6)
    ]
    upstream = ScriptedServer([Reply.sse(events, delay=0.2)]).start()
    try:
        with OpenAICommon(upstream.url) as backend, serving(backend, **_SMALL) as server:
            started = time.monotonic()
            answer = requests.post(
                server.url + "/v1/chat/completions",
                json={
                    "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "stream": True,
                },
                timeout=WAIT,
            )
            lasted = time.monotonic() - started
    finally:
        upstream.stop()
    assert lasted > 3 * 0.3
    assert answer.status_code == 200
    assert answer.text.count("data: ") == 7 and answer.text.endswith("data: [DONE]\n\n")


def test_a_client_that_stops_reading_is_let_go_after_the_send_timeout() -> None:
    content = {"choices": [{"index": 0, "delta": {"content": "x" * 4_000_000}}]}
    upstream = ScriptedServer([Reply.sse([content])]).start()
    sink = UsageSink()
    body = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    try:
        with (
            OpenAICommon(upstream.url) as backend,
            serving(backend, sink, **_SMALL) as server,
            socket.socket() as sock,
        ):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(WAIT)
            sock.connect(server.server_address[:2])
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            # Nothing is read until the proxy has given up on this client.
            event = sink.wait(1)[0]
            assert read_to_end(sock).count(b"x") < 4_000_000
            assert server.connections == 0
    finally:
        upstream.stop()
    assert (event["status"], event["error_type"]) == (499, "client_abort")


# -- arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("backlog", 0, ValueError),
        ("backlog", True, TypeError),
        ("max_connections", 0, ValueError),
        ("max_connections", 2.5, TypeError),
        ("idle_timeout", -1, ValueError),
        ("header_timeout", float("inf"), ValueError),
        ("body_timeout", "60", TypeError),
        ("send_timeout", 0, ValueError),
    ],
)
def test_make_server_rejects_bad_limits_by_name(name: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=name):
        make_server(make_app(MockBackend()), "127.0.0.1", 0, **{name: value})
