"""gunicorn's threaded worker with the embedded server's deadlines and error answers.

Stock ``gthread`` reads a request with blocking ``recv`` calls that wait
forever: a few sockets that send part of a head, or a head and a trickle of
body, hold every thread of a worker. This worker (`deadline_worker`) reads
through the same total-deadline reader as `make_server` (`DeadlineReader`):

- the request line and headers get ``header_timeout`` from their first byte;
  past it the connection is closed unanswered;
- the body gets ``body_timeout`` from the end of the head; past it the app's
  read raises `TimeoutError`, answered 408 in the face's shape, and the
  connection closes;
- each write waits at most ``send_timeout`` for room (``SO_SNDTIMEO``, which
  leaves the socket blocking for gunicorn's code and keeps it a real socket
  for `HangupWatch`); a client that stops reading is let go and its app
  iterator closed, which cancels the upstream generation;
- the worker's poller reads each request whole before a thread takes it
  (`gunicorn_prebuffer`), so a quiet client, in its head or its body, holds
  no thread; the deadlines above run there, and an ``Expect: 100-continue``
  request is the exception (it goes to a thread after its head);
- an ``Expect: 100-continue`` is answered on the app's first read of the body;
- at the descriptor limit the accept loop backs off instead of ending the worker.

A broken chunked body (or one cut short) is a ``ValueError`` to the app (its
400, in the face's shape) with a fixed message, never the bytes gunicorn's
exceptions quote, and the connection closes. The errors gunicorn answers
itself (a bad request line or header, 414, 431, 505) are JSON in the face's
shape, as `make_server`'s are, logged on one line without the request's bytes.
"""

from __future__ import annotations

import errno
import logging
import math
import socket
import ssl
import struct
import threading
import time
from typing import Any

from gunicorn.http import errors as http_errors
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import TConn

from ..error_shapes import NO_RETRY_STATUSES, error_body, face_of_request_line
from .connection import DRAIN_BYTES, error_response, linger_seconds
from .deadlines import DeadlineReader, drain, next_backoff, wait_for
from .gunicorn_prebuffer import PrebufferWorker
from .limits import ServerLimits
from .request_framing import RequestFraming

__all__ = ["BadRequestBody", "DeadlineWorker", "deadline_worker"]

log = logging.getLogger("llmchat.proxy")

_HEAD_SAMPLE = 8192  # enough of a head to find its request line's path (the face)
_MAX_BODY_CHUNK = 1024 * 1024
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# accept() failing for want of a descriptor or memory (as `ProxyServer`'s).
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class BadRequestBody(ValueError):
    """The request body's framing is broken: the app answers 400; the connection closes."""


class _HeadTimeout(http_errors.NoMoreData):
    """The head did not arrive in time: gunicorn closes quietly, as after a hang-up."""


class _DeadlineUnreader(SocketUnreader):
    """gunicorn's socket source, each read bounded by the connection's current deadline."""

    def __init__(self, sock: socket.socket, conn: DeadlineConn) -> None:
        super().__init__(sock)
        self._conn = conn

    def chunk(self, size_hint: int | None = None) -> bytes:
        # As gunicorn's: a body of known length may be read up to 1 MiB at once.
        size = max(self.mxchunk, min(size_hint or 0, _MAX_BODY_CHUNK))
        return self._conn.read(size)


