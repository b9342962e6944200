"""gthread's main loop reading each request whole before a thread takes it.

Stock gthread gives a connection to a thread as soon as it is readable; the
thread then reads the head and body, and a client that sends part of either
and goes quiet holds it for as long as the read deadline lets it (the body's,
60 s by default). `k` such clients against `k` threads block everyone.

Here the worker's poller (its main loop, non-blocking) reads every request:
a new connection, and a kept-alive one after each answer, waits in the
poller, and each readable event takes what has arrived (`RequestFraming`
finds the end). Only a whole request (head and body: ``Content-Length``
bytes, or a chunked body through its trailers) goes to a thread, its bytes
handed to the parser first. So a quiet client holds no thread at all; the
head gets ``header_timeout`` from its first byte and the body
``body_timeout`` from the head's end, swept once per loop (gthread's pace,
one second), then:

- a new connection waits ``keepalive`` (at least 5 s) for its first byte, a
  kept-alive one ``keepalive``, then closes (as gthread's);
- a head too slow is closed unanswered;
- a body too slow goes to a thread whose first read of the missing bytes
  fails at once: a 408 in the face's shape, and the connection closes.

A thread takes a request before it is whole only when waiting cannot help:
a framing the parser refuses (its 400), a declared length over the app's
limit (the app's 413, unread), a chunked body past the limit (the app reads
that much from memory, then 413), a head over `HEAD_CAP` (the thread reads
on under what is left of the head's deadline), the client's end of file,
and ``Expect: 100-continue``. That last one must wait for the app: a request
refused unread is never invited to send its body, so the thread answers the
head and sends ``100 Continue`` on the app's first read. The app checks the
proxy key before reading, so only a client holding the key (anyone, with no
key set) can then hold a thread for the body's deadline. A request answered
before it all came closes after its answer (a drain of the rest for the next
request would hold the thread), with the usual linger: at most 2 s, or the
head deadline if shorter.

Memory: a connection buffers at most its head (`HEAD_CAP`) and the app's
``max_body_bytes`` (plus one read, and a trailer section up to gunicorn's
cap); a worker's poller buffers at most ``threads`` x ``max_body_bytes`` in
all (what its threads could hold reading bodies before), 320 MB by default.
Past that budget a connection goes to a thread as it is, which reads the
rest under the deadlines (gthread's way): only clients that have sent that
much between them can hold threads with quiet bodies. TLS and HTTP/2
connections are read by their thread, as gthread's are.
"""

from __future__ import annotations

import math
import selectors
import time
from functools import partial
from typing import Any

from gunicorn.http2 import negotiation
from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker

from .request_framing import RequestFraming

__all__ = ["PrebufferWorker"]

_READ = 65536
_FIRST_BYTE_LEAST = 5.0  # gthread's own first-byte wait in a thread
_SAMPLE = 8192
# How long a stopping worker keeps a kept-alive connection (gthread's, untyped there).
_STOP_LINGER: float = getattr(gthread, "STOP_KEEPALIVE_LINGER", 2.0)


