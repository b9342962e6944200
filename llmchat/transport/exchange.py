"""Exchange: one request/response that any thread may abort, and the deadline watchdog.

Its sockets are registered the moment they exist (`adapter`'s pools record
each socket at connect time, and a pooled socket when it is taken for a
request), so an abort shuts the socket down even while the server is still in
prefill and has sent no header. requests' read timeout is only a gap between
reads, so the whole-exchange deadline (`request_timeout`) is ours: one
watchdog thread aborts an exchange when its timer runs out.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["Exchange"]


class Exchange:
    """One HTTP exchange that any thread may abort, before or after headers.

    `abort(reason)` is thread-safe, idempotent and never raises: it records the
    first reason (``"cancel"``, ``"deadline"``, ``"grace"`` …) and shuts down
    every socket the exchange has used, which wakes a reader blocked in
    ``recv``. A socket that attaches after the abort is shut down at once.
    A transport with no socket (`MockTransport`) wakes its waits through
    `add_abort_callback`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._response: Any = None
        self.aborted: str | None = None
        """The first abort reason, or None while the exchange is not aborted."""
        self.deadline_seconds: float | None = None
        """The whole-exchange limit the watchdog enforces, for the error message."""
        self._timers: list[int] = []
        self._callbacks: list[Callable[[], object]] = []
        self.resends = 0
        """How many times the request was sent again after a dead pooled connection (0 or 1)."""

    def add_abort_callback(self, callback: Callable[[], object]) -> None:
        """Call `callback()` once when the exchange is aborted (at once if it already is).

        It runs in the aborting thread, outside the exchange's lock; what it
        raises is ignored. `finish()` drops the callbacks not yet run.
        """
        if not self._kept(lambda: self._callbacks.append(callback)):
            _call_quietly(callback)

    def attach_socket(self, sock: socket.socket) -> None:
        if not self._kept(lambda: self._sockets.append(sock)):
            _shutdown(sock)

    def detach_socket(self, sock: socket.socket) -> bool:
        """Forget `sock` (its connection goes back to the pool); False if already aborted.

        Atomic with `abort`: a socket detached here is never shut down by this
        exchange, so a late cancel or deadline cannot reach a connection that
        another request has taken from the pool meanwhile. False means the
        abort came first and may have shut the socket down: do not pool it.
        """
        with self._lock:
            if self.aborted is not None:
                return False
            with contextlib.suppress(ValueError):
                self._sockets.remove(sock)
            return True

    def attach_response(self, response: Any) -> None:
        if not self._kept(lambda: self._set_response(response)):
            _close_quietly(response)

    def _kept(self, keep: Callable[[], object]) -> bool:
        """`keep()` under the lock unless the exchange is aborted; False if it was.

        Then the caller deals with the item itself (shuts the socket down, runs
        the callback): one check, so nothing lands after the abort took its list.
        """
        with self._lock:
            if self.aborted is None:
                keep()  # reads the lists under the lock: `finish` may have replaced them
                return True
        return False

    def _set_response(self, response: Any) -> None:
        self._response = response

    def abort(self, reason: str) -> None:
        with self._lock:
            if self.aborted is not None:
                return
            self.aborted = reason
            sockets, self._sockets = self._sockets, []
            response = self._response
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call_quietly(callback)
        for sock in sockets:
            _shutdown(sock)
        if response is not None and not sockets:
            # Only without a tracked socket (a caller's own session): closing waits
            # for the reader to leave recv(), which a shutdown makes it do anyway.
            _close_quietly(response)

    def arm_deadline(self, seconds: float | None) -> None:
        """Abort with reason ``"deadline"`` after `seconds` (None: never)."""
        self.deadline_seconds = seconds
        self.schedule_abort(seconds, "deadline")

    def schedule_abort(self, seconds: float | None, reason: str) -> None:
        """Abort with `reason` after `seconds` unless the exchange is over by then."""
        if seconds is not None:
            self._timers.append(_WATCHDOG.schedule(seconds, self, reason))

    def finish(self) -> None:
        """Drop the timers and forget the sockets; the exchange is over."""
        for token in self._timers:
            _WATCHDOG.cancel(token)
        self._timers = []
        with self._lock:
            self._sockets = []
            self._response = None
            self._callbacks = []


def _shutdown(sock: socket.socket) -> None:
    # shutdown() rather than close(): it wakes a recv() blocked in another
    # thread at once, and leaves closing the fd to its owner. The plain
    # socket's method even for a TLS socket: SSLSocket.shutdown would also drop
    # the TLS state under the reader's feet; the TCP shutdown just ends its read.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _call_quietly(callback: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        callback()


def _close_quietly(response: Any) -> None:
    with contextlib.suppress(Exception):
        response.close()


class _Watchdog:
    """One daemon thread that aborts exchanges when their timers run out."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Exchange, str]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, seconds: float, exchange: Exchange, reason: str) -> int:
        token = next(self._ids)
        with self._cond:
            entry = (time.monotonic() + seconds, token, exchange, reason)
            heapq.heappush(self._heap, entry)
            self._live.add(token)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="llmchat-deadlines", daemon=True
                )
                self._thread.start()
            # Wake the thread only when this timer is now the earliest: waking it
            # on every request costs a GIL hand-off per call (measured: ~150 µs).
            if self._heap[0] is entry:
                self._cond.notify()
        return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._live.discard(token)
            # Cancelled timers would otherwise sit in the heap until they come due
            # (30 minutes for the default request_timeout): prune when they dominate.
            if len(self._heap) > 2 * len(self._live) + 64:
                self._heap = [entry for entry in self._heap if entry[1] in self._live]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                when, token, exchange, reason = self._heap[0]
                if token not in self._live:
                    heapq.heappop(self._heap)
                    continue
                delay = when - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(token)
            exchange.abort(reason)


_WATCHDOG: Final = _Watchdog()


class _Sending(threading.local):
    """What this thread is sending now; the pool's hooks read it (they get no arguments)."""

    exchange: Exchange | None = None
    fresh: bool = False


_SENDING: Final = _Sending()


@contextlib.contextmanager
def sending(exchange: Exchange, *, fresh: bool) -> Iterator[None]:
    """Mark `exchange` as the one this thread sends within the block.

    urllib3 opens and pools connections with no way to pass our exchange down,
    so its hooks (`pool`) find it here. `fresh` asks for a new connection (a
    resend after a dead pooled one).
    """
    _SENDING.exchange, _SENDING.fresh = exchange, fresh
    try:
        yield
    finally:
        _SENDING.exchange, _SENDING.fresh = None, False


def sending_fresh() -> bool:
    """Whether the request this thread sends must go out on a new connection."""
    return _SENDING.fresh


def attach_to_current(conn: Any, sock: socket.socket | None) -> None:
    """Register `sock` on the exchange this thread is sending, and remember it on `conn`.

    The pool detaches it again when `conn` goes back to the pool.
    """
    exchange = _SENDING.exchange
    if exchange is not None and sock is not None:
        conn.llmchat_exchange = exchange
        conn.llmchat_sock = sock
        exchange.attach_socket(sock)
