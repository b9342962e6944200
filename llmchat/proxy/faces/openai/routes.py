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
from ...completions import Completions, allowed_models, refused_model
from ...openai_models import model_list
from ...router import Route, Router
from ...server.hangup import HangupWatch, client_socket
from ...upstream import Relay, UpstreamUnavailable, client_message
from .relay_body import RelayBody
from .relay_meter import RelayMeter

if TYPE_CHECKING:
    from ...client_exchange import ClientExchange
    from ...upstream import Upstream

__all__ = ["OpenAIRoutes", "register", "relay"]


def register(router: Router, completions: Completions) -> None:
    """Put the OpenAI face's relayed routes in `router`, over `completions`' upstream."""
    face = OpenAIRoutes(completions.upstream)
    router.add(
        [
            Route("POST", "/v1/chat/completions", "openai", face.chat),
            Route("GET", "/v1/models", "openai", face.models),
            Route("POST", "/v1/embeddings", "openai", face.embeddings),
        ]
    )


class OpenAIRoutes:
    """The OpenAI face's handlers: each relays to `upstream`, untranslated."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def chat(self, exchange: ClientExchange) -> Iterable[bytes]:
        """``POST /v1/chat/completions``, read whole first: the size limit holds, and the
        usage event gets the model and whether it streamed."""
        body = exchange.read_json()
        exchange.event.stream = bool(body.get("stream"))
        forbidden = refused_model(exchange, body.get("model"))
        if forbidden is not None:
            return forbidden
        return relay(self.upstream, exchange, "POST", "/chat/completions", exchange.body_bytes)

    def models(self, exchange: ClientExchange) -> Iterable[bytes]:
        """``GET /v1/models``: under a key policy that limits models, the allowed aliases."""
        # Without a policy that limits models the upstream's own list is relayed as
        # it is (and its failure answered as a relay failure): the names are asked
        # for only when they are to be filtered.
        names = getattr(self.upstream, "model_names", None)
        if callable(names) and allowed_models(exchange, []) is not None:
            try:
                allowed = allowed_models(exchange, names()) or []
            except UpstreamUnavailable:
                return exchange.error(502, client_message("connection", None), "connection")
            return exchange.json(200, model_list(allowed))
        return relay(self.upstream, exchange, "GET", "/models", None)

    def embeddings(self, exchange: ClientExchange) -> Iterable[bytes]:
        """``POST /v1/embeddings``: the client's body to the upstream, its answer back as sent.

        Read whole first, like a chat body: the size limit holds, the body must be
        JSON and its ``model`` lands on the usage event.
        """
        body = exchange.read_json()
        forbidden = refused_model(exchange, body.get("model"))
        if forbidden is not None:
            return forbidden
        return relay(self.upstream, exchange, "POST", "/embeddings", exchange.body_bytes)


def relay(
    upstream: Upstream, exchange: ClientExchange, method: str, path: str, data: bytes | None
) -> Iterable[bytes]:
    """Send `data` to the upstream's `path` and answer with what it says."""
    upstream_call = Relay(exchange.request_id)
    # Watched from before the upstream is even asked: a non-streamed answer
    # sends no headers until generation ends, so prefill may be all there is.
    watch = HangupWatch(client_socket(exchange.environ), upstream_call.cancel).start()
    try:
        upstream.relay(upstream_call, method, path, data)
    except BaseException:
        watch.stop()
        raise
    finally:
        exchange.routed(
            upstream_call.node, upstream_call.tier, upstream_call.alias, upstream_call.wait_ms
        )
    failure = upstream_call.failure
    if failure is not None:
        watch.stop()
        return exchange.failed(failure, watch.hung_up.is_set())
    http = upstream_call.http  # a 2xx: an error status is a failure
    content_type = upstream_call.redactor.text(http.headers.get("Content-Type", "application/json"))
    meter = RelayMeter(
        event_stream=content_type.startswith("text/event-stream"),
        max_event_bytes=upstream_call.max_event_bytes,
        silence=upstream_call.timeouts.headers if upstream_call.timeouts is not None else None,
    )
    # No Content-Length: scrubbing the key out can change the body's length.
    exchange.begin(http.status_code, content_type, STREAM_HEADERS if meter.event_stream else ())
    return RelayBody(exchange, upstream_call, meter, watch)
