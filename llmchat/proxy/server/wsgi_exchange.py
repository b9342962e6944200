"""One request through a WSGI app, answered in HTTP/1.1 framing (PEP 3333, RFC 9112).

Every piece the app yields is written at once — streaming depends on it —
framed by what the app's headers allow: as given with a ``Content-Length``,
as a chunk each under ``Transfer-Encoding: chunked`` to an HTTP/1.1 client
without one, or close-delimited to an HTTP/1.0 client. A HEAD, 1xx, 204 or
304 answer has no body. A body that ends short of its framing (the app
failed after the headers, or wrote less than its ``Content-Length``) ends
the connection, never with the terminating chunk: the client sees a cut,
never a clean end.
"""

from __future__ import annotations

import email.utils
import io
import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from .request_body import RequestBody
from .request_head import RequestHeaders

__all__ = ["WSGIExchange", "request_environ"]

_STATUS = re.compile(r"[1-9][0-9]{2} [^\r\n]*")
_NO_BODY = frozenset({204, 304})
_LAST_CHUNK = b"0\r\n\r\n"
# RFC 9110 §7.6.1's hop-by-hop fields (as `wsgiref.util.is_hop_by_hop`): the server's own.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_date_cache: tuple[int, str] = (0, "")


def http_date() -> str:
    """Now as an RFC 9110 §5.6.7 date; formatted once a second, not once a response."""
    global _date_cache
    now = int(time.time())
    second, text = _date_cache
    if second != now:
        text = email.utils.formatdate(now, usegmt=True)
        _date_cache = (now, text)
    return text


