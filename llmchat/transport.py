"""HTTP transport: sessions, deadlines, abortable exchanges, and exception mapping.

Everything llmchat does on the network goes through here, and this is the one
module that catches `requests`, `urllib3` and `socket` exceptions: they are
translated into an `(error_class, message)` pair by `classify_exception`, a
table where the most specific row wins (STYLE rule 8).

An `Exchange` is one request/response that any thread may abort at any phase.
Its sockets are registered the moment they exist — `CancellableAdapter`'s
connection pools record each socket at connect time, and a pooled socket when
it is taken for a request — so an abort shuts the socket down even while the
server is still in prefill and has sent no header. requests' read timeout is
only a gap between reads, so the whole-exchange deadline (`request_timeout`)
is ours: a watchdog thread aborts the exchange when it passes.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

import requests
from requests import exceptions as rq
from requests.adapters import HTTPAdapter
from urllib3 import exceptions as u3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .errors import InvalidArgumentError, InvalidTypeError
from .sse import EventTooLarge

__all__ = [
    "SENSITIVE_HEADERS",
    "BodyTooLarge",
    "CancellableAdapter",
    "Exchange",
    "Timeouts",
    "Transport",
    "classify_exception",
    "decode_body",
    "parse_json",
    "redact_headers",
]

log = logging.getLogger("llmchat")

SENSITIVE_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie"}
)
READ_SIZE: Final = 65536


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Every deadline of one backend, named for what the caller waits on (seconds).

    `connect`: to open the TCP/TLS connection. `headers`: from sending the
    request to the response headers (a server's prefill happens here); it is
    also the longest silence allowed between two reads of a body. `request`:
    the whole exchange, enforced by llmchat by dropping the connection.
    `finish_grace`: after a stream's finish chunk, how long to wait for
    ``[DONE]`` or the close. `probe`: the whole of one server-limits probe.
    `None` means no limit for that phase.
    """

    connect: float | None = 30.0
    headers: float | None = 60.0
    request: float | None = 1800.0
    finish_grace: float | None = 10.0
    probe: float | None = 3.0

    def __post_init__(self) -> None:
        for spec in fields(self):
            _check_seconds(f"{_ARGUMENT_NAMES[spec.name]}", getattr(self, spec.name))


_ARGUMENT_NAMES: Final = {
    "connect": "connect_timeout",
    "headers": "headers_timeout",
    "request": "request_timeout",
    "finish_grace": "stream_finish_grace",
    "probe": "server_probe_timeout",
}


