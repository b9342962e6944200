"""Timeouts: every deadline of one backend, named for what the caller waits on."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Final

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Timeouts"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Every deadline of one backend, named for what the caller waits on (seconds).

    `connect`: to open the TCP/TLS connection. `headers`: from sending the
    request to the response headers (a server's prefill happens here); it is
    also the longest silence allowed between two reads of a body, and the
    longest a stream may send only keep-alive comments (`sse.KeepAliveWatch`).
    `request`:
    the whole exchange, enforced by llmchat by dropping the connection.
    `finish_grace`: after a stream's finish chunk, how long to wait for
    ``[DONE]`` or the close. `probe`: the whole of one server-limits probe.
    `reuse_grace`: after a stream's explicit end (``[DONE]``, ``message_stop``
    …), how long the reader thread goes on reading for the body's own end, so
    that the connection goes back to the pool; None or 0: never, the
    connection is closed. `None` means no limit for the other phases.
    """

    connect: float | None = 30.0
    headers: float | None = 60.0
    request: float | None = 1800.0
    finish_grace: float | None = 10.0
    probe: float | None = 3.0
    reuse_grace: float | None = 1.0

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.name == "reuse_grace" and value == 0 and not isinstance(value, bool):
                continue  # 0, like None, means "never wait": there is no phase to bound
            _check_seconds(f"{_ARGUMENT_NAMES[spec.name]}", value)


_ARGUMENT_NAMES: Final = {
    "connect": "connect_timeout",
    "headers": "headers_timeout",
    "request": "request_timeout",
    "finish_grace": "stream_finish_grace",
    "probe": "server_probe_timeout",
    "reuse_grace": "reuse_grace",
}


def _check_seconds(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number of seconds or None, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive number of seconds, got {value!r}")
