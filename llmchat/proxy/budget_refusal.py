"""The answer to a request over its key's budget: a 429 the client shows and does not retry.

429 with ``x-should-retry: false`` (both SDKs obey it before their status
rules) and ``retry-after`` (seconds until the limit lifts, for a person or a
client that reads it), in the face's shape:

- Anthropic's face: ``rate_limit_error``. Claude Code shows it and, told
  ``x-should-retry: false``, does not retry (a 403 would send it to its login
  screen).
- OpenAI's faces: ``error.type`` ``usage_limit_reached`` with ``resets_at``
  (unix seconds). That is the one 429 Codex neither retries nor waits out:
  any other 429 it sleeps ``retry-after`` and tries again, for as long as the
  budget's period has left. Codex prints its own sentence for it ("You've hit
  your usage limit ... try again at <resets_at>"), with the
  ``x-codex-promo-message`` header's text in the middle: the budget's reason
  goes there. The OpenAI SDKs raise their `RateLimitError` on the status
  alone, with the message.
- Gemini's face: ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` detail whose
  ``retryDelay`` is the wait. Gemini CLI's quota rules read it: a wait of
  five minutes or less it sleeps out and retries, a longer one ends the
  turn with the message (its "terminal quota" error).
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

USAGE_LIMIT = "usage_limit_reached"
"""The OpenAI faces' ``error.type`` and ``code`` for a budget refusal (Codex's own term)."""


def over_budget(exchange: ClientExchange, refusal: Refusal) -> list[bytes]:
    """Answer `exchange` with the 429 for `refusal` (recorded as ``budget``)."""
    wait = max(math.ceil(refusal.retry_at - time.time()), 1)
    reason = f"This API key reached its {_WHAT[refusal.limit]}"
    event = exchange.event
    event.ok = False
    event.error_type = "budget"
    extra = [("x-should-retry", "false"), ("retry-after", str(wait))]
    body = error_body(exchange.face, 429, f"{reason}; try again in {wait} s")
    if exchange.face in ("openai", "proxy"):
        body["error"].update(
            type=USAGE_LIMIT, code=USAGE_LIMIT, resets_at=math.ceil(refusal.retry_at)
        )
        extra.append(("x-codex-promo-message", reason))
    elif exchange.face == "gemini":
        body["error"]["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{wait}s"}
        ]
    return exchange.json(429, body, extra)