def _check_seconds(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number of seconds or None, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive number of seconds, got {value!r}")


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of `headers` fit for a log line, repr or debug dump.

    Credentials are replaced by ``[redacted]``; every repr and dump of headers
    in llmchat goes through here.
    """
    return {
        name: "[redacted]" if name.lower() in SENSITIVE_HEADERS else value
        for name, value in headers.items()
    }


# -- abortable exchanges ------------------------------------------------------


class Exchange:
    """One HTTP exchange that any thread may abort, before or after headers.

    `abort(reason)` is thread-safe, idempotent and never raises: it records the
    first reason (``"cancel"``, ``"deadline"``, ``"grace"`` …) and shuts down
    every socket the exchange has used, which wakes a reader blocked in
    ``recv``. A socket that attaches after the abort is shut down at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._response: requests.Response | None = None
        self.aborted: str | None = None
        """The first abort reason, or None while the exchange is not aborted."""
        self.deadline_seconds: float | None = None
        """The whole-exchange limit the watchdog enforces, for the error message."""
        self._timers: list[int] = []

    def attach_socket(self, sock: socket.socket) -> None:
        with self._lock:
            if self.aborted is None:
                self._sockets.append(sock)
                return
        _shutdown(sock)

    def attach_response(self, response: requests.Response) -> None:
        with self._lock:
            if self.aborted is None:
                self._response = response
                return
        _close_quietly(response)

    def abort(self, reason: str) -> None:
        with self._lock:
            if self.aborted is not None:
                return
            self.aborted = reason
            sockets, self._sockets = self._sockets, []
            response = self._response
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


def _shutdown(sock: socket.socket) -> None:
    # shutdown() rather than close(): it wakes a recv() blocked in another
    # thread at once, and leaves closing the fd to its owner.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _close_quietly(response: requests.Response) -> None:
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
_current = threading.local()


def _attach_to_current(sock: socket.socket | None) -> None:
    exchange = getattr(_current, "exchange", None)
    if exchange is not None and sock is not None:
        exchange.attach_socket(sock)


class _TrackedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _attach_to_current(sock)  # before TLS: an abort can cut the handshake too
        return sock


class _TrackedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _attach_to_current(sock)
        return sock


class _TrackedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _attach_to_current(getattr(conn, "sock", None))  # a pooled, already open socket
        return conn


class _TrackedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _attach_to_current(getattr(conn, "sock", None))
        return conn


_TRACKED_POOLS: Final = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


class CancellableAdapter(HTTPAdapter):
    """A requests adapter whose sockets llmchat can shut down from another thread.

    llmchat mounts it on the sessions it creates. Mount it on your own session
    (``session.mount("http://", CancellableAdapter())``, likewise https) to get
    prefill cancels there too; without it a cancel lands once headers arrive.
    SOCKS proxies are not tracked.
    """

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_TRACKED_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = dict(_TRACKED_POOLS)
        return manager


DEFAULT_POOL_SIZE: Final = 64


def new_session(pool_size: int = DEFAULT_POOL_SIZE) -> requests.Session:
    """A `requests.Session` with `CancellableAdapter` on http and https.

    `pool_size` is how many idle connections each host keeps: a backend shared
    by more threads than that opens extra connections and drops them after use
    (urllib3 logs "Connection pool is full" for each).
    """
    session = requests.Session()
    session.trust_env = True
    for prefix in ("http://", "https://"):
        session.mount(prefix, CancellableAdapter(pool_maxsize=pool_size))
    return session


class Transport:
    """Sends requests for one backend over one pooled session.

    `open()` returns once response headers arrive (the body unread); the
    caller then reads with `read_body()` or `iter_bytes()`. Either may raise
    any foreign exception: pass it to `classify_exception`.
    """

    def __init__(
        self,
        timeouts: Timeouts,
        session: requests.Session | None = None,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.timeouts = timeouts
        self.session = session if session is not None else new_session(pool_size)

    def open(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        data: bytes | None,
        exchange: Exchange,
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> requests.Response:
        timeouts = self.timeouts
        timeout = (
            timeouts.connect if connect_timeout is None else connect_timeout,
            timeouts.headers if read_timeout is None else read_timeout,
        )
        if exchange.aborted is not None:  # cancelled before the request even started
            raise _Aborted(exchange.aborted)
        _current.exchange = exchange
        try:
            response = self.session.request(
                method, url, headers=dict(headers), data=data, stream=True, timeout=timeout
            )
        finally:
            _current.exchange = None
        exchange.attach_response(response)
        if exchange.aborted is not None:
            raise _Aborted(exchange.aborted)
        return response

    def close(self) -> None:
        self.session.close()


class _Aborted(Exception):
    """The exchange was aborted while `requests` returned normally."""


class BodyTooLarge(Exception):
    """A body's decoded bytes passed `max_response_bytes`; the reader stops at once."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Response body larger than max_response_bytes ({limit} bytes)")
        self.limit = limit


def iter_bytes(response: requests.Response, limit: int | None = None) -> Iterator[bytes]:
    """Yield decoded body bytes as they arrive (``read1``: no waiting to fill a buffer).

    The body is decoded from its Content-Encoding (gzip, deflate; br and zstd
    when urllib3 can import their libraries) by urllib3's own incremental
    decoders. Each read returns at most `READ_SIZE` decoded bytes (urllib3 >=
    2.6 bounds the decompressed output per call), so a decompression bomb
    meets `limit` after a few reads instead of filling memory. The bytes up to
    `limit` are yielded (a stream keeps the frames they complete); the read
    that passes it raises `BodyTooLarge`.
    """
    read = response.raw.read1
    total = 0
    while True:
        data = read(READ_SIZE, decode_content=True)
        if not data:
            return
        if limit is not None:
            total += len(data)
            if total > limit:
                keep = len(data) - (total - limit)
                if keep > 0:
                    yield data[:keep]
                raise BodyTooLarge(limit)
        yield data


def read_body(response: requests.Response, limit: int | None = None) -> bytes:
    """Read the whole decoded body; an abort, the deadline or `limit` interrupts it."""
    return b"".join(iter_bytes(response, limit))


# -- bytes to text ------------------------------------------------------------


def decode_body(data: bytes) -> str:
    """Decode a response body ourselves: UTF-8 (BOM dropped), else latin-1."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_json(text: str) -> Any:
    """Parse JSON whatever the Content-Type said; None when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


# -- the one place foreign exceptions are translated --------------------------


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps: requests hides urllib3 and OS errors inside."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(arg for arg in current.args if isinstance(arg, BaseException))
        for attr in ("reason", "__cause__", "__context__"):
            inner = getattr(current, attr, None)
            if isinstance(inner, BaseException):
                pending.append(inner)


# Rows are checked top to bottom against every exception in the chain; the
# first row that matches anything wins, so the most specific rows come first.
# `after_headers` None matches both phases.
_ROWS: Final[tuple[tuple[Any, bool | None, str, str], ...]] = (
    (rq.ConnectTimeout, None, "connection", "Could not connect within {connect}"),
    (rq.SSLError, None, "connection", "TLS failure: {detail}"),
    (rq.ProxyError, None, "connection", "Proxy failure: {detail}"),
    (socket.gaierror, None, "connection", "Could not resolve the host: {detail}"),
    (u3.NameResolutionError, None, "connection", "Could not resolve the host"),
    (ConnectionRefusedError, None, "connection", "Connection refused"),
    (u3.NewConnectionError, None, "connection", "Could not connect: {detail}"),
    # urllib3's NewConnectionError is a ConnectTimeoutError subclass: it must come first.
    (u3.ConnectTimeoutError, None, "connection", "Could not connect within {connect}"),
    (rq.ReadTimeout, False, "timeout", "No response headers within {headers}"),
    (rq.ReadTimeout, True, "timeout", "Body silent for more than {headers}"),
    (u3.ReadTimeoutError, False, "timeout", "No response headers within {headers}"),
    (u3.ReadTimeoutError, True, "timeout", "Body silent for more than {headers}"),
    (socket.timeout, None, "timeout", "Server silent for more than {headers}"),
    # llmchat's own size limits: their message names the limit.
    (BodyTooLarge, None, "response", "{detail}"),
    (EventTooLarge, None, "response", "{detail}"),
    (rq.ContentDecodingError, None, "response", "Undecodable body: {detail}"),
    (u3.DecodeError, None, "response", "Undecodable body: {detail}"),
    (u3.IncompleteRead, True, "response", "Body cut off: {detail}"),
    (rq.ChunkedEncodingError, True, "response", "Body cut off: {detail}"),
    (u3.ProtocolError, True, "response", "Body cut off: {detail}"),
    (ConnectionResetError, True, "response", "Body cut off: connection reset"),
    (ConnectionResetError, False, "connection", "Connection reset before a response"),
    (
        u3.ProtocolError,
        False,
        "connection",
        "Connection closed before a response: {detail}",
    ),
    (rq.ConnectionError, False, "connection", "Connection failed: {detail}"),
    (rq.ConnectionError, True, "response", "Body cut off: {detail}"),
    # requests' own exceptions are OSErrors too: these two must precede the OSError rows.
    (rq.InvalidURL, None, "unknown", "Invalid URL: {detail}"),
    (rq.TooManyRedirects, None, "unknown", "Too many redirects"),
    (OSError, False, "connection", "Connection failed: {detail}"),
    (OSError, True, "response", "Body cut off: {detail}"),
)


def classify_exception(
    exc: BaseException,
    *,
    exchange: Exchange | None = None,
    after_headers: bool = False,
    timeouts: Timeouts | None = None,
) -> tuple[str, str]:
    """Map a foreign exception to `(error_class, message)`; the one such place.

    An exchange aborted by its deadline is a ``timeout`` whatever the
    exception looked like (a shut-down socket reads as a reset). Otherwise the
    first row of the table that matches any exception in the chain wins.
    Messages name what failed and never include request headers.
    """
    timeouts = timeouts or Timeouts()
    if exchange is not None and exchange.aborted == "deadline":
        limit = exchange.deadline_seconds
        return "timeout", f"No complete response within request_timeout ({_secs(limit)})"
    chain = list(_chain(exc))
    for row_type, phase, error_class, template in _ROWS:
        if phase is not None and phase != after_headers:
            continue
        for item in chain:
            if isinstance(item, row_type):
                return error_class, template.format(
                    connect=_secs(timeouts.connect),
                    headers=_secs(timeouts.headers),
                    detail=_detail(item),
                )
    return "unknown", f"{type(exc).__name__}: {_detail(exc)}"


def _secs(value: float | None) -> str:
    return "(no limit)" if value is None else f"{value:g}s"


def _detail(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
