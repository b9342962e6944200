"""The OpenAI face: its routes relayed to the upstream byte for byte, with the upstream's key.

A 2xx body passes through decoded, within the backend's size limits, with the
upstream's key scrubbed out of it; an upstream error status is the proxy's
own error in OpenAI's shape (`failures.client_message`). The Responses face,
which translates, is `faces.responses`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...bodies import STREAM_HEADERS
from ...server.hangup import HangupWatch, client_socket
from ...upstream import Relay
from .relay_body import RelayBody
from .relay_meter import RelayMeter

if TYPE_CHECKING:
    from ...app import ProxyApp
    from ...client_exchange import ClientExchange

__all__ = ["chat", "embeddings", "models", "relay"]


def chat(app: ProxyApp, exchange: ClientExchange) -> Iterable[bytes]:
    """``POST /v1/chat/completions``, read whole first: the size limit holds, and the
    usage event gets the model and whether it streamed."""
    body = app._read_json(exchange)
    exchange.event.stream = bool(body.get("stream"))
    return relay(app, exchange, "POST", "/chat/completions", exchange.body_bytes)


def models(app: ProxyApp, exchange: ClientExchange) -> Iterable[bytes]:
    """``GET /v1/models``."""
    return relay(app, exchange, "GET", "/models", None)


def embeddings(app: ProxyApp, exchange: ClientExchange) -> Iterable[bytes]:
    """``POST /v1/embeddings``: the client's body to the upstream, its answer back as sent.

    Read whole first, like a chat body: the size limit holds, the body must be
    JSON and its ``model`` lands on the usage event.
    """
    app._read_json(exchange)
    return relay(app, exchange, "POST", "/embeddings", exchange.body_bytes)


def relay(
    app: ProxyApp, exchange: ClientExchange, method: str, path: str, data: bytes | None
) -> Iterable[bytes]:
    """Send `data` to the upstream's `path` and answer with what it says."""
    upstream_call = Relay()
    # Watched from before the upstream is even asked: a non-streamed answer
    # sends no headers until generation ends, so prefill may be all there is.
    watch = HangupWatch(client_socket(exchange.environ), upstream_call.cancel).start()
    try:
        app.upstream.relay(upstream_call, method, path, data)
    except BaseException:
        watch.stop()
        raise
    failure = upstream_call.failure
    if failure is not None:
        watch.stop()
        if watch.hung_up.is_set() or failure.error_class == "client_abort":
            return app._aborted(exchange)
        exchange.event.error_type = failure.error_class
        return app._error(
            exchange, failure.status, failure.message, failure.error_class, failure=failure
        )
    http = upstream_call.http  # a 2xx: an error status is a failure
    content_type = upstream_call.redactor.text(http.headers.get("Content-Type", "application/json"))
    meter = RelayMeter(
        event_stream=content_type.startswith("text/event-stream"),
        max_event_bytes=upstream_call.max_event_bytes,
    )
    # No Content-Length: scrubbing the key out can change the body's length.
    exchange.begin(http.status_code, content_type, STREAM_HEADERS if meter.event_stream else ())
    return RelayBody(exchange.event, lambda: app._record(exchange), upstream_call, meter, watch)
