"""The embedded server's gthread model: a poller for waiting connections, a bounded pool of threads.

Real sockets on loopback. Every wait ends on an event (an answer, the
server closing the connection) bounded by a generous socket timeout
(`WAIT`); thread counts are read once every connection is known to be idle
(its answer read), so they are exact, not timed.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llmchat.backends.mock import MockBackend
from llmchat.proxy import make_app, make_server
from llmchat.proxy.server import ProxyServer
from llmchat.proxy.server import poller as poller_module
from llmchat.proxy.server.readiness import SelectorReadiness

WAIT = 10.0
HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


@contextlib.contextmanager
def serving(app: Callable[..., Any] | None = None, **options: Any) -> Iterator[ProxyServer]:
    app = app if app is not None else make_app(MockBackend())
    server = make_server(app, "127.0.0.1", 0, **options)
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


class _Unclosed(io.BufferedReader):
    """`http.client` closes its reader after each answer; the next answer follows on it."""

    def close(self) -> None:
        pass


class _Kept:
    """A socket's one buffered reader for `http.client`, answer after answer: bytes read
    ahead (a pipelined answer) stay in it for the next one."""

    def __init__(self, sock: socket.socket) -> None:
        self.file = _Unclosed(socket.SocketIO(sock, "rb"))

    def makefile(self, mode: str) -> Any:
        return self.file


def _answer(kept: _Kept) -> tuple[int, dict[str, str], Any]:
    """One length-framed answer read off a kept-alive connection (the connection stays open)."""
    reader = http.client.HTTPResponse(kept)  # type: ignore[arg-type]
    reader.begin()
    body = reader.read()
    headers = {k.lower(): v for k, v in reader.getheaders()}
    return reader.status, headers, json.loads(body)


@pytest.fixture(params=["epoll", "selector"])
def readiness(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of waiting: epoll one-shot (re-armed by the pool thread), and any selector."""
    if request.param == "selector":
        monkeypatch.setattr(poller_module, "best_readiness", SelectorReadiness)
    elif not hasattr(__import__("select"), "epoll"):
        pytest.skip("epoll is Linux's: this platform waits with its selector")
    return str(request.param)


def test_64_idle_kept_alive_connections_hold_no_more_than_the_pool(readiness: str) -> None:
    """64 connections, each answered once and now idle: the threads are the pool's, not 64."""
    before = threading.active_count()
    with serving(threads=4, idle_timeout=WAIT * 6) as server:
        socks = [_connect(server) for _ in range(64)]
        try:
            kept = [_Kept(sock) for sock in socks]
            for sock in socks:
                sock.sendall(HEALTH)
            for reader in kept:
                status, headers, body = _answer(reader)
                assert (status, body) == (200, {"status": "ok"})
                assert "connection" not in headers  # kept alive
            assert server.connections == 64
            assert len(server.pool_threads) == 4
            # The test's serving thread (the poller), the pool, and at most the
            # process's one hang-up watcher (made by the first request ever).
            assert threading.active_count() <= before + 1 + 4 + 1
            # Each connection went back to the poller; its next request is served there.
            for sock in socks:
                sock.sendall(HEALTH)
            for reader in kept:
                assert _answer(reader)[0] == 200
            assert server.connections == 64
        finally:
            for sock in socks:
                sock.close()


def test_an_idle_connection_holds_no_thread(readiness: str) -> None:
    """With one pool thread, a kept-alive idle connection does not keep another client waiting."""
    with serving(threads=1, idle_timeout=WAIT * 6) as server:
        with _connect(server) as idle, _connect(server) as other:
            idle_reader, other_reader = _Kept(idle), _Kept(other)
            idle.sendall(HEALTH)
            assert _answer(idle_reader)[0] == 200
            other.sendall(HEALTH)  # the one thread is free: the idle one waits in the poller
            assert _answer(other_reader)[0] == 200
            idle.sendall(HEALTH)  # and the idle one is still served after
            assert _answer(idle_reader)[0] == 200


def test_the_poller_closes_an_idle_kept_alive_connection_after_the_keepalive(
    readiness: str,
) -> None:
    with serving(threads=2, idle_timeout=0.3) as server, _connect(server) as sock:
        reader = _Kept(sock)
        sock.sendall(HEALTH)
        assert _answer(reader)[0] == 200
        assert server.connections == 1
        assert reader.file.read() == b""  # the end of file, within the socket's WAIT
        assert server.connections == 0


def test_a_pipelined_request_read_with_the_first_is_served(readiness: str) -> None:
    """Bytes read past one request (the poller's read took both) start the next one."""
    with serving(threads=1) as server, _connect(server) as sock:
        sock.sendall(HEALTH + HEALTH + b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        reader = _Kept(sock)
        assert [_answer(reader)[0] for _ in range(3)] == [200, 200, 200]
        assert reader.file.read() == b""  # closed after the third


def test_a_request_on_a_connection_returned_to_the_poller_is_served(readiness: str) -> None:
    """A relayed chat on a kept-alive connection, then another, on the same connection."""
    chat = json.dumps(
        {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    post = (
        b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(chat), chat)
    )
    app = make_app(MockBackend([{"text": "ok"}] * 3))
    with serving(app, threads=1) as server, _connect(server) as sock:
        reader = _Kept(sock)
        for _ in range(3):
            sock.sendall(post)
            status, _, body = _answer(reader)
            assert status == 200 and body["done"] is True
        assert server.connections == 1


def test_a_body_sent_in_pieces_is_read_by_the_poller() -> None:
    """The head and body in separate sends: the thread gets the whole request."""
    chat = json.dumps(
        {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    with (
        serving(make_app(MockBackend([{"text": "ok"}])), threads=1) as server,
        _connect(server) as sock,
    ):
        sock.sendall(
            b"POST /api/chat HTTP/1.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(chat)
        )
        sock.sendall(chat[:5])
        sock.sendall(chat[5:])
        status, _, body = _answer(_Kept(sock))
        assert status == 200 and body["done"] is True


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_make_server_rejects_a_bad_pool_size_by_name(value: Any, error: type) -> None:
    with pytest.raises(error, match="threads"):
        make_server(make_app(MockBackend()), "127.0.0.1", 0, threads=value)


@pytest.mark.parametrize("delay_run", [False, True], ids=["racing", "before-the-poller-runs"])
def test_a_shutdown_as_serving_starts_stops_it(
    delay_run: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `shutdown()` right after the serving thread starts (a test or a program
    # that stops at once) must never be lost: it once left the poller waiting
    # for ever, and `shutdown()` with it.
    entered = threading.Event()
    release = threading.Event()
    stopped = threading.Event()
    if delay_run:
        real_run, real_stop = poller_module.Poller.run, poller_module.Poller.stop

        def held_run(self: Any) -> None:
            entered.set()
            assert release.wait(WAIT)
            real_run(self)

        def noted_stop(self: Any) -> None:
            real_stop(self)
            stopped.set()

        monkeypatch.setattr(poller_module.Poller, "run", held_run)
        monkeypatch.setattr(poller_module.Poller, "stop", noted_stop)
    for _ in range(20 if not delay_run else 3):
        server = make_server(make_app(MockBackend()), "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        if delay_run:
            assert entered.wait(WAIT)  # the poller exists; its loop has not begun
            stopper = threading.Thread(target=server.shutdown, daemon=True)
            stopper.start()
            assert stopped.wait(WAIT)  # the stop reached the poller before its loop began
            release.set()
            stopper.join(WAIT)
            assert not stopper.is_alive(), "shutdown() never returned"
            entered.clear()
            release.clear()
            stopped.clear()
        else:
            server.shutdown()
        thread.join(WAIT)
        assert not thread.is_alive(), "serve_forever() never returned after shutdown()"
        server.server_close()
