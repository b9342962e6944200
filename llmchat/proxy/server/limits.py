"""The limits `make_server` puts on each connection: one named, validated value."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ServerLimits"]


@dataclass(frozen=True)
class ServerLimits:
    """How long a client may take, and how many may be connected at once.

    Every timeout is in seconds; `None` means no limit. The read deadlines are
    totals for their phase, not gaps between reads, and none of them applies
    once the request has been read: a streamed answer may last as long as the
    client keeps reading it.
    """

    backlog: int = 128
    """The listen queue length passed to ``listen()``."""
    max_connections: int = 256
    """Connections open at once, idle kept-alive ones included; then the longest-idle
    one is closed to make room, or else new ones get a 503 in their face's shape."""
    idle_timeout: float | None = 15.0
    """From accept, or from the end of the previous answer on a kept-alive
    connection, to the request's first byte."""
    header_timeout: float | None = 10.0
    """From the first byte to the end of the request line and headers."""
    body_timeout: float | None = 60.0
    """From the end of the headers to the end of the body (the app's reads of ``wsgi.input``)."""
    send_timeout: float | None = 60.0
    """How long one write may wait for a client that reads nothing, not the whole answer."""

    def __post_init__(self) -> None:
        for name in ("backlog", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        for name in ("idle_timeout", "header_timeout", "body_timeout", "send_timeout"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number of seconds or None, got {value!r}")
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be > 0 and finite, got {value!r}")
