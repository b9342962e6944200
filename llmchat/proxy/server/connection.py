"""One client connection of the proxy's server: HTTP/1.1 requests in turn, under deadlines.

A connection stays open between requests (keep-alive) unless the client
says ``Connection: close``, is an HTTP/1.0 client that did not ask for
``Connection: keep-alive``, or the answer could not be framed to leave it in
step (a close-delimited stream, an app failing mid-answer, a request body
left unread that cannot be drained cheaply). Each phase has its total
deadline (`ServerLimits`): the idle wait before each request, the request
line and headers, the body; each write waits at most the send timeout.
"""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

from ... import wire_json
from ..error_shapes import NO_RETRY_STATUSES, StreamCut, error_body, face_of_request_line
from .deadlines import DeadlineReader, StallWriter, drain, wait_for
from .limits import ServerLimits
from .request_body import RequestBody, Unframeable, body_of
from .request_head import (
    BadHead,
    RequestHeaders,
    loggable_line,
    read_request_headers,
    request_line,
)
from .wsgi_exchange import WSGIExchange, request_environ

__all__ = ["ConnectionHandler", "error_response", "linger_seconds"]

log = logging.getLogger("llmchat.proxy")

REQUEST_LINE_MAX = 65536  # as http.server: longer is a 414
# An unread request body up to this size is read and dropped to keep the
# connection; a larger one closes it (reading it could take as long as sending it).
DRAIN_BYTES = 65536
_LINGER_SECONDS = 2.0
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def error_response(
    status: int,
    reason: str,
    body: object,
    *,
    head_only: bool = False,
    extra: Iterable[str] = (),
) -> bytes:
    """A whole error answer with a JSON `body` that closes the connection."""
    data = wire_json.encode_data(body)
    lines = [
        f"HTTP/1.1 {status} {reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        "Connection: close",
        *extra,
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + data


def linger_seconds(limits: ServerLimits) -> float:
    """How long a closing connection may keep sending bytes nobody will read."""
    given = (limits.idle_timeout, limits.header_timeout)
    return min(_LINGER_SECONDS, *(t for t in given if t is not None))


class ConnectionHandler(BaseHTTPRequestHandler):
    """Serves the server's WSGI app (``server.get_app()``) on one connection, a request per call.

    Not `BaseHTTPRequestHandler`'s life, which serves a whole connection in
    its constructor: a pool thread calls `serve_one` with the bytes the
    server's poller read of a request, and the connection goes back to the
    poller between requests (holding no thread), with `take_unread` (a
    pipelined request's start) if it stays open. Its reader, buffer and
    writer live as long as the connection, not a request.
    """

    protocol_version = "HTTP/1.1"
    server_version = "llmchat"
    _request_id: str | None = None
    """The answer's ``x-request-id`` while its access line is logged."""

    def __init__(self, request: Any, client_address: Any, server: Any) -> None:
        self.request = request
        self.client_address = client_address
        self.server = server
        self.setup()

    def setup(self) -> None:
        self.connection = self.request
        try:
            # Headers and chunks are separate writes: Nagle would hold the
            # second for the client's delayed ACK (40 ms) on a kept-alive connection.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # not TCP (a Unix socket in a test): nothing to tune
        limits = self._limits()
        self.limits = limits
        self._reader = DeadlineReader(
            self.connection, idle=limits.idle_timeout, headers=limits.header_timeout
        )
        self._buffered = io.BufferedReader(self._reader)
        self.rfile = self._buffered
        self.wfile = StallWriter(self.connection, stall=limits.send_timeout)
        self._expect_continue = False
        self._body_until: float | None = None
        self.fields = RequestHeaders([])
        address: Any = self.server.server_address
        self._server_pair = (
            str(getattr(self.server, "server_name", address[0])),
            int(address[1]),
        )
        self._client_pair = (str(self.client_address[0]), int(self.client_address[1]))
        self._extra = {"llmchat.client_socket": self.connection}

    def _limits(self) -> ServerLimits:
        limits = getattr(self.server, "limits", None)
        return limits if isinstance(limits, ServerLimits) else ServerLimits()

    def serve_one(
        self, data: bytes | bytearray, *, until: float | None, body_until: float | None = None
    ) -> bool:
        """Serve the request whose first bytes are `data`; whether the connection stays open.

        `until` bounds reading the rest of its head (when `data` ends inside
        it), `body_until` its body (`None`: `body_timeout` from the head's end).
        """
        self._reader.preload(data, until)
        self._body_until = body_until
        self.close_connection = True
        try:
            self.handle_one_request()
        except TimeoutError:
            # A request line and headers too slow: nobody to answer, as with a hang-up.
            log.debug("%s sent no whole request in time; closed", self.address_string())
            self.close_connection = True
        except ConnectionError:
            log.debug("%s went away", self.address_string())
            self.close_connection = True
        return not self.close_connection

    def take_unread(self) -> bytes:
        """Bytes read past the request just served: the next (pipelined) request's start."""
        return self._reader.take_unread(self._buffered)

    def close(self) -> None:
        """End the connection: linger over bytes nobody will read, then close the socket."""
        try:
            self.finish()
        except OSError:
            pass
        try:
            self.connection.close()
        except OSError:
            pass

    def handle_one_request(self) -> None:
        self.close_connection = True
        self._expect_continue = False
        line = bytes(self.rfile.readline(REQUEST_LINE_MAX + 1))
        if line in (b"\r\n", b"\n"):
            line = bytes(self.rfile.readline(REQUEST_LINE_MAX + 1))  # RFC 9112 §2.2
        if not line:
            return
        self.raw_requestline = line
        if len(line) > REQUEST_LINE_MAX:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        self.close_connection = not self._client_keeps_alive()
        self._serve()

    def parse_request(self) -> bool:
        """Read the request line and headers (`request_head`); answer and close on bad ones."""
        self.command, self.request_version = "", "HTTP/0.9"
        self.close_connection = True
        text = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        # Every line that quotes the request (the access line, an error) shows it
        # without a ?key= value; the app gets the target as sent (self.path).
        self.requestline = loggable_line(text)
        if not text.strip():
            return False  # a blank line where the request should be: nothing to answer
        try:
            self.command, self.path, self.request_version = request_line(text)
            self.fields = read_request_headers(self.rfile)
        except BadHead as exc:
            self.send_error(exc.status, str(exc))
            return False
        expect = str(self.fields.get("Expect", ""))
        if expect.lower() == "100-continue" and self.request_version >= "HTTP/1.1":
            # Not now: `100 Continue` goes out on the app's first read of the body,
            # so a request refused without reading it (401, 413) is never invited.
            self._expect_continue = True
        return True

    def _client_keeps_alive(self) -> bool:
        """RFC 9112 §9.3: HTTP/1.1 persists unless ``close``; HTTP/1.0 only with ``keep-alive``."""
        given = ",".join(self.fields.get_all("Connection") or [])
        options = {token.strip().lower() for token in given.split(",")}
        if "close" in options:
            return False
        return self.request_version >= "HTTP/1.1" or "keep-alive" in options

    def _invite(self) -> None:
        self.wfile.write(_CONTINUE)

    def _serve(self) -> None:
        limits = self.limits
        try:
            body, length = body_of(
                self.fields, self.rfile, self._invite if self._expect_continue else None
            )
        except Unframeable as exc:
            self.send_error(exc.status, str(exc))
            return
        # The head is in: the body's deadline starts (or started when the poller saw the head end).
        if self._body_until is None:
            self._reader.arm(limits.body_timeout)
        else:
            self._reader.until(self._body_until)
        exchange = WSGIExchange(
            self.wfile.write,
            method=self.command,
            version=self.request_version,
            keep_alive=not self.close_connection,
            body_settles=lambda: body.settles(DRAIN_BYTES),
        )
        try:
            exchange.run(self.server.get_app(), self._environ(body, length))  # type: ignore[attr-defined]
        except Exception as exc:
            self.close_connection = True
            self._failed(exchange, exc)
            return
        if not exchange.keep_alive or not (body.complete or body.drain(DRAIN_BYTES)):
            self.close_connection = True
        # The access line carries the answer's x-request-id, as the app's own lines do
        # (the logging filter reads ``request_id`` from the record when it is there).
        self._request_id = exchange.header("x-request-id")
        try:
            self.log_request(exchange.code, exchange.sent_bytes)
        finally:
            self._request_id = None

    def _environ(self, body: RequestBody, length: int | None) -> dict[str, Any]:
        return request_environ(
            method=self.command,
            target=self.path,
            version=self.request_version,
            headers=self.fields,
            body=body,
            content_length=length,
            server=self._server_pair,
            client=self._client_pair,
            extra=self._extra,
        )

    def _failed(self, exchange: WSGIExchange, exc: Exception) -> None:
        """After the app raised, or a write failed: a 500 if nothing was sent, else a cut."""
        if exchange.broken:
            log.debug("%s went away mid-answer", self.address_string())
            return
        if isinstance(exc, StreamCut):  # on purpose, and the app logged why
            log.debug("cut the answer to %r: %s", self.requestline, exc)
            return
        # Not the traceback: its text could quote a credential the app held.
        log.error("the WSGI app failed (%s) for %r", type(exc).__name__, self.requestline)
        if not exchange.headers_sent:
            self.send_error(500, "Internal proxy error")
        # Otherwise the connection ends here, without the body's end: the client sees a cut.

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """`http.server`'s own errors (400, 414, 431, ...) as JSON in the face of the path."""
        short, long = self.responses.get(code, ("Error", "Error"))
        text = (message or long)[:200]
        self.log_error("code %d, message %s", code, text)
        self.close_connection = True
        face = face_of_request_line(getattr(self, "raw_requestline", b""))
        head_only = getattr(self, "command", "") == "HEAD"
        try:
            self.wfile.write(
                error_response(
                    code,
                    short,
                    error_body(face, code, text),
                    head_only=head_only,
                    extra=["x-should-retry: false"] if code in NO_RETRY_STATUSES else [],
                )
            )
        except OSError:
            log.debug("%s went away before its error answer", self.address_string())

    def finish(self) -> None:
        if wait_for(self.connection, write=False, timeout=0):
            # Bytes nobody will read (a refused body, the rest of a 414's line, a
            # pipelined request after a close): half-close so the answer ends,
            # then drain them, or close() sends a reset that can destroy the answer.
            try:
                self.connection.shutdown(socket.SHUT_WR)
            except OSError:
                return
            drain(self.connection, seconds=linger_seconds(self.limits), limit=DRAIN_BYTES)

    def log_message(self, format: str, *args: Any) -> None:
        extra = {"request_id": self._request_id} if self._request_id else None
        log.info("%s %s", self.address_string(), format % args, extra=extra)
