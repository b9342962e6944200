"""The OpenAI face's byte relay: one upstream exchange passed through as it arrives.

The client's body goes upstream as sent, with the backend's own credentials,
transport and timeouts; a 2xx answer comes back decoded and scrubbed of the
key, an error status becomes the proxy's own error (`Relay.error_status_failure`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..backends._request import WireRequest
from ..backends._runners import open_request
from ..backends.openai_common import OpenAICommon
from ..dialects.error_body import ErrorBody, json_error_message
from ..errors import InvalidArgumentError
from ..redact import Redactor
from ..transport import Exchange, Timeouts, classify_exception, decode_body, parse_json
from .failures import (
    CANCELLED,
    Failure,
    client_message,
    http_failure,
    log_upstream_failure,
    status_for,
)
from .request_scope import trace_headers

__all__ = ["Relay", "RelayBroken", "open_relay"]


def open_relay(
    backend: Any, redactor: Redactor, relay: Relay, method: str, path: str, data: bytes | None
) -> None:
    """Open `method path` on the first backend with its own credentials, into `relay`.

    For the OpenAI face: the client's body goes upstream as sent and the
    answer comes back byte for byte. Blocks until the upstream's headers
    arrive (or `relay.cancel()` is called from another thread); on failure
    `relay.failure` says why. Raises `InvalidArgumentError` when the
    upstream cannot relay (not an HTTP backend).
    """
    if not isinstance(backend, OpenAICommon):
        raise InvalidArgumentError("this upstream cannot relay raw OpenAI requests")
    relay.redactor = redactor
    headers = backend._get_api_headers()
    if data is None:
        headers = {k: v for k, v in headers.items() if k != "Content-Type"}
    if relay.request_id is not None:
        headers = {**headers, "x-request-id": relay.request_id}
    trace = trace_headers()  # the client's trace context, when it sent one
    if trace:
        headers = {**headers, **dict(trace)}
    exchange = relay.exchange
    relay.max_response_bytes = backend.max_response_bytes
    relay.max_event_bytes = backend.max_event_bytes
    relay.timeouts = backend.timeouts
    exchange.arm_deadline(backend.timeouts.request)
    # The backend's own exchange opener: its transport, timeouts and headers.
    request = WireRequest(method, backend._url(path), headers, {}, data or b"")
    try:
        http = open_request(backend._transport, backend.timeouts, request, exchange)
    except Exception as exc:
        exchange.finish()
        if exchange.aborted == "cancel":
            relay.failure = CANCELLED
            return
        error_class, message = classify_exception(
            exc, exchange=exchange, after_headers=False, timeouts=backend.timeouts
        )
        log_upstream_failure(error_class, None, relay.redactor.text(message))
        relay.failure = Failure(
            status_for(error_class, None), client_message(error_class, None), error_class
        )
        return
    relay.http = http
    if not 200 <= http.status_code < 300:
        relay.failure = relay.error_status_failure()


class Relay:
    """An upstream exchange whose 2xx body is passed through decoded, scrubbed of the key.

    The body is decoded from its Content-Encoding on the way (the client gets
    plain bytes and no Content-Encoding), bounded by the backend's
    `max_response_bytes` (here) and `max_event_bytes` (the `RelayMeter`), and
    the backend's credentials are taken out of it. An error status is not
    passed through: `error_status_failure` reads the body for the log and the
    client gets the proxy's own error instead.
    """

    def __init__(self, request_id: str | None = None) -> None:
        self.exchange = Exchange()
        self.request_id = request_id
        """The client exchange's ``x-request-id``, sent upstream so the node's logs show it."""
        self.http: Any = None
        self.failure: Failure | None = None
        self.max_response_bytes: int | None = None
        self.max_event_bytes: int | None = None
        self.redactor = Redactor.of(())
        """Takes the backend's credentials out of what is relayed (set by `Upstream.relay`)."""
        self.node: str | None = None
        """The routed node relayed to, its tier and the alias (`routing`); None: not routed."""
        self.tier: int | None = None
        self.alias: str | None = None
        self.wait_ms: float | None = None
        """How long routing waited for a slot (`routing.attempts`); None: not routed."""
        self.timeouts: Timeouts | None = None
        """The backend's timeouts (`open_relay`): its `headers` timeout also bounds every
        silence in the body (the transport's read timeout), and names it in the error."""
        self._cancel_hooks: list[Callable[[], None]] = []
        self._close_hooks: list[Callable[[], None]] = []
        self._broken_hooks: list[Callable[[str], None]] = []

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Run `hook` (quick, never raising) when `cancel` is called."""
        self._cancel_hooks.append(hook)

    def on_close(self, hook: Callable[[], None]) -> None:
        """Run `hook` (quick, never raising) once, at the first `close`."""
        self._close_hooks.append(hook)

    def on_broken(self, hook: Callable[[str], None]) -> None:
        """Run `hook(error_class)` (quick, never raising) if the upstream body breaks off.

        Not for a cancel: a client's hang-up is nobody's fault upstream. The
        router judges it (`RoutedUpstream.on_broken`): a stream that went
        silent, pinged past its read timeout or was cut ejects the node.
        """
        self._broken_hooks.append(hook)

    def error_status_failure(self) -> Failure:
        """Read and close an error-status answer; the Failure its client gets (logged)."""
        status = int(self.http.status_code)
        content_type = self.http.headers.get("Content-Type")
        try:
            data = b"".join(self.chunks())
        except RelayBroken:
            data = b""
        if self.exchange.aborted == "cancel":
            return CANCELLED
        message = json_error_message(parse_json(decode_body(data)))
        if message is not None:
            message = self.redactor.text(message)
        log_upstream_failure("http", status, ErrorBody(len(data), content_type, message).describe())
        return http_failure("http", status, self.http.headers.get("Retry-After"))

    def chunks(self) -> Iterator[bytes]:
        """The upstream body as it arrives; stops quietly when the exchange is aborted."""
        try:
            yield from self.http.iter_bytes(self.max_response_bytes)
        except Exception as exc:
            if self.exchange.aborted != "cancel":
                error_class, message = classify_exception(
                    exc, exchange=self.exchange, after_headers=True, timeouts=self.timeouts
                )
                self.broke(error_class)
                raise RelayBroken(message, error_class) from exc
        finally:
            self.close()

    def broke(self, error_class: str) -> None:
        """The body broke off as `error_class` (the transport's, or what its reader found):
        runs the `on_broken` hooks, once, whoever calls it first."""
        hooks, self._broken_hooks = self._broken_hooks, []
        for hook in hooks:
            hook(error_class)

    def cancel(self) -> None:
        self.exchange.abort("cancel")
        for hook in list(self._cancel_hooks):
            hook()

    def close(self) -> None:
        self.exchange.finish()
        if self.http is not None:
            self.http.close()
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            hook()


class RelayBroken(Exception):
    """The upstream body broke off mid-relay, or passed a size limit (`error_class` says)."""

    def __init__(self, message: str, error_class: str = "connection") -> None:
        super().__init__(message)
        self.error_class = error_class
