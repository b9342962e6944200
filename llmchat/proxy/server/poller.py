"""The embedded server's loop: gunicorn's gthread model, an acceptor-poller and a pool of threads.

One thread (the one in ``serve_forever``) accepts connections and waits on
every connection that is not being served: a new one before its first byte,
a kept-alive one between requests, and each while its request arrives. It
reads what arrives (``MSG_DONTWAIT``; the sockets stay blocking for the
threads) until `RequestFraming` says the request is whole, then hands the
connection and those bytes to a bounded pool of threads. A pool thread
serves that request (`ConnectionHandler.serve_one`); while the pool has
threads to spare it waits a short while for the connection's next request
itself (`keepalive`), else it gives the connection back, re-arming its
one-shot event itself (`readiness`), so an idle kept-alive connection, or a
client slow to send its head or body, holds no thread for long. A streamed
answer holds its thread to its last byte, as in gthread: the pool size is
how many answers are written at once.

The poller keeps the deadlines: `idle_timeout` from accept or from the end
of an answer to the next request's first byte (a lingering thread gives the
connection back before it, counted from the answer's end), then
`header_timeout` for the head, `body_timeout` for the body. An idle
connection or a slow head is
closed unanswered; a slow body goes to a thread whose first read past what
came fails at once (a 408 in the face's shape). Each phase's connections
share one timeout, so each phase is a first-in-first-out dict and expiry
looks only at its front.
"""

from __future__ import annotations

import logging
import math
import queue
import socket
import threading
import time
from typing import Any

from .keepalive import READ, Conn, KeepAlive, new_framing
from .pool import Pool
from .readiness import EpollReadiness, SelectorReadiness, best_readiness

__all__ = ["Poller"]

log = logging.getLogger("llmchat.proxy")

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_ACCEPTS_PER_WAKE = 64  # then serve what is ready before accepting more