class DeadlineConn(TConn):
    """A client connection whose reads run under `limits`' deadlines, phase by phase."""

    def __init__(
        self, cfg: Any, sock: socket.socket, client: Any, server: Any, limits: ServerLimits
    ) -> None:
        super().__init__(cfg, sock, client, server)
        self.limits = limits
        head = limits.header_timeout
        self.reader = DeadlineReader(sock, idle=head, headers=head)
        self.in_head = True
        self.fresh_head = True
        self.head_sample = b""
        self.lingered = False
        self.framing: RequestFraming | None = None
        """The request being read in the poller (`PrebufferWorker`), if any."""
        self.deadline = math.inf  # of the poller's current phase
        self.head_until: float | None = None  # the head's deadline, once it started
        self.body_until: float | None = None  # the body's, once the head ended
        self.early = b""  # bytes the poller read, for the parser
        self.framing_sample = b""
        self.kept = False  # waiting for a second (or later) request
        self.whole = True  # whether the poller handed over the whole request
        if limits.send_timeout is not None:
            seconds = limits.send_timeout
            timeval = struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000))
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            except OSError:
                pass  # not a platform with send timeouts: writes wait as gunicorn's do

    def init(self) -> None:
        fresh = not self.initialized
        super().init()
        # Only plain HTTP/1.x over TCP: TLS keeps bytes of its own above the
        # socket, which polling the socket would not see.
        parser: Any = self.parser
        if fresh and type(parser) is RequestParser and not isinstance(self.sock, ssl.SSLSocket):
            held = parser.unreader.take_buffered()
            parser.unreader = _DeadlineUnreader(self.sock, self)
            parser.unreader.unread(held)
        if self.early and parser is not None:
            parser.unreader.unread(self.early)
            self.early = b""

    def hand_over(self, data: bytes) -> None:
        """Give the bytes the poller read to the parser (before `init`, to `init`)."""
        parser: Any = self.parser
        if parser is None:
            self.early = data
        else:
            parser.unreader.unread(data)

    def wait_for_data(self, timeout: float | None) -> bool:
        """Whether a byte (or the end) arrived within `timeout`, in `poll`.

        A connection with nothing to say holds a thread no longer than a head
        may take; then it waits in the poller, holding none. gthread's own wait
        opens a selector, a descriptor, which at the descriptor limit fails and
        drops the connection unanswered; `poll` needs none.
        """
        if self.data_ready:
            return True
        head = self.limits.header_timeout
        if head is not None:
            timeout = head if timeout is None else min(timeout, head)
        try:
            self.data_ready = wait_for(self.sock, write=False, timeout=timeout)
        except (OSError, ValueError):
            return False  # closed under us: gthread's own answer
        return self.data_ready

    def expect_head(self) -> None:
        self.in_head, self.fresh_head = True, True
        # What the poller read is the head's start (for the face of an error).
        self.head_sample = self.framing_sample
        self.framing_sample = b""

    def expect_body(self) -> None:
        self.in_head, self.fresh_head = False, False
        # Counted from the head's end, where the poller saw it.
        until = self.body_until
        self.reader.arm(self.limits.body_timeout if until is None else until - time.monotonic())

    def read(self, size: int) -> bytes:
        if self.fresh_head:
            # The thread reads only once the socket is readable: the head's
            # deadline starts with its first byte.
            self.fresh_head = False
            if self.head_until is None:
                self.reader.expect_request(self.limits.header_timeout)
            else:  # the head started in the poller: what is left of its deadline
                self.reader.arm(self.head_until - time.monotonic())
        buffer = bytearray(size)
        try:
            count = self.reader.readinto(buffer)
        except TimeoutError:
            if self.in_head:
                # Closed unanswered, at once: no answer to protect with a linger.
                self.lingered = True
                raise _HeadTimeout() from None
            raise
        data = bytes(buffer[:count])
        if self.in_head and len(self.head_sample) < _HEAD_SAMPLE:
            self.head_sample += data[: _HEAD_SAMPLE - len(self.head_sample)]
        return data

    def close(self, graceful: bool = False) -> None:
        # The linger (drain) already ran in the request's thread, not the poller's.
        super().close(graceful=graceful and not self.lingered)


class _GuardedReader:
    """A body reader that turns gunicorn's framing errors into `BadRequestBody`.

    gunicorn's own exceptions quote the bytes they choke on, which are the
    client's prompt; the app would log them with a traceback and answer 500.
    It also sends a withheld ``100 Continue`` on the app's first read (gunicorn
    sends it before the app runs), so a request refused unread is never invited.
    """

    def __init__(self, reader: Any, req: Any, invite: socket.socket | None) -> None:
        self._reader = reader
        self._req = req
        self._invite = invite
        self._closing = bool(req.must_close)
        if invite is not None:
            # Uninvited, the client may never send the body: the connection
            # cannot be kept unless the app reads it (and so invites it).
            req.force_close()

    def read(self, size: int) -> bytes:
        if self._invite is not None:
            sock, self._invite = self._invite, None
            self._req.must_close = self._closing
            sock.sendall(_CONTINUE)
        try:
            return bytes(self._reader.read(size))
        except (http_errors.ParseException, http_errors.NoMoreData):
            self._req.force_close()
            # Bad chunked framing, or the client ended its side inside the body.
            raise BadRequestBody("The request body is malformed or cut short") from None
        except OSError:
            self._req.force_close()  # a deadline passed: out of step for good
            raise


