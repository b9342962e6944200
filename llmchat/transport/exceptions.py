"""The one place foreign exceptions are translated into `(error_class, message)`.

requests, urllib3, socket and llmchat's own read limits each raise their own
exceptions; `classify_exception` walks what an exception wraps and the first
row of `_ROWS` that matches anything wins, so the most specific rows come
first (STYLE rule 8). No other module catches `requests.exceptions.*`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, Final

from requests import exceptions as rq
from urllib3 import exceptions as u3

from ..errors import ErrorClass
from ..sse import EventTooLarge, KeepAliveOnly
from .base import BodyTooLarge
from .exchange import Exchange
from .timeouts import Timeouts

__all__ = ["ScriptedFailure", "classify_exception"]


class ScriptedFailure(Exception):
    """A failure a test double names itself: `classify_exception` reports its class and message.

    `MockBackend` raises it for a reply scripted as ``timeout`` or
    ``connection`` with its own ``err``, so that text is what the Response says.
    """

    def __init__(self, error_class: ErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class: ErrorClass = error_class
        self.message = message


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
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
_ROWS: Final[tuple[tuple[Any, bool | None, ErrorClass, str], ...]] = (
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
    (KeepAliveOnly, None, "timeout", "{detail}"),
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
) -> tuple[ErrorClass, str]:
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
    chain = list(exception_chain(exc))
    for item in chain:
        if isinstance(item, ScriptedFailure):
            return item.error_class, item.message
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
