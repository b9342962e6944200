"""A pool thread's side of a connection: serve its request, then wait for the next one a while.

The poller (`poller.Poller`) hands a whole request to a pool thread. After a
kept-alive answer, giving the connection straight back to the poller means
its next request crosses two threads: the poller wakes, reads, hands over,
and a pool thread wakes. On a CPU-bound process each of those wake-ups waits
for the interpreter lock behind every busy thread (64 streams on 2 cores:
p99 TTFB +463 ms, against +128 ms when one thread served a connection whole).
So when the pool has threads to spare, the thread that wrote the answer
lingers: it waits for the connection's next request itself, for a short
while, in one ``poll`` over the socket and a stop descriptor, and serves the
request it reads in the same thread (one wake-up, as a thread per connection
had). A request already read with the last one (pipelined) is served at once.
When threads are scarce, when the linger ends with nothing, or when what
came is not yet a whole request, the connection goes back to the poller as
before, its idle deadline counted from the answer's end.

The deadlines are the poller's: `idle_timeout` from the answer's end to the
next first byte (the linger is shorter than it), `header_timeout` for the
head from its first byte, `body_timeout` for the body from the head's end;
a lingering thread only takes a request that is `ready` in the poller's own
`RequestFraming`, so a slow client still holds no thread.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from .pool import Pool
from .readiness import EpollReadiness, SelectorReadiness
from .request_framing import RequestFraming

__all__ = ["LINGER_SECONDS", "Conn", "KeepAlive"]

log = logging.getLogger("llmchat.proxy")

READ = 65536
DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
LINE_MAX = 4096  # as request_body's chunk-size line
TRAILERS = 64 * (LINE_MAX + 2) + 4
# The longest a thread waits for a kept-alive connection's next request
# (`idle_timeout` if shorter). A client in a loop (an agent's next turn, the
# load bench) sends within milliseconds; past a second the two wake-ups saved
# (a few ms) are under 1% of the gap, and a thread that waits longer is one
# the pool cannot give to a burst of new requests.
LINGER_SECONDS = 1.0
# A thread lingers only while at least 1/SPARE_SHARE of the pool is idle: the
# lingering threads come out of the idle ones, so at least a quarter of the
# pool always remains for the requests the poller hands over (new connections,
# those given back), and a pool of one never lingers.
SPARE_SHARE = 4
_EVICTED = object()
_EVENTS = select.POLLIN | select.POLLPRI if hasattr(select, "poll") else 0


class Conn:
    """A connection as the poller and the pool see it."""

    __slots__ = (
        "address",
        "body_until",
        "data",
        "deadline",
        "fd",
        "framing",
        "handler",
        "head_until",
        "leftover",
        "phase",
        "sock",
    )

    def __init__(self, sock: socket.socket, address: Any) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.address = address
        self.handler: Any = None  # made by the first pool thread that serves it
        self.framing: RequestFraming | None = None
        self.phase: dict[Conn, None] | None = None  # the poller's phase it waits in
        self.deadline = math.inf
        self.head_until: float | None = None
        self.body_until: float | None = None
        self.data: bytes = b""  # the request's bytes, for its pool thread
        self.leftover = b""  # read past the last request: the next one's start


def new_framing(body_limit: int) -> RequestFraming:
    """Where a request ends, with the caps the poller and the threads share."""
    return RequestFraming(body_limit, line_limit=LINE_MAX, trailer_limit=TRAILERS)


class KeepAlive:
    """The pool threads' work (`work`): serve, linger, give the connection back or end it.

    `server` is the `ProxyServer` (handler class, slot release, limits);
    `readiness` the poller's; `nudge` wakes the poller if it sleeps (for a
    connection given back that it must re-arm itself). `returned` is the
    poller's inbox of connections given back; `pool` is set by the poller
    once its threads exist.
    """

    def __init__(
        self,
        server: Any,
        readiness: EpollReadiness | SelectorReadiness,
        nudge: Callable[[], None],
        body_limit: int,
    ) -> None:
        self._server = server
        self._limits = server.limits
        self._readiness = readiness
        self._nudge = nudge
        self._body_limit = body_limit
        self.returned: queue.SimpleQueue[Conn] = queue.SimpleQueue()
        self.pool: Pool[Conn] | None = None
        self.closed = False
        idle = self._limits.idle_timeout
        self._linger = LINGER_SECONDS if idle is None else min(idle, LINGER_SECONDS)
        # `close()` closes the write end: the read end is then readable (end of
        # file) to every poll, now or later, so every linger ends at once. The
        # read end is closed by the last thread out (a descriptor a blocked poll
        # still watches must not be closed under it, nor its number reused).
        self._gate = threading.Lock()
        self._lingering: dict[Conn, Any] = {}  # in the order they began: the longest first
        self._stop_r, self._stop_w = os.pipe() if _EVENTS else (-1, -1)

    # -- a pool thread ------------------------------------------------------------

    def work(self, conn: Conn) -> None:
        """Serve `conn`'s request, and the next ones while this thread lingers (the pool's job)."""
        try:
            self._serve(conn)
        except Exception:
            log.debug("serving %s ended with an error", conn.address, exc_info=True)
            self.end(conn)

    def _serve(self, conn: Conn) -> None:
        server = self._server
        if conn.handler is None:
            conn.handler = server.RequestHandlerClass(conn.sock, conn.address, server)
        handler = conn.handler
        data, until, body_until = conn.data, conn.head_until, conn.body_until
        conn.data = b""
        while True:
            if not handler.serve_one(data, until=until, body_until=body_until) or self.closed:
                self.end(conn)
                return
            answered = time.monotonic()
            framing = self._next_request(conn, handler.take_unread(), answered)
            if framing is None:
                return  # given back, or ended
            data = bytes(framing.data)
            now = time.monotonic()  # its first byte came at most now
            limits = self._limits
            until = None if limits.header_timeout is None else now + limits.header_timeout
            body_until = None
            if framing.head_done and limits.body_timeout is not None:
                body_until = now + limits.body_timeout

    def _next_request(self, conn: Conn, leftover: bytes, answered: float) -> RequestFraming | None:
        """The next request, read whole in this thread; else `None` (`conn` given back or ended)."""
        if not self._spare():
            self._give_back(conn, leftover, answered)
            return None
        start: bytes | None = leftover or self._wait(conn, answered)
        if start is None:
            self._give_back(conn, b"", answered)
        if not start:
            return None  # given back, or ended by `_wait`
        framing = new_framing(self._body_limit)
        if framing.feed(start):
            return framing
        self._give_back(conn, start, answered)  # the rest may be slow: the poller waits for it
        return None

    def _spare(self) -> bool:
        """Whether the pool has threads to spare for a linger (a snapshot: no lock)."""
        pool = self.pool
        return bool(_EVENTS) and pool is not None and pool.idle * SPARE_SHARE >= len(pool.threads)

    def _wait(self, conn: Conn, answered: float) -> bytes | None:
        """Linger for `conn`'s next bytes: them; `None` if none came in time; b"" once ended."""
        with self._gate:
            closed = self.closed
            if not closed:
                self._lingering[conn] = None
                stop = self._stop_r
        if closed:
            self.end(conn)
            return b""
        try:
            watch = select.poll()
            watch.register(conn.fd, _EVENTS)
            watch.register(stop, select.POLLIN)
            left = answered + self._linger - time.monotonic()
            events = watch.poll(max(0, math.ceil(left * 1000)))
        finally:
            with self._gate:
                evicted = self._lingering.pop(conn, _EVICTED) is _EVICTED
                if self.closed and not self._lingering:
                    self._close_stop()
        if evicted:
            conn.handler.close()  # its slot went to a new connection (`evict`)
            return b""
        if not events:
            return None
        data = b""  # the server closes (as the poller ends what it holds), or the client left
        if stop not in dict(events):
            try:
                data = conn.sock.recv(READ, DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError:
                pass
        if not data:
            self.end(conn)
        return data

    def _give_back(self, conn: Conn, leftover: bytes, answered: float) -> None:
        """The connection waits in the poller again, `idle_timeout` from the answer's end."""
        idle = self._limits.idle_timeout
        conn.deadline = math.inf if idle is None else answered + idle
        conn.leftover = leftover
        self.returned.put(conn)  # before it can be readable: the poller must know it
        if self.closed:
            self.sweep()
        elif leftover or not self._readiness.rearm_from_any_thread:
            self._nudge()
        else:
            try:
                self._readiness.arm(conn.sock)
            except (OSError, ValueError):
                self.sweep()  # closing under us

    def end(self, conn: Conn) -> None:
        """Close a connection a pool thread held; its slot is free before the client sees it."""
        self._server._release_slot()
        if conn.handler is not None:
            conn.handler.close()
        else:
            try:
                conn.sock.close()
            except OSError:
                pass

    # -- any thread -----------------------------------------------------------------

    def sweep(self) -> None:
        """Close what the pool gave back once the server is closed."""
        while True:
            try:
                conn = self.returned.get_nowait()
            except queue.Empty:
                return
            self.end(conn)

    def evict(self) -> bool:
        """End the longest-lingering connection, to make room for a new one; whether there was one.

        Its slot passes to the new connection: its thread closes it without
        releasing the slot. A connection whose thread woke already is not taken.
        """
        with self._gate:
            if not self._lingering:
                return False
            conn = next(iter(self._lingering))
            del self._lingering[conn]
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)  # its thread's poll wakes
            except OSError:
                pass
        return True

    def close(self) -> None:
        """No more lingers: those under way end now, their connections closed unanswered."""
        with self._gate:
            self.closed = True
            if self._stop_w >= 0:
                os.close(self._stop_w)  # its read end is at end of file: readable, for good
                self._stop_w = -1
            if not self._lingering:
                self._close_stop()

    def _close_stop(self) -> None:
        if self._stop_r >= 0:
            os.close(self._stop_r)
            self._stop_r = -1
