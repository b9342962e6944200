"""A client connection's reads and writes under deadlines, the socket left blocking.

`socket.settimeout` would bound each `recv` separately (a client dribbling a
byte a second never trips it) and makes the descriptor non-blocking for every
user of it, `HangupWatch` included. Instead each read here waits in `poll`
for at most the time left until a *total* deadline, then takes what is there
with ``MSG_DONTWAIT``; each write waits at most `stall` seconds for room in
the send buffer. Nothing ever changes the socket's own mode.
"""

from __future__ import annotations

import io
import logging
import math
import select
import socket
import time
from typing import Any

__all__ = ["DeadlineReader", "StallWriter", "drain", "next_backoff", "wait_for"]

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_BACKOFF_FIRST = 0.01
_BACKOFF_MAX = 0.5

log = logging.getLogger("llmchat.proxy")


def wait_for(sock: socket.socket, *, write: bool, timeout: float | None) -> bool:
    """Wait until `sock` is readable (or writable); `False` when `timeout` seconds pass first.

    `poll` needs no descriptor of its own (an epoll selector would), so this
    still works when the process is at its descriptor limit.
    """
    if not hasattr(select, "poll"):  # Windows
        watched: list[socket.socket] = [sock]
        ready = (
            select.select([], watched, [], timeout)
            if write
            else select.select(watched, [], [], timeout)
        )
        return any(ready)
    poller = select.poll()
    poller.register(sock, select.POLLOUT if write else select.POLLIN | select.POLLPRI)
    wait_ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return bool(poller.poll(wait_ms))


class DeadlineReader(io.RawIOBase):
    """The raw reader under the handler's buffered `rfile`: every read ends by a deadline.

    It starts in the idle phase (`idle` seconds for the first byte); the first
    byte starts the `headers` deadline; `arm(seconds)` starts the next phase
    (the body); `expect_request` goes back to idle for the connection's next
    request. (Bytes of a pipelined request already buffered above this reader
    arrive without a read here, so its header deadline may start late, by at
    most the idle one.) A `None` limit means none. Past the deadline a read raises
    `TimeoutError`. Once the body has been read nobody reads, so a response
    streamed for hours is never cut by these deadlines.
    """

    def __init__(self, sock: socket.socket, *, idle: float | None, headers: float | None) -> None:
        super().__init__()
        self._sock = sock
        self._headers = headers
        self._first_byte = True
        self._deadline = _deadline_in(idle)
        self._held: memoryview | None = None  # bytes the server's poller read for us
        self._paused = False

    def preload(self, data: bytes | bytearray, until: float | None) -> None:
        """Read `data` first (what the poller read of a request); then the socket by `until`.

        `until` is the deadline (`time.monotonic()`) of the phase the request
        is in: its head's, or its body's once the head is all in `data`.
        """
        self._held = memoryview(data) if data else None
        self._first_byte = False
        self._deadline = until

    def take_unread(self, rfile: io.BufferedReader[Any]) -> bytes:
        """What `rfile` (buffered over this reader) and the preloaded bytes still hold, unread.

        The start of a pipelined request; the socket is not read (a read now
        answers ``None``, "would block", so `read1` stops at what is held).
        """
        self._paused = True
        try:
            parts = []
            while chunk := rfile.read1(65536):
                parts.append(chunk)
        finally:
            self._paused = False
        return b"".join(parts)

    def expect_request(self, idle: float | None) -> None:
        """Back to the idle phase, for the next request on a kept-alive connection."""
        self._first_byte = True
        self._deadline = _deadline_in(idle)

    def arm(self, seconds: float | None) -> None:
        """Give every later read `seconds` in total from now (`None`: no limit)."""
        self._first_byte = False
        self._deadline = _deadline_in(seconds)

    def until(self, deadline: float | None) -> None:
        """Every later read ends by `deadline` (`time.monotonic()`; `None`: no limit)."""
        self._first_byte = False
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        held = self._held
        if held is not None:
            count = min(len(held), len(buffer))
            memoryview(buffer).cast("B")[:count] = held[:count]
            self._held = held[count:] if count < len(held) else None
            return count
        if self._paused:
            return None
        view = memoryview(buffer).cast("B")
        while True:
            left = self._left()
            if left == 0.0 or not wait_for(self._sock, write=False, timeout=left):
                raise TimeoutError("the client did not send its request in time")
            try:
                count = self._sock.recv_into(view, len(view), _DONTWAIT)
            except (BlockingIOError, InterruptedError):
                continue  # woken with nothing to take: wait again for what is left
            if count and self._first_byte:
                self.arm(self._headers)
            return count

    def _left(self) -> float | None:
        if self._deadline is None:
            return None
        left = self._deadline - time.monotonic()
        return max(left, 0.0)


class StallWriter(io.BufferedIOBase):
    """The handler's `wfile`: writes everything, or gives up after `stall` seconds without room.

    A client that stops reading a stream would otherwise hold its thread and
    descriptor for as long as it keeps the connection open. Gives up with
    `ConnectionAbortedError`, which the server treats like a hang-up (quietly).
    The limit is on a stalled write, not the whole response: a stream the
    client keeps reading may last as long as it likes.
    """

    def __init__(self, sock: socket.socket, *, stall: float | None) -> None:
        super().__init__()
        self._sock = sock
        self._stall = stall

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        sent = 0
        while sent < len(view):
            # Send first and wait only when the kernel has no room: a client that
            # keeps up costs one syscall per write, not a poll and a send.
            try:
                sent += self._sock.send(view[sent:], _DONTWAIT)
                continue
            except (BlockingIOError, InterruptedError):
                pass
            if not wait_for(self._sock, write=True, timeout=self._stall):
                raise ConnectionAbortedError("the client stopped reading the response")
        return sent


def drain(sock: socket.socket, *, seconds: float, limit: int) -> None:
    """Read and drop what the client still sends: until its end, `limit` bytes or `seconds`.

    Closing a socket with unread bytes queued makes the kernel answer with a
    reset, and a reset can destroy an answer the client has not read yet.
    """
    deadline = time.monotonic() + seconds
    taken = 0
    while taken < limit:
        left = deadline - time.monotonic()
        if left <= 0 or not wait_for(sock, write=False, timeout=left):
            return
        try:
            chunk = sock.recv(min(65536, limit - taken), _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            return
        if not chunk:
            return
        taken += len(chunk)


def _deadline_in(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds


def next_backoff(current: float, exc: OSError) -> float:
    """The wait before the next accept when the process is out of descriptors.

    10 ms doubling to 0.5 s; the first one of a run is logged (both servers
    share the rule and the words).
    """
    if not current:
        log.error("cannot accept connections (%s); backing off until some close", exc)
        return _BACKOFF_FIRST
    return min(current * 2, _BACKOFF_MAX)
