"""The OpenAI face's relayed routes beyond chat completions: passed on byte for byte."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import ProxyApp, _Exchange

__all__ = ["embeddings"]


def embeddings(app: ProxyApp, exchange: _Exchange) -> Iterable[bytes]:
    """``POST /v1/embeddings``: the client's body to the upstream, its answer back as sent.

    Read whole first, like a chat body: the size limit holds, the body must be
    JSON and its ``model`` lands on the usage event.
    """
    app._read_json(exchange)
    return app._relay(exchange, "POST", "/embeddings", exchange.body_bytes)