class DeadlineWorker(PrebufferWorker):
    """``gthread`` with `limits` and the app's body limit (set on the subclass
    `deadline_worker` makes), reading each request whole in its poller first."""

    limits = ServerLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._current = threading.local()
        self._backoff = 0.0

    def accept(self, listener: socket.socket) -> None:
        # As gthread's, with a `DeadlineConn` for the connection, and a back-off
        # where gthread would let EMFILE end the worker and every stream on it.
        try:
            client_sock, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno in _EXHAUSTED:
                self._back_off(exc)
                return
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        if self._backoff:
            log.warning("accepting connections again")
            self._backoff = 0.0
        self.nr_conns += 1
        client_sock.setblocking(True)
        conn = DeadlineConn(self.cfg, client_sock, client_addr, listener.getsockname(), self.limits)
        if self.prebuffers(conn):
            self.await_request(conn)
        else:
            self.enqueue_req(conn)

    def _back_off(self, exc: OSError) -> None:
        """Pause the worker's loop (10 ms doubling to 0.5 s): the connection stays queued."""
        self._backoff = next_backoff(self._backoff, exc)
        time.sleep(self._backoff)  # the main loop's own pace; requests run in the pool

    def handle(self, conn: Any) -> Any:
        if not isinstance(conn, DeadlineConn):
            return super().handle(conn)
        conn.expect_head()
        self._current.conn = conn
        try:
            result = super().handle(conn)
        finally:
            self._current.conn = None
        if result is False and not conn.lingered:
            self._linger(conn)
        return result

    def _linger(self, conn: DeadlineConn) -> None:
        """Half-close, then drop what the client still sends, or close() would reset the answer."""
        conn.lingered = True
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return
        drain(conn.sock, seconds=linger_seconds(self.limits), limit=DRAIN_BYTES)

    def handle_request(self, req: Any, conn: Any) -> bool:
        if isinstance(conn, DeadlineConn):
            if self.kept_alive_full() or not conn.whole:
                # gthread's own rule, counting the poller's kept-alive ones; and a
                # request refused before it all came: draining its rest for the
                # next one would hold this thread (a linger does, briefly).
                req.force_close()
            conn.expect_body()
            if req.body is not None:
                invite = conn.sock if req._expected_100_continue else None
                req._expected_100_continue = False  # not before the app reads: see _GuardedReader
                req.body.reader = _GuardedReader(req.body.reader, req, invite)
        try:
            return bool(super().handle_request(req, conn))
        except BlockingIOError:
            # SO_SNDTIMEO passed with no room: the client stopped reading. gunicorn
            # closed the app's iterator (the upstream is cancelled); close quietly.
            log.debug("%s stopped reading its answer; let go", conn.client)
            raise BrokenPipeError(errno.EPIPE, "the client stopped reading") from None

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """gunicorn's own error answers as JSON in the face's shape, logged without the bytes."""
        status, reason = _status_of(exc)
        conn = getattr(self._current, "conn", None)
        sample = conn.head_sample if isinstance(conn, DeadlineConn) else b""
        ip = addr[0] if addr else ""
        if status == 500:
            log.error("request from %s failed: %s", ip, type(exc).__name__)
        else:
            log.warning("invalid request from %s: %d %s", ip, status, type(exc).__name__)
        line = sample.split(b"\n", 1)[0]
        head_only = line.startswith(b"HEAD ")
        text = "Internal proxy error" if status == 500 else reason
        answer = error_response(
            status,
            reason,
            error_body(face_of_request_line(line), status, text),
            head_only=head_only,
            extra=["x-should-retry: false"] if status in NO_RETRY_STATUSES else [],
        )
        try:
            client.sendall(answer)
        except OSError:
            log.debug("%s went away before its error answer", ip)


def _status_of(exc: BaseException) -> tuple[int, str]:
    """The status `make_server` answers for the head gunicorn refused with `exc`."""
    if isinstance(exc, http_errors.LimitRequestLine):
        return 414, "URI Too Long"
    if isinstance(exc, http_errors.LimitRequestHeaders):
        return 431, "Request Header Fields Too Large"
    if isinstance(exc, http_errors.InvalidHTTPVersion) and _major(exc) >= 2:
        return 505, "HTTP Version Not Supported"
    if isinstance(exc, http_errors.UnsupportedTransferCoding):
        return 501, "Not Implemented"
    if isinstance(exc, http_errors.ExpectationFailed):
        return 417, "Expectation Failed"
    if isinstance(exc, http_errors.ForbiddenProxyRequest):
        return 403, "Forbidden"
    if isinstance(exc, (http_errors.ParseException, ssl.SSLError)):
        return 400, "Bad Request"
    return 500, "Internal Server Error"


def _major(exc: BaseException) -> int:
    """The major version gunicorn refused: a tuple when it parsed, else unreadable (0)."""
    version = getattr(exc, "version", None)
    if isinstance(version, tuple) and version and isinstance(version[0], int):
        return version[0]
    return 0


def deadline_worker(limits: ServerLimits, max_body_bytes: int = 10_000_000) -> type[DeadlineWorker]:
    """A `DeadlineWorker` class under `limits`, for gunicorn's ``worker_class``.

    `max_body_bytes` is the app's: the most of a body its poller buffers.
    """
    attributes = {"limits": limits, "max_body_bytes": max_body_bytes, "__module__": __name__}
    return type("LLMChatWorker", (DeadlineWorker,), attributes)
