"""A small threaded WSGI server for the proxy, from the standard library.

`wsgiref` writes every chunk the app yields straight to the socket (no output
buffering), which streaming needs. This adds a thread per connection, quiet
handling of clients that hang up, and the client socket in the environ
(``llmchat.client_socket``) so the app can notice a hang-up during prefill.

It also refuses to be held hostage (see `ServerLimits`): total deadlines for
the idle connection, the request line and headers, and the body; a cap on
connections served at once, beyond which a few threads answer a 503 in the
face's shape and the rest are closed at once; an accept loop that backs off
instead of spinning when the process is out of descriptors; and the errors
`http.server` answers itself (400, 414, 431) as JSON in the face's shape.

For production, any WSGI server that does not buffer responses works the same
way; see the README (gunicorn's ``gthread`` workers, which also pass the socket).
"""

from __future__ import annotations

import errno
import io
import logging
import math
import socket
import socketserver
import threading
import time
from collections.abc import Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from .. import wire_json
from .deadlines import DeadlineReader, StallWriter, drain, wait_for
from .limits import ServerLimits
from .shapes import error_body, face_of_request_line, overloaded_body

__all__ = ["ProxyServer", "ServerLimits", "make_server"]

log = logging.getLogger("llmchat.proxy")

# accept() failing for want of a descriptor or memory: retrying at once only spins.
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BACKOFF_FIRST = 0.01
_BACKOFF_MAX = 0.5
# Over the cap, this many threads read a request line to answer a 503 in its
# face's shape; connections beyond them are closed unanswered, so a flood costs
# a bounded number of threads.
_REJECTERS = 8
_LINGER_SECONDS = 2.0  # also what an over-cap client gets to send its request line
_DRAIN_BYTES = 65536
_REFUSAL_LOG_SECONDS = 60.0
_REQUEST_LINE_MAX = 65537  # what wsgiref reads; more is a 414


