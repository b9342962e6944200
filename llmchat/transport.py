"""HTTP transport: timeouts and header redaction.

Step 1 holds the pieces the request side needs; the cancellable session and
the byte iterator join them here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from .errors import InvalidArgumentError, InvalidTypeError

__all__ = ["SENSITIVE_HEADERS", "Timeouts", "redact_headers"]

SENSITIVE_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}
)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Every deadline of one backend, named for what the caller waits on (seconds).

    `connect`: to open the TCP/TLS connection. `headers`: from sending the
    request to the response headers (a server's prefill happens here).
    `request`: the whole exchange, enforced by llmchat by dropping the
    connection, since requests' read timeout is only a gap between reads.
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
            _check_seconds(f"{spec.name}_timeout", getattr(self, spec.name))


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