class PrebufferWorker(ThreadWorker):
    """gthread whose poller reads each request whole (for `DeadlineConn` connections)."""

    max_body_bytes = 10_000_000
    """The app's largest request body (its ``max_body_bytes``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: dict[Any, None] = {}  # insertion-ordered set, main thread only
        self._kept_waiting = 0  # of them, kept-alive ones (gthread's max_keepalived)
        self._buffered = 0  # bytes their requests hold
        self._budget = self.cfg.threads * self.max_body_bytes

    def prebuffers(self, conn: Any) -> bool:
        """Whether the poller can read `conn`'s requests: plain HTTP/1.x over TCP."""
        cfg = self.cfg
        return not (
            cfg.is_ssl
            or cfg.proxy_protocol != "off"
            or negotiation.prior_knowledge_allowed(cfg, conn.client)
        )

    def kept_alive_full(self) -> bool:
        """Whether no more connections may be kept alive (gthread's ``max_keepalived``)."""
        return len(self.keepalived_conns) + self._kept_waiting >= self.max_keepalived

    def await_request(self, conn: Any, held: bytes = b"", *, kept: bool = False) -> None:
        """Read `conn`'s next request in the poller (`held`: its bytes already read)."""
        cfg = self.cfg
        conn.framing = RequestFraming(
            self.max_body_bytes,
            line_limit=cfg.limit_request_field_size or 8190,
            trailer_limit=cfg.limit_request_fields * (cfg.limit_request_field_size + 2) + 4,
        )
        conn.head_until = conn.body_until = None
        conn.kept = kept
        idle = float(cfg.keepalive) if kept else max(float(cfg.keepalive), _FIRST_BYTE_LEAST)
        conn.deadline = time.monotonic() + idle
        if kept and not self.alive:
            conn.deadline = min(conn.deadline, time.monotonic() + _STOP_LINGER)
        conn.sock.setblocking(False)
        self._waiting[conn] = None
        self._kept_waiting += kept
        if held and self._take(conn, held):
            return
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: Any, _sock: Any) -> None:
        try:
            data = conn.sock.recv(_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not data:  # the end: the thread's parser tells a hang-up from a cut request
            self._dispatch(conn)
        elif self._take(conn, data):
            self._unregister(conn)

    def _take(self, conn: Any, data: bytes) -> bool:
        """Feed `data`; whether the connection went to a thread."""
        framing: RequestFraming = conn.framing
        now = time.monotonic()
        if not framing.data:  # the head's first byte
            conn.head_until = _after(now, conn.limits.header_timeout)
            conn.deadline = conn.head_until if conn.head_until is not None else math.inf
            self._unkeep(conn)
        self._buffered += len(data)
        # Over the worker's budget: to a thread as it is (see the module's notes).
        ready = framing.feed(data) or self._buffered > self._budget
        if framing.head_done and conn.body_until is None:
            conn.body_until = _after(now, conn.limits.body_timeout)
            conn.deadline = conn.body_until if conn.body_until is not None else math.inf
        if ready:
            self._hand(conn)
        return ready

    def _dispatch(self, conn: Any) -> None:
        self._unregister(conn)
        self._hand(conn)

    def _hand(self, conn: Any) -> None:
        """Give `conn` to a thread with the bytes read so far."""
        self._forget(conn)
        framing: RequestFraming = conn.framing
        conn.framing = None
        data = bytes(framing.data)
        conn.framing_sample = data[:_SAMPLE]
        conn.whole = framing.whole
        if data:
            conn.hand_over(data)
        conn.data_ready = True  # gthread's thread waits for no first byte
        self.enqueue_req(conn)

    def _unregister(self, conn: Any) -> None:
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _unkeep(self, conn: Any) -> None:
        if conn.kept:
            conn.kept = False
            self._kept_waiting -= 1

    def _forget(self, conn: Any) -> None:
        self._unkeep(conn)
        if self._waiting.pop(conn, 0) is None and conn.framing is not None:
            self._buffered -= len(conn.framing.data)

    def _drop(self, conn: Any) -> None:
        self._unregister(conn)
        self._forget(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_keepalived(self, force: bool = False) -> None:
        # Runs once per loop (at most a second apart): the poller's deadlines too.
        base: Any = super()  # gunicorn's stubs lack `force`
        base.murder_keepalived(force)
        now = time.monotonic()
        for conn in [c for c in self._waiting if force or c.deadline <= now]:
            if conn.body_until is not None and not force:
                self._dispatch(conn)  # a slow body: its thread answers 408 at once
            else:
                self._drop(conn)  # idle, or a slow head: closed unanswered

    def _cap_keepalive(self, deadline: float) -> None:
        base: Any = super()  # gthread's, since gunicorn 25: not in its stubs
        base._cap_keepalive(deadline)
        for conn in self._waiting:
            if conn.framing is not None and not conn.framing.data:
                conn.deadline = min(conn.deadline, deadline)

    def finish_request(self, conn: Any, fs: Any) -> None:
        if getattr(conn, "framing_sample", None) is None or fs.cancelled():
            return super().finish_request(conn, fs)
        try:
            keep = fs.result() is True
        except Exception:
            keep = False
        if not keep or not self.prebuffers(conn):
            return super().finish_request(conn, fs)
        # The next request goes through the poller too, with any bytes
        # already read past this one (pipelined) as its start.
        try:
            self.await_request(conn, conn.parser.unreader.take_buffered(), kept=True)
        except Exception:
            self._drop(conn)
        return None


def _after(now: float, seconds: float | None) -> float | None:
    return None if seconds is None else now + seconds