def request_environ(
    *,
    method: str,
    target: str,
    version: str,
    headers: RequestHeaders,
    body: RequestBody,
    content_length: int | None,
    server: tuple[str, int],
    client: tuple[str, int],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The WSGI environ of one request whose head has been read; ``wsgi.input`` is `body`."""
    path, _, query = target.partition("?")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote(path, "iso-8859-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1]),
        "SERVER_PROTOCOL": version,
        "REMOTE_ADDR": client[0],
        "REMOTE_PORT": str(client[1]),
        "CONTENT_TYPE": headers.get("Content-Type", ""),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BufferedReader(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        # The input ends at the body's end (either framing): apps may read to EOF.
        "wsgi.input_terminated": True,
    }
    if content_length is not None:
        environ["CONTENT_LENGTH"] = str(content_length)
    for name in headers.keys():
        if "_" in name:
            continue  # "X_Key" would pass for "X-Key" in the environ (as wsgiref drops it)
        key = "HTTP_" + name.upper().replace("-", "_")
        if key in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH") or key in environ:
            continue
        environ[key] = ",".join(headers.get_all(name) or [])
    environ.update(extra)
    return environ


class WSGIExchange:
    """Runs the app for one request and writes its answer to `send` (the connection's writer).

    `keep_alive` says on entry whether the client allows the connection to
    stay open, and on exit whether it may: the framing was complete and
    `body_settles()` said the request body will not be left half-read.
    `broken` is set when a write to the client failed (it hung up, or stopped
    reading past the send timeout).
    """

    def __init__(
        self,
        send: Callable[[bytes], Any],
        *,
        method: str,
        version: str,
        keep_alive: bool,
        body_settles: Callable[[], bool],
    ) -> None:
        self._send = send
        self._head_only = method == "HEAD"
        self._chunked_ok = version >= "HTTP/1.1"
        self._version = version
        self._body_settles = body_settles
        self.keep_alive = keep_alive
        self.status: str | None = None
        self._headers: list[tuple[str, str]] = []
        self.headers_sent = False
        self.broken = False
        self.code = 0
        self.sent_bytes = 0
        self._mode = "close"  # "length", "chunked", "close" or "none" (no body)
        self._left = 0
        self._length_given = False  # the app's headers hold a Content-Length

    # -- the WSGI side ---------------------------------------------------------

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        if exc_info is not None:
            try:
                if self.headers_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response was called twice without exc_info")
        if not isinstance(status, str) or not _STATUS.fullmatch(status):
            raise ValueError(f"status must be a str like '200 OK', got {status!r}")
        length_given = False
        # One plain loop, no generator per header: this runs for every answer.
        for pair in headers:
            if not (
                isinstance(pair, tuple)
                and len(pair) == 2
                and isinstance(pair[0], str)
                and isinstance(pair[1], str)
            ):
                raise TypeError(f"headers must be (str, str) pairs, got {pair!r}")
            name = pair[0].lower()
            if name in _HOP_BY_HOP:
                raise ValueError(f"the app may not set the hop-by-hop header {pair[0]!r}")
            if name == "content-length":
                length_given = True
        self.status, self._headers = status, list(headers)
        self._length_given = length_given
        return self.write

    def header(self, name: str) -> str | None:
        """The first value of the app's answer header `name` (any case), else None."""
        wanted = name.lower()
        for key, value in self._headers:
            if key.lower() == wanted:
                return value
        return None

    def run(self, app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> None:
        """Call `app` and write all it answers; raises what the app raised."""
        result = app(environ, self.start_response)
        try:
            self._know_length(result)
            for data in result:
                self.write(data)
                if self._head_only and self.headers_sent:
                    break  # nothing more to send; the app's close() below ends it
            self._finish()
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()

    def write(self, data: bytes) -> None:
        """The WSGI `write` callable, and where every yielded piece goes."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"the app must yield bytes, got {type(data).__name__}")
        if self.status is None:
            raise AssertionError("the app wrote before calling start_response")
        if not self.headers_sent:
            if not data:
                return  # PEP 3333: the headers wait for the first non-empty piece
            self._out(self._head() + self._frame(data))
        elif data:
            framed = self._frame(data)
            if framed:
                self._out(framed)

    # -- framing ---------------------------------------------------------------

    def _know_length(self, result: Iterable[bytes]) -> None:
        """A list answer without a Content-Length gets one (as wsgiref does): no chunking needed."""
        if self.status is None or not isinstance(result, (list, tuple)):
            return
        if self._length_given:
            return
        length = 0
        for piece in result:
            if not isinstance(piece, (bytes, bytearray)):
                return
            length += len(piece)
        self._headers.append(("Content-Length", str(length)))
        self._length_given = True

    def _finish(self) -> None:
        if self.status is None:
            raise AssertionError("the app returned without calling start_response")
        if not self.headers_sent:
            if self._mode_for() in ("chunked", "close"):
                self._headers.append(("Content-Length", "0"))  # nothing came: say so
                self._length_given = True
            self._out(self._head())
        if self._mode == "chunked":
            self._out(_LAST_CHUNK)
        elif self._mode == "length" and self._left:
            self.keep_alive = False  # the app wrote less than it promised: end it short

    def _mode_for(self) -> str:
        assert self.status is not None
        code = int(self.status[:3])
        if self._head_only or code < 200 or code in _NO_BODY:
            return "none"
        if self._length_given:
            return "length"
        return "chunked" if self._chunked_ok else "close"

    def _head(self) -> bytes:
        assert self.status is not None
        self._mode = self._mode_for()
        self.code = int(self.status[:3])
        lines = [f"HTTP/1.1 {self.status}", "Server: llmchat", f"Date: {http_date()}"]
        for name, value in self._headers:
            if name.lower() == "content-length":
                self._left = _length(value)
            lines.append(f"{name}: {value}")
        if self._mode == "chunked":
            lines.append("Transfer-Encoding: chunked")
        elif self._mode == "close":
            self.keep_alive = False
        if self.keep_alive and not self._body_settles():
            self.keep_alive = False
        if not self.keep_alive:
            lines.append("Connection: close")
        elif self._version < "HTTP/1.1":
            lines.append("Connection: keep-alive")
        self.headers_sent = True
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _frame(self, data: bytes) -> bytes:
        mode = self._mode
        if mode == "chunked":
            return b"%x\r\n%s\r\n" % (len(data), data)
        if mode == "length":
            if len(data) > self._left:
                data = data[: self._left]  # more than promised: the extra is never sent
                self.keep_alive = False
            self._left -= len(data)
            return bytes(data)
        if mode == "none":
            return b""
        return bytes(data)

    def _out(self, data: bytes) -> None:
        try:
            self._send(data)
        except OSError:
            self.broken = True
            self.keep_alive = False
            raise
        self.sent_bytes += len(data)


def _length(value: str) -> int:
    text = value.strip()
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"the app's Content-Length is not a number: {value!r}")
    return int(text)