class Poller:
    """Accepts, waits on idle and arriving connections, hands whole requests to `threads`.

    `server` is the `ProxyServer`: its listening socket, admission
    (`_take_slot`, `_release_slot`, `_reject`), the handler class and app.
    """

    def __init__(self, server: Any, threads: int, body_limit: int) -> None:
        self._server = server
        self._limits = server.limits
        self._threads = threads
        self._body_limit = body_limit
        # Bytes all arriving requests may hold (at least a head each, for apps with no limit).
        self._budget = threads * max(body_limit, 1 << 20)
        self._buffered = 0
        self._readiness: EpollReadiness | SelectorReadiness = best_readiness()
        self._listener: socket.socket = server.socket
        self._listener.setblocking(False)
        self._readiness.add_listener(self._listener.fileno())
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._readiness.add_listener(self._wake_r.fileno())
        self._waiting: dict[int, Conn] = {}  # by descriptor: every connection the poller holds
        self._fresh: dict[Conn, None] = {}  # before a first request's first byte
        self._kept: dict[Conn, None] = {}  # kept alive, before the next request's first byte
        self._head: dict[Conn, None] = {}
        self._body: dict[Conn, None] = {}
        self._sleeping = False
        self._stopping = False
        self._keepalive = KeepAlive(server, self._readiness, self._nudge, body_limit)
        self._returned = self._keepalive.returned
        self._pool: Pool[Conn] | None = None
        self._handed: list[Conn] = []  # whole requests for the pool, in order

    # -- the poller's thread ------------------------------------------------------

    def run(self) -> None:
        """Serve until `stop()`; the pool's threads start on the first call."""
        if self._pool is None:
            self._pool = Pool(self._threads, self._keepalive.work, "llmchat-proxy-pool")
            self._keepalive.pool = self._pool
        # `_stopping` is not reset here: a `stop()` that came before this line
        # would be lost, and `shutdown()` would wait for ever. It is reset on the way out.
        listener, wake = self._listener.fileno(), self._wake_r.fileno()
        pool, handed = self._pool, self._handed
        while not self._stopping:
            timeout = self._timeout()
            self._sleeping = True
            if not self._returned.empty():  # after the flag: see `KeepAlive._give_back`
                timeout = 0.0
            # The requests read go to the pool last, just before this thread lets go
            # of the interpreter lock in its wait: a woken pool thread finds it free
            # instead of blocking on it (a context switch per request less).
            for request in handed:
                pool.submit(request)
            handed.clear()
            ready = self._readiness.wait(timeout)
            self._sleeping = False
            self._take_returned()
            for fd in ready:
                if fd == listener:
                    self._accept()
                elif fd == wake:
                    self._drain_wake()
                else:
                    conn = self._waiting.get(fd)
                    if conn is not None:
                        self._on_readable(conn)
            self._expire(time.monotonic())
        for request in handed:  # read whole before the stop: answered, then closed
            pool.submit(request)
        handed.clear()
        self._stopping = False

    def _timeout(self) -> float | None:
        """Seconds until the first deadline of any phase (`None`: none)."""
        limits = self._limits
        now = time.monotonic()
        wake = math.inf
        for phase in (self._fresh, self._head, self._body, self._kept):
            if phase:
                wake = min(wake, next(iter(phase)).deadline)
        if not self._kept and limits.idle_timeout is not None:
            # A pool thread may give a connection back while this one sleeps (its
            # deadline then is later than this): wake to put it in line.
            wake = min(wake, now + limits.idle_timeout)
        return None if wake == math.inf else max(0.0, wake - now)

    def _accept(self) -> None:
        server = self._server
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                sock, address = server.get_request()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # logged and backed off by the server when out of descriptors
            if not server._take_slot():
                # At the cap, the longest-idle kept-alive connection makes room
                # (one the poller holds, else one a pool thread lingers on).
                if self._kept:
                    self._close(next(iter(self._kept)), release=False)
                elif not self._keepalive.evict():
                    server._reject(sock, address)
                    continue
            conn = Conn(sock, address)
            try:
                self._readiness.add(sock)
            except OSError:
                server._release_slot()
                sock.close()
                continue
            self._await(conn, self._fresh, b"")

    def _await(self, conn: Conn, phase: dict[Conn, None], held: bytes) -> None:
        """`conn` waits for a request (`held`: its first bytes, already read)."""
        limits = self._limits
        conn.framing = new_framing(self._body_limit)
        conn.head_until = conn.body_until = None
        self._waiting[conn.fd] = conn
        if held:
            self._enter(conn, self._kept, limits.idle_timeout)
            if self._take(conn, held):
                return
            self._readiness.arm(conn.sock)
        elif phase is self._fresh:
            self._enter(conn, phase, limits.idle_timeout)
        else:
            self._enter(conn, phase, None, deadline=conn.deadline)
            if not self._readiness.rearm_from_any_thread:
                self._readiness.arm(conn.sock)  # else its pool thread did

    def _enter(
        self,
        conn: Conn,
        phase: dict[Conn, None],
        seconds: float | None,
        *,
        deadline: float | None = None,
    ) -> None:
        if conn.phase is not None:
            conn.phase.pop(conn, None)
        if deadline is None:
            deadline = math.inf if seconds is None else time.monotonic() + seconds
        conn.deadline = deadline
        conn.phase = phase
        phase[conn] = None

    def _on_readable(self, conn: Conn) -> None:
        try:
            data = conn.sock.recv(READ, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            self._readiness.arm(conn.sock)
            return
        except OSError:
            self._close(conn)
            return
        framing = conn.framing
        assert framing is not None
        if not data:
            if framing.data:
                self._hand(conn)  # its thread tells a hang-up from a cut request
            else:
                self._close(conn)  # gone between requests: nothing to answer
            return
        if not self._take(conn, data):
            self._readiness.arm(conn.sock)

    def _take(self, conn: Conn, data: bytes) -> bool:
        """Feed `data` to the request; whether it went to a pool thread."""
        framing = conn.framing
        assert framing is not None
        limits = self._limits
        if not framing.data:  # the head's first byte
            self._enter(conn, self._head, limits.header_timeout)
            conn.head_until = None if limits.header_timeout is None else conn.deadline
        self._buffered += len(data)
        ready = framing.feed(data) or self._buffered > self._budget
        if framing.head_done and conn.body_until is None:
            self._enter(conn, self._body, limits.body_timeout)
            conn.body_until = None if limits.body_timeout is None else conn.deadline
        if ready:
            self._hand(conn)
        return ready

    def _hand(self, conn: Conn) -> None:
        """Give `conn` and its request's bytes to a pool thread."""
        framing = conn.framing
        assert framing is not None
        self._forget(conn)
        conn.data = bytes(framing.data)
        conn.framing = None
        self._handed.append(conn)  # to the pool before the next wait

    def _forget(self, conn: Conn) -> None:
        """The poller no longer holds `conn` (it is served, or closed)."""
        self._waiting.pop(conn.fd, None)
        if conn.phase is not None:
            conn.phase.pop(conn, None)
            conn.phase = None
        if conn.framing is not None:
            self._buffered -= len(conn.framing.data)

    def _close(self, conn: Conn, *, release: bool = True) -> None:
        """Close a connection the poller holds, unanswered (idle, or its head too slow)."""
        self._forget(conn)
        conn.framing = None
        self._readiness.disarm(conn.sock)
        if release:
            self._server._release_slot()
        try:
            conn.sock.close()
        except OSError:
            pass

    def _expire(self, now: float) -> None:
        for phase in (self._fresh, self._kept, self._head):
            while phase and (conn := next(iter(phase))).deadline <= now:
                self._close(conn)
        while self._body and (conn := next(iter(self._body))).deadline <= now:
            self._hand(conn)  # its thread's first read past what came fails: a 408

    def _take_returned(self) -> None:
        """Put the connections the pool gave back in line for their next request."""
        while True:
            try:
                conn = self._returned.get_nowait()
            except queue.Empty:
                return
            if self._keepalive.closed:
                self._keepalive.end(conn)
                continue
            held, conn.leftover = conn.leftover, b""
            self._await(conn, self._kept, held)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _nudge(self) -> None:
        """Wake the poller if it sleeps: a connection given back waits in its inbox."""
        if self._sleeping:
            self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # full: a wake-up is pending anyway
            pass

    # -- any thread -----------------------------------------------------------------

    def stop(self) -> None:
        """Make `run` return soon (it wakes)."""
        self._stopping = True
        self._wake()

    def close(self) -> None:
        """Once `run` returned: end waiting connections; answers under way finish, then close."""
        self._keepalive.close()  # lingering threads end their connections now
        for conn in list(self._waiting.values()):
            self._close(conn)
        self._keepalive.sweep()
        if self._pool is not None:
            self._pool.stop()
        self._readiness.close()
        self._wake_r.close()
        self._wake_w.close()

    @property
    def threads(self) -> list[threading.Thread]:
        """The pool's threads (started by the first `run`)."""
        return [] if self._pool is None else list(self._pool.threads)
