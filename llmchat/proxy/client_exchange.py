"""One client request inside the proxy app: its id, its usage event, and the one way to answer.

Every route handler gets one; `begin` is where the status and the headers
every answer carries (``x-request-id``, ``x-llmchat-node``, Anthropic's
``request-id``) are set.
The per-request helpers are its methods: `read_json` (the body, within the
app's limit), `json` and `error` (an answer, an error in the face's shape),
`aborted` (a client that is gone) and `record` (the usage event, once). What
they need from the app (its redactor, its usage sink, its body limit) comes in
an `ExchangeContext`.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from ..redact import Redactor
from .client_body import json_object, read_body
from .error_shapes import NO_RETRY_STATUSES, error_body
from .failures import Failure
from .outbound import Cleaner, client_json
from .retry_advice import log_refusal
from .usage import CLIENT_ABORT_STATUS, UsageEvent

__all__ = ["DEFAULT_MAX_BODY_BYTES", "PROXY_NODE", "ClientExchange", "ExchangeContext"]

DEFAULT_MAX_BODY_BYTES: Final = 10_000_000
"""`make_app`'s default `max_body_bytes`."""

PROXY_NODE: Final = "proxy"
"""``x-llmchat-node`` of an answer no routed node gave (the proxy's own, one upstream's)."""


def _no_secrets() -> Redactor:
    return Redactor.of([])


def _nowhere(event: UsageEvent) -> None:
    """A usage sink that keeps nothing (an exchange built outside an app)."""


@dataclass(frozen=True)
class ExchangeContext:
    """What an exchange's answers take from the app that made it; one per app."""

    redactor: Callable[[], Redactor] = field(default=_no_secrets)
    """Takes the upstream's credentials out of what the client or the log gets."""
    emit: Callable[[UsageEvent], None] = field(default=_nowhere)
    """Where the finished usage event goes (`UsageLog.emit`)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


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

    def __init__(
        self,
        environ: dict[str, Any],
        start_response: StartResponse,
        face: str,
        context: ExchangeContext | None = None,
    ) -> None:
        self.environ = environ
        self.context = context if context is not None else ExchangeContext()
        self.start_response = start_response
        self.face = face
        given = environ.get("HTTP_X_REQUEST_ID", "")
        self.request_id = given if _REQUEST_ID.fullmatch(given) else f"req_{uuid.uuid4().hex}"
        self.started = time.monotonic()
        self.body_bytes = b""
        self.node = PROXY_NODE
        """What ``x-llmchat-node`` says answered: a routed node's name, else `PROXY_NODE`."""
        self.event = UsageEvent(
            request_id=self.request_id, face=face, route=environ.get("PATH_INFO", "") or "/"
        )

    def headers(
        self, content_type: str, extra: Iterable[tuple[str, str]] = ()
    ) -> list[tuple[str, str]]:
        out = [
            ("Content-Type", content_type),
            ("x-request-id", self.request_id),
            ("x-llmchat-node", self.node),
        ]
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

    def routed(
        self,
        node: str | None,
        tier: int | None,
        alias: str | None,
        wait_ms: float | None = None,
    ) -> None:
        """Where a routing upstream sent the request: the ``x-llmchat-node`` header (a
        `node`; None leaves `PROXY_NODE`) and the usage event's node, tier and alias,
        and how long it waited for a slot (`wait_ms`)."""
        if node is not None:
            self.node = node
        event = self.event
        event.node, event.tier, event.alias, event.wait_ms = node, tier, alias, wait_ms

    def first_byte(self) -> None:
        """The answer's body starts now: the event's time to first byte, set once."""
        event = self.event
        if event.ttfb_ms is None:
            event.ttfb_ms = round((time.monotonic() - self.started) * 1000, 3)

    # -- the per-request helpers -------------------------------------------

    def redactor(self) -> Redactor:
        """The app's redactor: the upstream's credentials out of text bound for the client."""
        return self.context.redactor()

    def read_json(self) -> dict[str, Any]:
        """The request's body as a JSON object; records its bytes and its model here.

        Raises `ClientError` (the status and words to answer with) for a body
        that is too large, late, not JSON or not an object.
        """
        self.body_bytes = read_body(self.environ, self.context.max_body_bytes)
        body = json_object(self.body_bytes)
        model = body.get("model")
        if isinstance(model, str):
            self.event.model = model
        return body

    def json(self, status: int, obj: Any, extra: Iterable[tuple[str, str]] = ()) -> list[bytes]:
        """Answer `obj` as JSON with `status` (credentials scrubbed out), and record the event."""
        data = client_json(obj, self.redactor())  # the length is the cleaned body's
        return self.whole(status, "application/json", data, extra)

    def text(self, status: int, data: bytes, content_type: str = "text/plain") -> list[bytes]:
        """Answer `data` as is (none for a HEAD request), and record the event."""
        return self.whole(status, content_type, data)

    def whole(
        self,
        status: int,
        content_type: str,
        data: bytes,
        extra: Iterable[tuple[str, str]] = (),
    ) -> list[bytes]:
        """Answer the whole body `data` (none for a HEAD request), and record the event.

        The body is handed to the server as this returns: its first byte's time
        is now (`first_byte`), before the event is recorded.
        """
        self.begin(status, content_type, [("Content-Length", str(len(data))), *extra])
        if not data or self.environ.get("REQUEST_METHOD") == "HEAD":
            self.record()
            return []
        self.first_byte()
        self.record()
        return [data]

    def error(
        self,
        status: int,
        message: str,
        error_type: str,
        *,
        body: Any = None,
        failure: Failure | None = None,
    ) -> list[bytes]:
        """Answer an error in the face's shape (or `body`, when the face built its own).

        A 4xx the proxy answers itself leaves one WARNING line naming the face,
        the status, the field and the reason (never the field's content); an
        upstream `failure` was logged where it was read, and its retry advice
        goes on the answer.
        """
        event = self.event
        event.ok = False
        event.error_type = event.error_type or error_type
        if failure is None and 400 <= status < 500:
            log_refusal(self.face, status, message)
        if body is None:
            body = error_body(self.face, status, message)
        extra = failure.headers() if failure is not None else ()
        return self.json(status, body, extra)

    def failed(self, failure: Failure, hung_up: bool = False) -> list[bytes]:
        """Answer an upstream `failure`; a client that is gone (`hung_up`) is `aborted`."""
        if hung_up or failure.error_class == "client_abort":
            return self.aborted()
        self.event.error_type = failure.error_class
        return self.error(failure.status, failure.message, failure.error_class, failure=failure)

    def aborted(self) -> list[bytes]:
        """Answer a client that is gone: WSGI still wants a status, nobody will read it."""
        self.begin(CLIENT_ABORT_STATUS, "text/plain", [("Content-Length", "0")])
        self.event.ok, self.event.error_type = False, "client_abort"
        self.record()
        return []

    def record(self) -> None:
        """Finish the usage event (its duration, its model scrubbed) and hand it to the sink."""
        event = self.event
        if event.model:  # the upstream's name for its model: it reaches the logs
            event.model = Cleaner(self.redactor()).text(event.model)
        event.duration_ms = round((time.monotonic() - self.started) * 1000, 3)
        self.context.emit(event)
