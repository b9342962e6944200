"""A small HTTP/1.1 WSGI server for the proxy, from the standard library: gunicorn's gthread model.

One thread accepts connections and waits on every one that is not being
served (`poller.Poller`): idle kept-alive connections, and requests still
arriving. A whole request goes to a bounded pool of threads (`threads`, 128
by default: at least as many as the streams served at once); the thread serves it
(`connection.ConnectionHandler`) and gives the connection back, or, while
the pool has threads to spare, waits a moment for its next request itself
(`keepalive`: one thread wake-up per request, not two). Every piece
the app yields is written at once (chunked to HTTP/1.1 clients), which
streaming needs, so a stream holds its thread to its end; the client socket
is in the environ (``llmchat.client_socket``) so the app can notice a
hang-up during prefill.

It also refuses to be held hostage (see `ServerLimits`): total deadlines for
the idle wait before each request, the request line and headers, and the
body, kept by the poller, so a quiet client holds no thread; a send timeout;
a cap on connections open at once — beyond which an idle kept-alive
connection is closed to make room, or else a few threads answer a 503 in
the face's shape and the rest are closed at once; an accept loop that backs
off instead of spinning when the process is out of descriptors; and the
errors `http.server` answers itself (400, 414, 431) as JSON in the face's shape.

For production, any WSGI server that does not buffer responses works the same
way; see the README (gunicorn's ``gthread`` workers, which also pass the socket).
"""

from __future__ import annotations

import errno
import io
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from http.server import HTTPServer
from typing import Any

from ..error_shapes import face_of_request_line, overloaded_body
from .connection import ConnectionHandler, error_response, linger_seconds
from .deadlines import DeadlineReader, StallWriter, drain, next_backoff
from .limits import ServerLimits
from .poller import Poller

__all__ = ["ProxyServer", "ServerLimits", "error_response", "make_server"]

log = logging.getLogger("llmchat.proxy")

# accept() failing for want of a descriptor or memory: retrying at once only spins.
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Over the cap, this many threads read a request line to answer a 503 in its
# face's shape; connections beyond them are closed unanswered, so a flood costs
# a bounded number of threads.
_REJECTERS = 8
_DRAIN_BYTES = 65536
_REFUSAL_LOG_SECONDS = 60.0
_REQUEST_LINE_MAX = 65537  # what the handler reads; more is a 414
# One process serves every client, and a stream holds its thread to its last
# byte: the pool is sized for the streams served at once (threads >= streams),
# here twice the 64 concurrent agent streams the load bench drives. With 32
# (gunicorn's per-worker default) the 33rd stream waited for a whole stream to
# end before its first byte. Idle threads cost no CPU: each waits on its own lock.
DEFAULT_THREADS = 128


