"""What a usage store is: the `UsageStore` protocol, the `Total` it sums to, and its day bounds.

No SQL and no driver here: `sql.SqlStore` is the shared implementation,
`backend.open_store` picks one.
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ...errors import InvalidArgumentError
from .event import UsageEvent

__all__ = ["GROUPINGS", "Total", "UsageStore", "time_bounds"]

GROUPINGS = ("model", "day", "key_id", "node", "alias")
"""What `UsageStore.totals` can group by (``node`` and ``alias``: a routing proxy's)."""


@dataclass(frozen=True)
class Total:
    """The sums over one group's rows (one model, day, key id, node or alias)."""

    key: str | None
    """The model, the UTC day (``YYYY-MM-DD``), the key id, the node or the alias;
    None for rows without one."""
    requests: int
    ok: int
    failed: int
    input_tokens: int
    """Sum over the rows that reported a count (None counts as 0)."""
    output_tokens: int
    content_bytes: int
    duration_ms: float
    cached_tokens: int = 0
    """Of `input_tokens`, served from the upstream's prompt cache (rows that said; else 0)."""
    cost: float | None = None
    """Sum of the priced rows' `UsageEvent.cost`; None when no row had a price."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class UsageStore(Protocol):
    """What the proxy records usage into, and `llmchat usage` reads totals from."""

    def record(self, event: UsageEvent) -> None:
        """Store one event as one row. Thread-safe; raises on a database error."""

    def totals(
        self,
        by: str,
        since: datetime.date | None = None,
        until: datetime.date | None = None,
    ) -> list[Total]:
        """One `Total` per value of `by` (one of `GROUPINGS`), ordered by it (None last).

        `since` and `until` are UTC days, both included.
        """

    def describe_error(self, exc: BaseException) -> str:
        """`exc` as a log line's text, without any credential in the store's address."""

    def close(self) -> None:
        """Close every connection; idempotent."""


def time_bounds(
    since: datetime.date | None, until: datetime.date | None
) -> tuple[float | None, float | None]:
    """Unix times for `since`'s first instant and the instant after `until` (UTC days)."""
    if since is not None and until is not None and since > until:
        raise InvalidArgumentError(f"since ({since}) is after until ({until})")
    return (
        _midnight(since) if since is not None else None,
        _midnight(until + datetime.timedelta(days=1)) if until is not None else None,
    )


def _midnight(day: datetime.date) -> float:
    return datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc).timestamp()
