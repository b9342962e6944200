"""What a usage store is: the `UsageStore` protocol, the `Total` it sums to, and its day bounds.

Costs are summed exactly, as integer nano-units (`money`): `Total.cost_nanos`,
and `Total.cost` is that sum as a Decimal.

No SQL and no driver here: `sql.SqlStore` is the shared implementation,
`backend.open_store` picks one.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any, Protocol

from ...errors import InvalidArgumentError
from .event import UsageEvent
from .money import decimal_of, text_of

__all__ = ["GROUPINGS", "Total", "UsageStore", "combined", "time_bounds"]

GROUPINGS = ("model", "day", "week", "month", "key_id", "node", "alias")
"""What `UsageStore.totals` can group by (``node`` and ``alias``: a routing proxy's).

``day``, ``week`` and ``month`` are the UTC day of the request's start
(``2026-12-31``), its ISO 8601 week (``2026-W53``: weeks start on Monday, and
a week belongs to the year of its Thursday, so 2027-01-01 is in 2026-W53) and
its month (``2026-12``)."""


@dataclass(frozen=True)
class Total:
    """The sums over one group's rows (one model, day, week, month, key id, node or alias)."""

    key: str | None
    """The model, the UTC day (``YYYY-MM-DD``), ISO week (``YYYY-Www``) or month
    (``YYYY-MM``), the key id, the node or the alias; None for rows without one."""
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
    cost_nanos: int | None = None
    """The priced rows' costs summed exactly, in nano-units (1e-9) of the prices'
    currency; None when no row had a price. A row an older llmchat stored with only
    its float cost counts as that cost rounded to 1e-9 (`money.nanos_of`)."""

    @property
    def cost(self) -> Decimal | None:
        """`cost_nanos` as an exact Decimal of units (nine places); None when unpriced."""
        return None if self.cost_nanos is None else decimal_of(self.cost_nanos)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: the fields, with ``cost`` the exact decimal text (``"1.250000000"``).

        Text, not a JSON number: most JSON readers (JavaScript, jq before 1.7,
        Python's default) read a number as a binary float, which would round
        the exact sum again; ``Decimal(text)`` reads it back exactly.
        """
        out = asdict(self)
        out["cost"] = text_of(out.pop("cost_nanos"))
        return out


def combined(totals: Sequence[Total], key: str | None = None) -> Total:
    """One `Total` summing `totals` (exact in every count and in cost), named `key`.

    Every row is in exactly one group of any grouping, so the groups of one
    `UsageStore.totals` call combine to the whole.
    """
    costs = [t.cost_nanos for t in totals if t.cost_nanos is not None]
    return Total(
        key=key,
        requests=sum(t.requests for t in totals),
        ok=sum(t.ok for t in totals),
        failed=sum(t.failed for t in totals),
        input_tokens=sum(t.input_tokens for t in totals),
        output_tokens=sum(t.output_tokens for t in totals),
        content_bytes=sum(t.content_bytes for t in totals),
        duration_ms=round(sum(t.duration_ms for t in totals), 3),
        cached_tokens=sum(t.cached_tokens for t in totals),
        cost_nanos=sum(costs) if costs else None,
    )


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
