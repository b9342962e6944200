"""An upstream failure as a proxy client sees it: its status and one fixed message per class.

The one table of the messages a client reads (`client_message`): no upstream
text, host, port or path is ever in one. The upstream's own words go to the
``llmchat.proxy`` log instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from ..response import Response
from .retry_advice import RETRY_AFTER_STATUSES, clean_retry_after

__all__ = [
    "CANCELLED",
    "Failure",
    "client_message",
    "failure_of",
    "http_failure",
    "is_truncation",
    "log_upstream_failure",
    "status_for",
]

log = logging.getLogger("llmchat.proxy")


@dataclass(frozen=True)
class Failure:
    """An upstream failure as the proxy reports it: HTTP status, message, error class.

    `message` is what the client reads: one of `client_message`'s fixed texts.
    """

    status: int
    message: str
    error_class: str
    upstream_status: int | None = None
    """The upstream's own HTTP status for an ``http`` failure (401 behind a 502, say)."""
    retry_after: str | None = None
    """The upstream's ``Retry-After`` on a rate limit or overload, checked; passed on."""

    def headers(self) -> list[tuple[str, str]]:
        """What the client's answer says about retrying, beyond its status.

        ``x-should-retry: false`` when the upstream refused the proxy's own
        credentials (a 502 no retry can mend); the upstream's ``retry-after``
        on a 429, 503 or 529.
        """
        out = []
        if self.upstream_status in (401, 403):
            out.append(("x-should-retry", "false"))
        if self.retry_after is not None and self.status in RETRY_AFTER_STATUSES:
            out.append(("retry-after", self.retry_after))
        return out


CANCELLED: Final = Failure(499, "Cancelled", "client_abort")
"""The failure of a call its own client cancelled (the client hung up)."""


def failure_of(response: Response) -> Failure:
    """What a failed `response` means for the proxy's client; logs the upstream's side.

    The client gets the fixed message of the failure's class (`client_message`),
    never the upstream's own text: that goes to the ``llmchat.proxy`` log at
    WARNING, and for an error status only when it was a JSON message.
    """
    error_class = response.error_class or "unknown"
    status = response.error_status
    error_body = response._error_body  # the upstream's own words, for the log only
    if error_class == "http" and error_body is not None:
        detail = error_body.describe()
    elif error_class == "http":
        detail = "no body"
    else:
        detail = response.err or "no message"  # llmchat's own words, already scrubbed
    log_upstream_failure(error_class, status, detail)
    return http_failure(error_class, status, response.retry_after)


def http_failure(error_class: str, status: int | None, retry_after: str | None = None) -> Failure:
    """The Failure of an upstream failure of `error_class` (with its HTTP `status`, if any)."""
    return Failure(
        status_for(error_class, status),
        client_message(error_class, status),
        error_class,
        upstream_status=status if error_class == "http" else None,
        retry_after=clean_retry_after(retry_after),
    )


def client_message(error_class: str | None, status: int | None) -> str:
    """The fixed message a proxy client gets for an upstream failure of `error_class`.

    The one table of them: no upstream text, host, port or path is ever in it.
    """
    if error_class == "http" and status is not None:
        return f"{_HTTP_MESSAGES.get(status) or _http_message(status)} (HTTP {status})"
    return _CLASS_MESSAGES.get(error_class or "unknown", _CLASS_MESSAGES["unknown"])


_CLASS_MESSAGES: Final = {
    "http": "The upstream server answered with an error",
    "timeout": "The upstream server did not answer in time",
    "connection": "Could not reach the upstream server",
    "response": "The upstream server's answer was unusable",
    "unknown": "The upstream request failed",
}
_HTTP_MESSAGES: Final = {
    401: "The upstream server refused the proxy's credentials",
    403: "The upstream server refused the proxy's credentials",
    429: "The upstream server is rate limiting requests",
    503: "The upstream server is overloaded",
    529: "The upstream server is overloaded",
}


def _http_message(status: int) -> str:
    if status >= 500:
        return "The upstream server failed"
    if status >= 400:
        return "The upstream server rejected the request"
    return "The upstream server answered with an unexpected status"


def log_upstream_failure(error_class: str, status: int | None, detail: str) -> None:
    """Log the upstream's side of a failure (`detail`, already scrubbed) at WARNING."""
    what = f"HTTP {status}" if error_class == "http" and status is not None else error_class
    log.warning("upstream failed (%s): %s", what, detail)


def status_for(error_class: str | None, status: int | None) -> int:
    """The status a proxy client sees for an upstream failure.

    Statuses that describe the client's own request (bad input, too large,
    rate-limited, overloaded) pass through; an upstream credential or server
    fault is the proxy's gateway problem (502); a silent upstream is 504.
    """
    if error_class == "http" and status in (400, 404, 413, 422, 429, 503, 529):
        return int(status)
    if error_class == "timeout":
        return 504
    return 502


def is_truncation(response: Response) -> bool:
    """True when `response` failed only because it stopped at the token limit.

    llmchat treats ``length`` as a failure; a proxy client asked for the limit
    (`num_predict`, Anthropic's required `max_tokens`) and gets an ordinary
    ``length`` / ``max_tokens`` ending instead.
    """
    return (
        not response.is_success
        and not response.is_cancelled
        and response.error_class == "response"
        and response.finish_reason == "length"
    )
