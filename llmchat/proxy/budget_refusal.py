"""The answer to a request over its key's budget: a 429 the client shows and does not retry.

429 with the face's rate-limit shape (Anthropic's ``rate_limit_error``,
OpenAI's ``rate_limit_exceeded``), ``x-should-retry: false`` (both SDKs obey
it before their status rules) and ``retry-after`` (seconds until the limit
lifts, for a person or a client that reads it).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from .error_shapes import error_body

if TYPE_CHECKING:
    from .client_exchange import ClientExchange
    from .usage.budgets import Refusal

__all__ = ["over_budget"]

_WHAT = {
    "cost": "cost budget",
    "tokens": "token budget",
    "rpm": "requests-per-minute limit",
}


def over_budget(exchange: ClientExchange, refusal: Refusal) -> list[bytes]:
    """Answer `exchange` with the 429 for `refusal` (recorded as ``budget``)."""
    wait = max(math.ceil(refusal.retry_at - time.time()), 1)
    message = f"This API key reached its {_WHAT[refusal.limit]}; try again in {wait} s"
    event = exchange.event
    event.ok = False
    event.error_type = "budget"
    extra = [("x-should-retry", "false"), ("retry-after", str(wait))]
    return exchange.json(429, error_body(exchange.face, 429, message), extra)
