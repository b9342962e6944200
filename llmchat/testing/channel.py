"""Channel: one accepted socket, every wait on which also watches the server's stop signal."""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import struct
import threading
import time
from typing import Final, Literal

__all__ = ["Channel", "Hangup"]

RECV_SIZE: Final = 65536
# A test's own `threading.Event` cannot be selected on, so `WaitFor` checks it
# between short waits on the socket; this bounds how late it notices the set.
EVENT_POLL_SECONDS: Final = 0.01


class Hangup(Exception):
    """The exchange is over; `why` says whose doing: `"client"`, `"stop"` or `"drop"`.

    `"client"`: it closed or reset the connection. `"stop"`: the server is
    stopping. `"drop"`: a `Drop` step closed it on purpose.
    """

    def __init__(self, why: Literal["client", "stop", "drop"]) -> None:
        super().__init__(why)
        self.why = why


class Channel:
    """One accepted socket, with waits that end on client EOF or the server's stop.

    The socket is non-blocking and every wait is a selector wait on both the
    socket and `wake`, the read end of a socket pair the server writes to when
    it stops (it never reads it back, so it stays readable for every thread).
    Bytes the client sends while the reply is playing (a pipelined request)
    are kept in `inbox` for the request parser. No sleeping anywhere.

    `sock` may be an `ssl.SSLSocket` whose handshake is done (`accept_tls`):
    the selector then watches the raw socket, so bytes OpenSSL has already
    decrypted are drained at once (`pending()`), and "want read/write" means
    wait and retry, never that the client left.
    """

    def __init__(self, sock: socket.socket, wake: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.inbox = bytearray()
        self._selector = selectors.DefaultSelector()
        self._selector.register(wake, selectors.EVENT_READ, "wake")
        self._selector.register(sock, selectors.EVENT_READ, "sock")
        self._gone = False

    def receive(self) -> bytes:
        """Wait for bytes from the client and return them (with anything in `inbox`)."""
        while not self.inbox:
            self._wait(None, writing=False)
        data = bytes(self.inbox)
        self.inbox.clear()
        return data

    def send(self, data: bytes) -> None:
        """Hand all of `data` to the kernel, waiting for room; raise `Hangup` if it cannot."""
        view = memoryview(data)
        while view:
            self._wait(None, writing=True)
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                # TLS: the retry must pass the same bytes again; `view` is unchanged.
                continue
            except OSError:  # EPIPE, ECONNRESET: the client is gone
                raise self._client_gone() from None
            view = view[sent:]

    def check(self) -> None:
        """Raise `Hangup` if the client has already gone or the server is stopping; never block."""
        self._wait(0.0, writing=False)

    def pause(self, seconds: float | None) -> None:
        """Wait `seconds` (None: for ever) unless the client leaves or the server stops first."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            self._wait(remaining, writing=False)

    def wait_event(self, event: threading.Event, timeout: float | None) -> None:
        """Wait until `event` is set or `timeout` passes, watching the client and the stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not event.is_set():
            remaining = EVENT_POLL_SECONDS
            if deadline is not None:
                remaining = min(remaining, deadline - time.monotonic())
                if remaining <= 0:
                    return
            self._wait(remaining, writing=False)

    def _wait(self, timeout: float | None, *, writing: bool) -> None:
        """Block until readable (or writable when `writing`) or `timeout`; absorb input.

        Raises `Hangup("stop")` when the server stops and `Hangup("client")`
        when the client closes or resets the connection.
        """
        if self._gone:
            raise Hangup("client")
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if writing else 0)
        self._selector.modify(self.sock, events, "sock")
        for key, mask in self._selector.select(timeout):
            if key.data == "wake":
                raise Hangup("stop")
            if mask & selectors.EVENT_READ:
                self._absorb()

    def _absorb(self) -> None:
        try:
            data = self.sock.recv(RECV_SIZE)
            # TLS: the rest of a record already decrypted would never wake the selector.
            while data and isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
                data += self.sock.recv(self.sock.pending())
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return  # TLS: part of a record, or a handshake message: no application bytes yet
        except OSError:  # a reset; over TLS also a broken record
            raise self._client_gone() from None
        if not data:
            # EOF: a half-close counts as leaving, as it does for llama-server. Over
            # TLS a close_notify or a bare FIN alike (ragged EOFs are suppressed).
            raise self._client_gone()
        self.inbox += data

    def _client_gone(self) -> Hangup:
        self._gone = True
        return Hangup("client")

    def drop(self, *, rst: bool) -> None:
        """Close the socket now; with `rst`, `SO_LINGER` 0 makes the kernel send a reset."""
        if rst:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close(graceful=False)

    def close(self, *, graceful: bool = True) -> None:
        """Close the socket; `graceful` first sends FIN after any unsent data. Idempotent."""
        if self.sock.fileno() == -1:
            return
        if graceful and not self._gone:
            try:
                if isinstance(self.sock, ssl.SSLSocket):
                    # close_notify first, as a real TLS server sends it: the client can
                    # tell this end from a `Drop`. Non-blocking, the first call sends it
                    # and then "wants" the client's reply, which nobody waits for.
                    with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLWantWriteError):
                        self.sock.unwrap()
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # already reset by the peer; closing is all that is left
        self._selector.close()
        self.sock.close()
