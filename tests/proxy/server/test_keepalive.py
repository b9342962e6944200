"""A pool thread lingers on its kept-alive connection for the next request, while threads are spare.

Real sockets on loopback, a WSGI app that records which thread served each
request. The poller's hand-overs (`Poller._hand`), the give-backs and the
lingers (`KeepAlive._give_back`, `KeepAlive._wait`) are counted by
wrapping them; every wait ends on an event, bounded by a generous `WAIT`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from llmchat.proxy import make_server
from llmchat.proxy.server import keepalive as keepalive_module
from llmchat.proxy.server import poller as poller_module

from .test_proxy_pool import WAIT, _answer, _connect, _Kept, serving

if not hasattr(__import__("select"), "poll"):
    pytest.skip("a linger waits in select.poll, which this platform lacks", allow_module_level=True)


def _request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


class _App:
    """Answers `{"thread": ident}`; ``/block`` waits for `release` first (holding its thread)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocked = threading.Semaphore(0)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ["PATH_INFO"] == "/block":
            self.blocked.release()
            assert self.release.wait(WAIT)
        body = json.dumps({"thread": threading.get_ident()}).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        )
        return [body]


class _Spy:
    """Counts calls of wrapped methods; an event per name is set on each call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[str] = Counter()
        self.events: dict[str, threading.Event] = {}
        for owner, name in (
            (poller_module.Poller, "_hand"),
            (keepalive_module.KeepAlive, "_give_back"),
            (keepalive_module.KeepAlive, "_wait"),
        ):
            self.events[name] = threading.Event()
            monkeypatch.setattr(owner, name, self._wrap(name, getattr(owner, name)))

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            self.events[name].set()
            return real(*args, **kwargs)

        return counted


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    return _Spy(monkeypatch)


def _served_by(kept: _Kept) -> int:
    """The thread that served the next answer on `kept` (a 200, kept alive)."""
    status, headers, body = _answer(kept)
    assert status == 200 and "connection" not in headers
    return int(body["thread"])


def test_the_next_request_is_served_by_the_thread_that_answered(spy: _Spy) -> None:
    with serving(_App(), threads=8, idle_timeout=WAIT * 6) as server, _connect(server) as sock:
        kept = _Kept(sock)
        sock.sendall(_request("/a"))
        first = _served_by(kept)
        sock.sendall(_request("/b"))
        assert _served_by(kept) == first
        sock.sendall(_request("/c"))
        assert _served_by(kept) == first
        # One hand-over by the poller (the first request); the others were read by the thread.
        assert spy.calls["_hand"] == 1
        assert spy.calls["_give_back"] == 0
        assert spy.calls["_wait"] >= 2


def test_a_pipelined_request_is_served_at_once_by_the_same_thread(spy: _Spy) -> None:
    with serving(_App(), threads=8, idle_timeout=WAIT * 6) as server, _connect(server) as sock:
        kept = _Kept(sock)
        sock.sendall(_request("/a") + _request("/b"))  # one send: the poller reads both
        first = _served_by(kept)
        assert _served_by(kept) == first
        assert spy.calls["_hand"] == 1
        assert spy.calls["_give_back"] == 0


def test_with_threads_scarce_the_connection_goes_back_to_the_poller(spy: _Spy) -> None:
    """3 of 4 threads held by answers under way: the 4th does not linger after its answer."""
    app = _App()
    with serving(app, threads=4, idle_timeout=WAIT * 6) as server:
        holders = [_connect(server) for _ in range(3)]
        try:
            for sock in holders:
                sock.sendall(_request("/block"))
            for _ in holders:
                assert app.blocked.acquire(timeout=WAIT)
            with _connect(server) as sock:
                kept = _Kept(sock)
                sock.sendall(_request("/a"))
                _served_by(kept)
                assert spy.events["_give_back"].wait(WAIT)
                sock.sendall(_request("/b"))  # read by the poller, served by the free thread
                _served_by(kept)
                assert spy.calls["_hand"] == 3 + 2
                assert spy.calls["_wait"] == 0
        finally:
            app.release.set()
            for sock in holders:
                assert _served_by(_Kept(sock))
                sock.close()


def test_a_close_while_a_thread_lingers_ends_it_at_once(
    spy: _Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A linger longer than the test's waits: the connection ends by the close, not by its end.
    monkeypatch.setattr(keepalive_module, "LINGER_SECONDS", WAIT * 6)
    server = make_server(_App(), "127.0.0.1", 0, threads=8, idle_timeout=WAIT * 6)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with _connect(server) as sock:
        kept = _Kept(sock)
        sock.sendall(_request("/a"))
        _served_by(kept)
        assert spy.events["_wait"].wait(WAIT)
        pool = server.pool_threads
        closer = threading.Thread(target=lambda: (server.shutdown(), server.server_close()))
        closer.start()
        closer.join(WAIT)
        assert not closer.is_alive(), "shutdown() and server_close() waited for the linger"
        assert kept.file.read() == b""  # closed, within the socket's WAIT
    thread.join(WAIT)
    for worker in pool:
        worker.join(WAIT)
        assert not worker.is_alive()
    assert server.connections == 0
    assert spy.calls["_give_back"] == 0


def test_a_connection_that_never_sends_is_closed_at_the_idle_timeout(spy: _Spy) -> None:
    with serving(_App(), threads=8, idle_timeout=0.3) as server, _connect(server) as sock:
        kept = _Kept(sock)
        sock.sendall(_request("/a"))
        _served_by(kept)
        assert kept.file.read() == b""  # the end of file, within the socket's WAIT
        assert server.connections == 0
        assert spy.calls["_wait"] == 1  # it lingered, then went back to the poller, which closed it
        assert spy.calls["_give_back"] == 1


def test_a_client_that_hangs_up_during_a_linger_frees_its_slot(
    spy: _Spy, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(keepalive_module, "LINGER_SECONDS", WAIT * 6)
    with serving(_App(), threads=8, idle_timeout=WAIT * 6) as server:
        released = threading.Event()
        real_release = server._release_slot

        def release_slot() -> None:
            real_release()
            released.set()

        monkeypatch.setattr(server, "_release_slot", release_slot)
        caplog.set_level(logging.DEBUG, logger="llmchat.proxy")
        with _connect(server) as sock:
            kept = _Kept(sock)
            sock.sendall(_request("/a"))
            _served_by(kept)
            assert spy.events["_wait"].wait(WAIT)
            assert server.connections == 1
        assert released.wait(WAIT)
        assert server.connections == 0
        assert spy.calls["_give_back"] == 0  # ended by its thread, not the poller
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert "ended with an error" not in caplog.text


def test_at_the_cap_a_lingered_on_connection_makes_room(
    spy: _Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection a thread lingers on is idle: a newcomer at the cap ends it, not refused."""
    monkeypatch.setattr(keepalive_module, "LINGER_SECONDS", WAIT * 6)
    with serving(_App(), threads=8, idle_timeout=WAIT * 6, max_connections=1) as server:
        with _connect(server) as idle:
            kept = _Kept(idle)
            idle.sendall(_request("/a"))
            _served_by(kept)
            assert spy.events["_wait"].wait(WAIT)
            with _connect(server) as newcomer:
                newcomer.sendall(_request("/b"))
                _served_by(_Kept(newcomer))
                assert kept.file.read() == b""  # the lingered-on one was ended
                assert server.connections == 1  # its slot is the newcomer's
