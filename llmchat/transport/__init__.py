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

Every public name is importable from `llmchat.transport`; the mock's names are
imported when first asked for (`_lazy`), so a real backend does not load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..redact import SENSITIVE_HEADERS, redact_headers
from .adapter import DEFAULT_POOL_SIZE, CancellableAdapter, new_session
from .base import READ_SIZE, BodyTooLarge, Transport, TransportResponse, bounded
from .body import decode_body, parse_json
from .exceptions import classify_exception
from .exchange import Exchange
from .requests_transport import RequestsTransport
from .timeouts import Timeouts

if TYPE_CHECKING:
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

_MOCK_NAMES = tuple(name for name in __all__ if name not in globals())
"""`mock.py`'s names, the public ones not imported above: a test or a `MockBackend`
asks for them, a real backend never does."""

if not TYPE_CHECKING:  # a type checker sees the imports above instead
    from .._lazy import exports

    __getattr__, __dir__ = exports(__name__, dict.fromkeys(_MOCK_NAMES, ".mock"))
    del exports