class ProxyServer(HTTPServer):
    """An HTTP/1.1 WSGI server: a poller thread and a pool of `threads` threads, under `limits`.

    A connection counts against `max_connections` for as long as it is open,
    idle between requests included: each holds a descriptor, which is what
    the cap protects (threads are the pool's, whatever the connections). But
    an idle one is the first to go: at the cap, a new connection ends the
    longest-idle kept-alive connection (whose client reconnects, as after any
    idle close) rather than being refused, so idle pools cannot lock new
    clients out.
    """

    allow_reuse_address = True

    def __init__(
        self,
        server_address: tuple[str, int],
        handler: type[ConnectionHandler] = ConnectionHandler,
        bind_and_activate: bool = True,
        *,
        limits: ServerLimits | None = None,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        self.limits = limits if limits is not None else ServerLimits()
        self.request_queue_size = self.limits.backlog  # read by server_activate's listen()
        self.threads = threads
        self._gate = threading.Lock()
        self._serving = 0
        self._rejecting = 0
        self._refusals = 0
        self._refusals_told = -math.inf
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()  # not serving yet: `shutdown()` has nothing to wait for
        self._backoff = 0.0
        self._poller: Poller | None = None
        self.application: Callable[..., Any] | None = None
        super().__init__(server_address, handler, bind_and_activate)

    def set_app(self, application: Callable[..., Any]) -> None:
        self.application = application

    def get_app(self) -> Callable[..., Any] | None:
        return self.application

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def connections(self) -> int:
        """Connections open now, idle kept-alive ones included (not counting those refused)."""
        with self._gate:
            return self._serving

    @property
    def pool_threads(self) -> list[threading.Thread]:
        """The pool's threads (none before `serve_forever`)."""
        return [] if self._poller is None else self._poller.threads

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response is routine for a streaming proxy.
        log.debug("connection from %s ended with an error", client_address, exc_info=True)

    # -- serving ------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept and serve until `shutdown()` (`poll_interval` is unused: the poller wakes).

        A `shutdown()` that comes before this starts (or before the poller runs)
        still stops it: the stop flag is cleared when serving ends, never at its
        start, as `socketserver` does.
        """
        self._stopped.clear()
        try:
            if self._poller is None:
                # The poller reads a body whole before a thread takes it only up
                # to the app's own limit; an app that names none reads its body
                # in the thread (it may answer before the body is all sent).
                body_limit = getattr(self.application, "max_body_bytes", 0)
                if isinstance(body_limit, bool) or not isinstance(body_limit, int):
                    body_limit = 0
                self._poller = Poller(self, self.threads, body_limit)
            if not self._stopping.is_set():
                self._poller.run()
        finally:
            self._stopping.clear()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop `serve_forever` and wait for it to return (from another thread)."""
        self._stopping.set()  # cuts an accept back-off short
        if self._poller is not None:
            self._poller.stop()
        self._stopped.wait()

    def server_close(self) -> None:
        """Stop listening and end the idle kept-alive connections (busy ones after their answer)."""
        if self._poller is not None:
            self._poller.stop()
            self._stopped.wait()
            self._poller.close()
        super().server_close()

    # -- accepting ----------------------------------------------------------

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            pair = self.socket.accept()
        except (BlockingIOError, InterruptedError):
            raise
        except OSError as exc:
            if exc.errno in _EXHAUSTED:
                self._back_off(exc)
            raise  # the poller comes back here when the listener is readable again
        if self._backoff:
            log.warning("accepting connections again")
            self._backoff = 0.0
        return pair

    def _back_off(self, exc: OSError) -> None:
        """Wait before the next accept: the pending connection stays queued, polled again."""
        self._backoff = next_backoff(self._backoff, exc)
        self._stopping.wait(self._backoff)

    # -- admitting (the poller calls these) -----------------------------------

    def _take_slot(self) -> bool:
        """Whether one more connection may be served (then it counts)."""
        with self._gate:
            if self._serving < self.limits.max_connections:
                self._serving += 1
                return True
            return False

    def _release_slot(self) -> None:
        with self._gate:
            self._serving -= 1

    def _reject(self, sock: socket.socket, client_address: Any) -> None:
        """Over the cap with no idle connection to end: a few threads answer 503, the rest close."""
        with self._gate:
            self._tell_refusal()
            rejecting = self._rejecting < _REJECTERS
            if rejecting:
                self._rejecting += 1
        if not rejecting:
            self.shutdown_request(sock)
            return
        thread = threading.Thread(
            target=self._refuse,
            args=(sock, client_address),
            name="llmchat-proxy-reject",
            daemon=True,
        )
        try:
            thread.start()
        except BaseException:
            with self._gate:
                self._rejecting -= 1
            self.shutdown_request(sock)
            raise

    def _tell_refusal(self) -> None:
        """Log refusals at most once a minute: a flood must not flood the log too."""
        self._refusals += 1
        now = time.monotonic()
        if now - self._refusals_told >= _REFUSAL_LOG_SECONDS:
            log.warning(
                "at the limit of %d connections; refused %d since the last report",
                self.limits.max_connections,
                self._refusals,
            )
            self._refusals, self._refusals_told = 0, now

    def _refuse(self, request: Any, client_address: Any) -> None:
        try:
            self._answer_overloaded(request)
        except OSError:
            log.debug("refusing %s ended with an error", client_address, exc_info=True)
        finally:
            with self._gate:
                self._rejecting -= 1
            self.shutdown_request(request)

    def _answer_overloaded(self, sock: socket.socket) -> None:
        """Read the request line (to know the face), answer 503, let the client finish sending."""
        seconds = linger_seconds(self.limits)
        reader = DeadlineReader(sock, idle=seconds, headers=seconds)
        reader.arm(seconds)  # one deadline from accept, not one per phase
        buffered = io.BufferedReader(reader)
        line = buffered.readline(_REQUEST_LINE_MAX)
        message = (
            f"The proxy is serving its limit of {self.limits.max_connections} connections; "
            "retry shortly"
        )
        body = overloaded_body(face_of_request_line(line), message)
        answer = error_response(503, "Service Unavailable", body, extra=["Retry-After: 1"])
        StallWriter(sock, stall=seconds).write(answer)
        sock.shutdown(socket.SHUT_WR)
        drain(sock, seconds=seconds, limit=_DRAIN_BYTES)  # or close() would reset the 503


def make_server(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 11434,
    *,
    backlog: int = 128,
    max_connections: int = 256,
    idle_timeout: float | None = 15.0,
    header_timeout: float | None = 10.0,
    body_timeout: float | None = 60.0,
    send_timeout: float | None = 60.0,
    threads: int = DEFAULT_THREADS,
) -> ProxyServer:
    """Bind `app` to `host:port` (port 0 picks a free one); call `serve_forever()` on it.

    It speaks HTTP/1.1: connections are kept alive between requests, streamed
    answers go chunked to HTTP/1.1 clients (close-delimited to HTTP/1.0 ones),
    chunked request bodies are read.

    The keyword arguments are `ServerLimits`' (seconds; `None` for no limit):
    `idle_timeout` to each request's first byte (from accept, or from the end
    of the previous answer on a kept-alive connection), `header_timeout` for
    the request line and headers, `body_timeout` for the body, each a total,
    not a gap between reads; `send_timeout` for one write to a client that
    reads nothing. Over `max_connections`, the longest-idle kept-alive
    connection is closed to make room, or else clients get a 503 in their
    face's shape. `threads` is the pool that serves requests: how many are
    answered at once (a stream holds its thread to its end); idle and
    arriving connections hold none. Raises `TypeError`/`ValueError` naming a
    bad argument, before binding.
    """
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"threads must be an int, got {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    limits = ServerLimits(
        backlog=backlog,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        send_timeout=send_timeout,
    )
    server = ProxyServer((host, port), ConnectionHandler, limits=limits, threads=threads)
    server.set_app(app)
    return server
