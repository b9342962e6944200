"""One client request inside the proxy app: its id, its usage event, and the one way to answer.

Every route handler gets one; `begin` is where the status and the headers
every answer carries (``x-request-id``, Anthropic's ``request-id``) are set.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from .error_shapes import NO_RETRY_STATUSES
from .usage import UsageEvent

__all__ = ["ClientExchange"]

StartResponse = Callable[..., Any]

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    499: "Client Closed Request",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


class ClientExchange:
    """One client request: its id, its usage event, and the one way to answer it."""

    def __init__(self, environ: dict[str, Any], start_response: StartResponse, face: str) -> None:
        self.environ = environ
        self.start_response = start_response
        self.face = face
        given = environ.get("HTTP_X_REQUEST_ID", "")
        self.request_id = given if _REQUEST_ID.fullmatch(given) else f"req_{uuid.uuid4().hex}"
        self.started = time.monotonic()
        self.body_bytes = b""
        self.event = UsageEvent(
            request_id=self.request_id, face=face, route=environ.get("PATH_INFO", "") or "/"
        )

    def headers(
        self, content_type: str, extra: Iterable[tuple[str, str]] = ()
    ) -> list[tuple[str, str]]:
        out = [("Content-Type", content_type), ("x-request-id", self.request_id)]
        if self.face == "anthropic":
            out.append(("request-id", self.request_id))  # where the Anthropic SDK looks
        out.extend(extra)
        return out

    def begin(self, status: int, content_type: str, extra: Iterable[tuple[str, str]] = ()) -> None:
        """Start the answer: `status`, the headers every answer carries, and `extra`.

        An error the same request cannot escape carries ``x-should-retry: false``
        (see `retry_advice`), whichever route answers it.
        """
        self.event.status = status
        headers = self.headers(content_type, extra)
        if status in NO_RETRY_STATUSES and not any(
            name.lower() == "x-should-retry" for name, _ in headers
        ):
            headers.append(("x-should-retry", "false"))
        self.start_response(f"{status} {_REASONS.get(status, 'Status')}", headers)
