"""The request a thread is serving: its id for the log lines, its client's trace context.

The app enters a `RequestScope` when it takes a request and leaves it when
the answer is done: at once for a whole answer, in the body's ``close()`` for
a streamed one (`ScopedBody`), because a WSGI server iterates a streamed body
after the app call has returned, in the same thread, and what is logged then
(an upstream failing mid-stream) belongs to the request too.
`RequestIdFilter` puts the id on every log record (``record.request_id``,
``-`` outside a request); the command line's log format shows it. Imports the
standard library only, so any layer may read it.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = [
    "NO_REQUEST",
    "RequestIdFilter",
    "RequestScope",
    "ScopedBody",
    "current",
    "current_request_id",
    "enter",
    "leave",
    "trace_headers",
]

NO_REQUEST: Final = "-"
"""``record.request_id`` of a line logged outside any request (start-up, probes, reloads)."""


@dataclass(frozen=True)
class RequestScope:
    """One request as the code it runs sees it, whatever the call depth."""

    request_id: str
    """The ``x-request-id`` the answer carries (the client's when well-formed, else made)."""
    traceparent: str | None = None
    """The client's W3C ``traceparent`` header, as sent (checked by whoever reads it)."""
    tracestate: str | None = None
    """The client's W3C ``tracestate`` header, as sent."""


_SCOPE: contextvars.ContextVar[RequestScope | None] = contextvars.ContextVar(
    "llmchat_request_scope", default=None
)

Token: TypeAlias = "contextvars.Token[RequestScope | None]"


def current() -> RequestScope | None:
    """The request this thread is serving, else None."""
    return _SCOPE.get()


def current_request_id() -> str:
    """The id of the request this thread is serving, else `NO_REQUEST`."""
    scope = _SCOPE.get()
    return NO_REQUEST if scope is None else scope.request_id


def enter(scope: RequestScope) -> Token:
    """Make `scope` this thread's request until `leave` gets the token back."""
    return _SCOPE.set(scope)


def leave(token: Token) -> None:
    """End the scope `enter` began (the one before it is this thread's again)."""
    try:
        _SCOPE.reset(token)
    except ValueError:
        # Closed from another context than the one that entered (a server that
        # closes bodies elsewhere): that context never had the scope to undo.
        pass


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
_TRACESTATE = re.compile(r"[\x20-\x7e]{1,512}")


def trace_headers() -> tuple[tuple[str, str], ...]:
    """The client's W3C trace context, to send upstream: ``traceparent`` when well-formed
    (and its ``tracestate``, when printable and at most 512 bytes), else nothing.

    Passed on as the client sent it, so a node's spans join the client's trace
    (beside the proxy's own span, which is made after the fact).
    """
    scope = _SCOPE.get()
    if scope is None or not scope.traceparent or not _TRACEPARENT.fullmatch(scope.traceparent):
        return ()
    state = scope.tracestate
    if state and _TRACESTATE.fullmatch(state):
        return (("traceparent", scope.traceparent), ("tracestate", state))
    return (("traceparent", scope.traceparent),)


class RequestIdFilter(logging.Filter):
    """Sets ``record.request_id`` on every record: the serving request's id, else ``-``.

    On a handler (the command line's), so every logger's records get it, and
    a record that already has one (``extra={"request_id": ...}``) keeps it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id()
        return True


class ScopedBody:
    """A streamed WSGI body whose ``close()`` also leaves its request's scope.

    Iterating it is iterating the body itself (`__iter__` hands the server the
    body's own iterator), so a streamed delta costs nothing more; the scope
    stays entered from the app call to this ``close()``, which a WSGI server
    calls however the answer ended.
    """

    def __init__(self, body: Iterable[bytes], token: Token) -> None:
        self._body = body
        self._token: Token | None = token

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)

    def close(self) -> None:
        token, self._token = self._token, None
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()  # records the usage event: its listeners still see the scope
        finally:
            if token is not None:
                leave(token)
