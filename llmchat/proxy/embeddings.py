"""The upstream's ``POST /embeddings`` (OpenAI shape), for the faces that embed.

`fetch_embeddings` posts an OpenAI embeddings body through the backend's own
relay (its transport, credentials, timeouts and size limit; cancellable from
another thread through the `Relay`) and reads the vectors back in input
order. Every failure is a `Failure` with one of the fixed client messages:
nothing the upstream wrote reaches the client but numbers and a model name
scrubbed of the backend's credentials.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import wire_json
from ..protocols.usage_counts import usage_counts
from ..transport import decode_body, parse_json
from .relay import Relay, RelayBroken
from .upstream import Failure, Upstream, client_message

__all__ = ["Embeddings", "fetch_embeddings"]

log = logging.getLogger("llmchat.proxy")


@dataclass(frozen=True)
class Embeddings:
    """The vectors in input order, the prompt tokens counted (None: not said), the model."""

    vectors: list[list[float]]
    prompt_tokens: int | None
    model: str | None


def fetch_embeddings(
    upstream: Upstream, relay: Relay, body: Mapping[str, Any]
) -> Embeddings | Failure:
    """POST `body` to the upstream's ``/embeddings``; the vectors, or why not.

    Raises `InvalidArgumentError` when the upstream is not an HTTP backend.
    """
    upstream.relay(relay, "POST", "/embeddings", wire_json.encode_data(dict(body)))
    if relay.failure is not None:
        return relay.failure
    try:
        data = b"".join(relay.chunks())
    except RelayBroken as broken:
        return Failure(502, client_message(broken.error_class, None), broken.error_class)
    if relay.exchange.aborted == "cancel":
        return Failure(499, "Cancelled", "client_abort")
    payload = parse_json(decode_body(data))
    vectors = _vectors(payload)
    if vectors is None:
        log.warning("upstream embeddings answer unusable (%d bytes)", len(data))
        return Failure(502, client_message("response", None), "response")
    assert isinstance(payload, Mapping)
    model = payload.get("model")
    return Embeddings(
        vectors,
        usage_counts(payload.get("usage")).prompt,
        relay.redactor.text(model) if isinstance(model, str) and model else None,
    )


def _vectors(payload: Any) -> list[list[float]] | None:
    """``data[*].embedding`` ordered by ``index``; None when the answer is not that."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list):
        return None
    rows: list[tuple[int, list[float]]] = []
    for position, item in enumerate(data):
        if not isinstance(item, Mapping):
            return None
        vector = item.get("embedding")
        if not isinstance(vector, list) or not all(_is_number(x) for x in vector):
            return None  # a base64 string, or something else: not asked for
        index = item.get("index")
        rows.append((index if isinstance(index, int) else position, [float(x) for x in vector]))
    rows.sort(key=lambda row: row[0])
    return [vector for _, vector in rows]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
