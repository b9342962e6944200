"""llmchat's urllib3 connections and pools: sockets on their exchange, and safe reuse.

Every socket is registered on the exchange that opened it or took it from the
pool, so an abort can shut it down in any phase. Three rules of reuse live
here, because they need the same hooks:

- A connection goes back to the pool only if its exchange was not aborted
  (`Exchange.detach_socket`, atomic with the abort), so a late cancel or
  deadline can never shut down a socket that another request now uses.
- A reused connection that ends before the first byte of a response raises
  `StaleConnection`: the server closed it while it sat idle and never saw the
  request, so `RequestsTransport` may send it once more on a new connection.
- A request waits briefly (`DRAIN_WAIT`) while a connection of its pool is
  being drained after a stream's end, rather than opening a new one just
  before that connection comes back.
"""

from __future__ import annotations

import http.client
import socket
import threading
from typing import Any, Final

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .exchange import attach_to_current, sending_fresh
from .response_head import LeanResponse

__all__ = ["DRAIN_WAIT", "Draining", "StaleConnection", "TrackedHTTPPool", "TrackedHTTPSPool"]

DRAIN_WAIT: Final = 0.1
"""The longest a request waits for a draining connection of its pool, in seconds.

A body normally ends microseconds after the stream's explicit end; the wait
only covers the reader thread getting scheduled. A server that keeps bodies
open costs each request at most this, and none once a drain failed."""


class StaleConnection(http.client.RemoteDisconnected):
    """A reused pooled connection ended before any byte of a response arrived.

    The server closed it while it sat idle (its keep-alive timeout racing our
    reuse), so it never answered and the request may be sent again. A
    `ConnectionResetError` like the error it replaces, so it is classified alike.
    """


class _NoAnswer(http.client.RemoteDisconnected):
    """The connection ended (EOF, reset) before the first byte of the status line."""


class _WatchedResponse(LeanResponse):
    """A response (`LeanResponse`) that first waits for one byte to tell "no answer" apart.

    `peek` fills the reader's buffer, so the status line is then read from it
    as before: no extra read once bytes arrive, and a timeout is raised as is.
    """

    def begin(self) -> None:
        if self.headers is None:  # the first call (http.client's own guard)
            try:
                first = self.fp.peek(1)
            except ConnectionError as exc:
                raise _NoAnswer(f"Connection lost before a response: {exc}") from exc
            if not first:
                raise _NoAnswer("Remote end closed connection without response")
        super().begin()


def _answered(conn: Any, get_response: Any) -> Any:
    try:
        return get_response()
    except _NoAnswer as exc:
        if getattr(conn, "llmchat_reused", False):
            raise StaleConnection(str(exc)) from exc
        raise


class _TrackedHTTPConnection(HTTPConnection):
    response_class = _WatchedResponse

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        # Before TLS (for https): an abort can cut the handshake too.
        attach_to_current(self, sock)
        return sock

    def getresponse(self) -> Any:
        return _answered(self, super().getresponse)


class _TrackedHTTPSConnection(_TrackedHTTPConnection, HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        # Wrapping detaches the TCP socket registered in `_new_conn` (its fileno
        # becomes -1, so shutting it down does nothing): register the TLS socket
        # that replaced it. An abort during the handshake lands as this attaches
        # (shut down at once), as one during the TCP connect lands when
        # `_new_conn` returns. It is also the socket `_checked_in` detaches when
        # the connection is pooled.
        attach_to_current(self, self.sock)


class Draining:
    """The connections of one pool whose body is being read to its end after a stream's end."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = 0
        self._ended = 0
        self._failing = False  # the last drain did not return its connection

    def start(self) -> None:
        with self._cond:
            self._count += 1

    def end(self, *, kept: bool) -> None:
        with self._cond:
            self._count -= 1
            self._ended += 1
            self._failing = not kept
            self._cond.notify_all()

    def wait(self) -> None:
        """Wait (at most `DRAIN_WAIT`) for one drain to end, if any is running and they work."""
        if not self._count:  # the common case, without the lock
            return
        with self._cond:
            if not self._count or self._failing:
                return
            seen = self._ended
            self._cond.wait_for(lambda: not self._count or self._ended != seen, DRAIN_WAIT)


def _checked_out(pool: Any, conn: Any) -> Any:
    """A connection taken from the pool: fresh if a resend asks, marked, on the exchange."""
    if sending_fresh() and conn.sock is not None:
        conn.close()  # a resend goes out on a new connection, never on another pooled one
    conn.llmchat_reused = conn.sock is not None
    conn.llmchat_pool = pool
    conn.llmchat_exchange = None
    attach_to_current(conn, conn.sock)  # a pooled, already open socket
    return conn


def _checked_in(conn: Any) -> Any:
    """A connection going back to the pool: off its exchange, or closed if that was aborted."""
    exchange = getattr(conn, "llmchat_exchange", None)
    if exchange is not None:
        conn.llmchat_exchange = None
        if not exchange.detach_socket(conn.llmchat_sock):
            conn.close()  # the abort may have shut the socket down: never reuse it
    return conn


class TrackedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.draining = Draining()

    def _get_conn(self, timeout: float | None = None) -> Any:
        if not sending_fresh():
            self.draining.wait()
        return _checked_out(self, super()._get_conn(timeout))

    def _put_conn(self, conn: Any) -> None:
        super()._put_conn(conn if conn is None else _checked_in(conn))


class TrackedHTTPSPool(TrackedHTTPPool, HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection
