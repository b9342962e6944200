"""HTTP transport: the seam, the requests transport, abortable exchanges, the exception table.

Everything llmchat does on the network goes through a `Transport`
(`base.py`): `open()` one request on an `Exchange`, get a `TransportResponse`
back once headers arrived, iterate its decoded body, close it. The real one
is `RequestsTransport` (`requests_transport.py`) over `CancellableAdapter`
sessions (`adapter.py`), whose sockets are registered on their exchange the
moment they exist, so a cancel or the whole-request deadline (`exchange.py`'s
watchdog) can shut them down in any phase, prefill included.
`MockTransport` (`mock.py`) answers from a function instead of a socket.
`classify_exception` (`exceptions.py`) is the one place that translates
`requests`, `urllib3` and `socket` exceptions into `(error_class, message)`.

Every public name is importable from `llmchat.transport`.
"""

from __future__ import annotations

from ..redact import SENSITIVE_HEADERS, redact_headers
from .adapter import DEFAULT_POOL_SIZE, CancellableAdapter, new_session
from .base import READ_SIZE, BodyTooLarge, Transport, TransportResponse, bounded
from .body import decode_body, parse_json
from .exceptions import classify_exception
from .exchange import Exchange
from .mock import (
    Cut,
    MockAborted,
    MockRequest,
    MockResponse,
    MockTransport,
    Pause,
    Raise,
    Stall,
    TimedOut,
)
from .requests_transport import RequestsTransport
from .timeouts import Timeouts

__all__ = [
    "DEFAULT_POOL_SIZE",
    "READ_SIZE",
    "SENSITIVE_HEADERS",
    "BodyTooLarge",
    "CancellableAdapter",
    "Cut",
    "Exchange",
    "MockAborted",
    "MockRequest",
    "MockResponse",
    "MockTransport",
    "Pause",
    "Raise",
    "RequestsTransport",
    "Stall",
    "TimedOut",
    "Timeouts",
    "Transport",
    "TransportResponse",
    "bounded",
    "classify_exception",
    "decode_body",
    "new_session",
    "parse_json",
    "redact_headers",
]