def error_response(
    status: int,
    reason: str,
    body: object,
    *,
    head_only: bool = False,
    extra: Iterable[str] = (),
) -> bytes:
    """A whole HTTP/1.0 error answer with a JSON `body` that closes the connection."""
    data = wire_json.encode_data(body)
    lines = [
        f"HTTP/1.0 {status} {reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        "Connection: close",
        *extra,
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + data


class _Handler(WSGIRequestHandler):
    """One connection, one request (as `wsgiref`'s), read under the server's deadlines."""

    def setup(self) -> None:
        self.connection = self.request
        limits = self._limits()
        self._reader = DeadlineReader(
            self.connection, idle=limits.idle_timeout, headers=limits.header_timeout
        )
        self.rfile = io.BufferedReader(self._reader)
        self.wfile = StallWriter(self.connection, stall=limits.send_timeout)

    def _limits(self) -> ServerLimits:
        server = self.server
        return server.limits if isinstance(server, ProxyServer) else ServerLimits()

    def handle(self) -> None:
        try:
            super().handle()
        except TimeoutError:
            # Idle, or a request line and headers too slow: nobody to answer, as with a hang-up.
            log.debug("%s sent no whole request in time; closed", self.address_string())

    def get_environ(self) -> dict[str, Any]:
        # wsgiref asks for the environ once the headers are in: the body's deadline starts.
        self._reader.arm(self._limits().body_timeout)
        environ = super().get_environ()
        environ["llmchat.client_socket"] = self.connection
        return environ

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """`http.server`'s own errors (400, 414, 431, ...) as JSON in the face of the path."""
        short, long = self.responses.get(code, ("Error", "Error"))
        text = (message or long)[:200]
        self.log_error("code %d, message %s", code, text)
        self.close_connection = True
        face = face_of_request_line(getattr(self, "raw_requestline", b""))
        head_only = getattr(self, "command", "") == "HEAD" or code in (204, 304) or code < 200
        self.wfile.write(
            error_response(code, short, error_body(face, code, text), head_only=head_only)
        )

    def finish(self) -> None:
        super().finish()
        if wait_for(self.connection, write=False, timeout=0):
            # Bytes the app never read (a refused body, the rest of a 414's line):
            # half-close so the answer ends, then drain them, or close() sends a reset.
            try:
                self.connection.shutdown(socket.SHUT_WR)
            except OSError:
                return
            drain(self.connection, seconds=_linger_seconds(self._limits()), limit=_DRAIN_BYTES)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


class ProxyServer(socketserver.ThreadingMixIn, WSGIServer):
    """`WSGIServer` with a daemon thread per connection, under `limits`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        server_address: tuple[str, int],
        handler: type[WSGIRequestHandler] = _Handler,
        bind_and_activate: bool = True,
        *,
        limits: ServerLimits | None = None,
    ) -> None:
        self.limits = limits if limits is not None else ServerLimits()
        self.request_queue_size = self.limits.backlog  # read by server_activate's listen()
        self._gate = threading.Lock()
        self._serving = 0
        self._rejecting = 0
        self._refusals = 0
        self._refusals_told = -math.inf
        self._stopping = threading.Event()
        self._backoff = 0.0
        super().__init__(server_address, handler, bind_and_activate)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def connections(self) -> int:
        """Connections being served now (not counting those being refused)."""
        with self._gate:
            return self._serving

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response is routine for a streaming proxy.
        log.debug("connection from %s ended with an error", client_address, exc_info=True)

    # -- accepting ----------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopping.clear()
        super().serve_forever(poll_interval)

    def shutdown(self) -> None:
        self._stopping.set()  # cuts an accept back-off short
        super().shutdown()

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            pair = self.socket.accept()
        except OSError as exc:
            if exc.errno in _EXHAUSTED:
                self._back_off(exc)
            raise  # socketserver drops it; the select loop comes back here
        if self._backoff:
            log.warning("accepting connections again")
            self._backoff = 0.0
        return pair

    def _back_off(self, exc: OSError) -> None:
        """Wait before the next accept: the pending connection stays queued, select fires again."""
        if not self._backoff:
            log.error("cannot accept connections (%s); backing off until some close", exc)
            self._backoff = _BACKOFF_FIRST
        else:
            self._backoff = min(self._backoff * 2, _BACKOFF_MAX)
        self._stopping.wait(self._backoff)

    # -- admitting ----------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        verdict = self._admit()
        if verdict == "drop":
            self.shutdown_request(request)
            return
        target = self.process_request_thread if verdict == "serve" else self._refuse
        thread = threading.Thread(
            target=target,
            args=(request, client_address),
            name=f"llmchat-proxy-{verdict}",
            daemon=True,
        )
        try:
            thread.start()
        except BaseException:
            self._release(verdict)
            raise  # socketserver closes the request

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            # Released before the close, so a client that sees its connection end
            # can count on the slot being free.
            self._release("serve")
            self.shutdown_request(request)

    def _admit(self) -> str:
        with self._gate:
            if self._serving < self.limits.max_connections:
                self._serving += 1
                return "serve"
            self._tell_refusal()
            if self._rejecting < _REJECTERS:
                self._rejecting += 1
                return "reject"
            return "drop"

    def _release(self, verdict: str) -> None:
        with self._gate:
            if verdict == "serve":
                self._serving -= 1
            else:
                self._rejecting -= 1

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
            self._release("reject")
            self.shutdown_request(request)

    def _answer_overloaded(self, sock: socket.socket) -> None:
        """Read the request line (to know the face), answer 503, let the client finish sending."""
        seconds = _linger_seconds(self.limits)
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


def _linger_seconds(limits: ServerLimits) -> float:
    """How long a closing connection may keep sending bytes nobody will read."""
    given = (limits.idle_timeout, limits.header_timeout)
    return min(_LINGER_SECONDS, *(t for t in given if t is not None))


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
) -> ProxyServer:
    """Bind `app` to `host:port` (port 0 picks a free one); call `serve_forever()` on it.

    The keyword arguments are `ServerLimits`' (seconds; `None` for no limit):
    `idle_timeout` to the first byte, `header_timeout` for the request line
    and headers, `body_timeout` for the body, each a total, not a gap between
    reads; `send_timeout` for one write to a client that reads nothing.
    Over `max_connections`, clients get a 503 in their face's shape. Raises
    `TypeError`/`ValueError` naming a bad argument, before binding.
    """
    limits = ServerLimits(
        backlog=backlog,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        send_timeout=send_timeout,
    )
    server = ProxyServer((host, port), _Handler, limits=limits)
    server.set_app(app)
    return server
