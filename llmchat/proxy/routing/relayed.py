"""The OpenAI face's byte relay over a `RoutedUpstream`: routed by the body's model.

``GET /models`` is answered by the proxy itself: the aliases, each once. A
body with a ``model`` (chat completions, embeddings) is routed like a
completion: the alias's tiers, admission, the model rewritten to the tier's
(the body re-encoded canonically), the node's own key; a node that refuses
the connection or answers 429/5xx before its headers are relayed is left for
another node, then the next tier; one whose body breaks off or goes silent
past its read timeout afterwards is ejected (the client gets the face's
in-band error; `RoutedUpstream.on_broken`, the rule of the Response path too:
a body that passes a size limit does not eject). The slot is held until
the relayed body closes. The relay speaks OpenAI's wire format only, so it
uses a tier's ``openai``-dialect nodes and passes the others over; a model
with none is a 404 at once (`not_relayed`), never a wait and a 503.
Anything else goes to the metadata node as sent.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import TYPE_CHECKING, Any

from ... import wire_json
from ...transport import Exchange
from ..failures import Failure
from ..openai_models import model_list
from ..relay import Relay, open_relay
from ..upstream import Upstream
from .admission import Slot, retryable
from .attempts import Next, over_route
from .choice import prefix_key
from .table import unknown_model
from .waiting import ABANDONED

if TYPE_CHECKING:
    from .upstream import RoutedUpstream

__all__ = ["not_relayed", "relay_routed"]


class _Listing:
    """A proxy-made 200 JSON answer in the shape `Relay` reads from a transport."""

    status_code = 200

    def __init__(self, data: bytes) -> None:
        self.headers = {"Content-Type": "application/json"}
        self._data = data

    def iter_bytes(self, limit: int | None = None) -> Any:
        yield self._data

    def close(self) -> None:
        pass


def _body(data: bytes | None) -> dict[str, Any] | None:
    try:
        body = json.loads(data) if data else None
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def not_relayed(model: str) -> Failure:
    """The 404 for a model whose nodes all speak another API than the relayed OpenAI wire.

    Not the 503 of a node that is down: no retry or wait can mend it, and the
    client is told where the model is served (the faces that translate).
    """
    shown = model if len(model) <= 100 else model[:100] + "..."
    return Failure(
        404,
        f"The model '{shown}' is not served on this route: its nodes speak another API "
        "than OpenAI's, which this route passes on as it is; the translating routes serve "
        "it (/v1/responses, /v1/messages, /api/chat)",
        "not_found",
    )


def relay_routed(
    router: RoutedUpstream, relay: Relay, method: str, path: str, data: bytes | None
) -> None:
    """Open `method path` on the node the body's model routes to, into `relay`."""
    if method == "GET" and path == "/models":
        relay.http = _Listing(wire_json.encode_data(model_list(router.model_names())))
        return
    body = _body(data)
    model = body.get("model") if body is not None else None
    if body is None or not isinstance(model, str):
        Upstream(router.metadata_node().backend).relay(relay, method, path, data)
        return
    tables = router.snapshot()
    route = tables.table.resolve(model)
    if route is None:
        relay.failure = unknown_model(model)
        return
    relay.alias = route.alias
    if not any(
        tables.nodes[name].dialect == "openai" for tier in route.tiers for name in tier.nodes
    ):
        relay.failure = not_relayed(model)
        return
    affine = tables.config.routing.affinity == "prefix" and path == "/chat/completions"
    key = prefix_key(body) if affine else None
    cancelled = threading.Event()

    def cancel() -> None:
        cancelled.set()
        router.wake()

    relay.on_cancel(cancel)
    redactor = router.redactor()

    def attempt(got: Slot) -> Next | None:
        node = got.node
        if node.dialect != "openai":  # the byte relay speaks OpenAI's format only
            got.release()
            return Next()
        relay.node, relay.tier = node.name, got.tier
        sent = wire_json.encode_data(got.request_body(body, route.tiers[got.tier].model))
        if relay.http is not None or relay.failure is not None:
            relay.exchange, relay.http, relay.failure = Exchange(), None, None
        relay.on_close(got.release)
        exchange = relay.exchange
        try:
            with router.waiting.held(node.name, functools.partial(exchange.abort, ABANDONED)):
                open_relay(node.backend, redactor, relay, method, path, sent)
        except BaseException:
            got.release()
            raise
        failure = relay.failure
        if failure is None:
            router.on_success(node)
            # After the first byte there is no other node to try: a body that goes
            # silent past the node's read timeout, or is cut, is the client's in-band
            # error, and the node is ejected like one that failed before it.
            relay.on_broken(functools.partial(router.on_broken, node))
            return None
        got.release()
        if failure.error_class == "client_abort" or not retryable(
            failure.error_class, failure.upstream_status
        ):
            return None
        router.on_failure(node, failure.error_class, failure.upstream_status)
        return Next(failure)

    refused = over_route(router, tables, route, key, cancelled.is_set, attempt, relay)
    if refused is not None:
        relay.failure = refused
