"""Retry policy: which bucket a failed attempt falls in, and how long to wait before the next.

`classify` sorts a failure into ``abort``, ``retry-same`` or ``advance`` (see
`llmchat.retry`); `backoff` is the wait before retrying the same backend: the
server's ``Retry-After`` when it sent a usable one (capped), else exponential
with jitter (capped).
"""

from __future__ import annotations

import email.utils
import math
import random
import threading
from datetime import datetime, timezone
from typing import Any, Final, Literal

__all__ = [
    "MAX_BACKOFF",
    "MAX_RETRY_AFTER",
    "Decision",
    "backoff",
    "classify",
    "sleep_unless_cancelled",
]

Decision = Literal["abort", "retry-same", "advance"]

MAX_BACKOFF: Final = 30.0
"""The longest computed backoff, in seconds."""
MAX_RETRY_AFTER: Final = 60.0
"""The longest sleep a server's ``Retry-After`` can ask for, in seconds."""
_ABORT_STATUSES: Final = frozenset({400, 401, 402, 403, 404})


def classify(error_class: str | None, error_status: int | None, parser_failed: bool = False) -> str:
    """Return ``"abort"``, ``"retry-same"`` or ``"advance"`` for one failed attempt."""
    if parser_failed:
        return "advance"
    if error_class == "http":
        if error_status in _ABORT_STATUSES:
            return "abort"
        if error_status == 429:
            return "advance"
        if error_status is not None and 500 <= error_status <= 599:
            return "retry-same"
        return "advance"
    if error_class == "timeout":
        return "advance"
    if error_class == "connection":
        return "retry-same"
    if error_class == "response":
        return "advance"
    return "retry-same"


def _parse_retry_after(value: Any) -> float | None:
    """Seconds asked for by a ``Retry-After`` value (delta-seconds or HTTP date); None if bad."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            seconds = float(text)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(text)
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
            if when is None:
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            seconds = (when - datetime.now(timezone.utc)).total_seconds()
    else:
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def backoff(attempt: int, retry_after: str | float | None = None) -> float:
    """Seconds to sleep before retry number `attempt` (1-based).

    ``min(2 ** (attempt - 1) + uniform(0, 0.5), 30)``, unless `retry_after`
    (a ``Retry-After`` header: delta-seconds or an HTTP date) parses; then that,
    floored at 0 and capped at `MAX_RETRY_AFTER`. An unparseable value is ignored.
    """
    asked = _parse_retry_after(retry_after)
    if asked is not None:
        return asked
    exponent = min(max(attempt, 1) - 1, 16)  # 2**16 is far past the cap already
    return min(2.0**exponent + random.uniform(0, 0.5), MAX_BACKOFF)


def sleep_unless_cancelled(seconds: float, cancel_event: threading.Event) -> bool:
    """Sleep up to `seconds`; wake at once when `cancel_event` is set. True if cancelled."""
    if seconds <= 0:
        return cancel_event.is_set()
    return cancel_event.wait(seconds)
