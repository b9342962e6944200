"""The usage events the report tests read back: three events over two days, two models;
and many priced events with awkward prices, with the oracle of their exact costs."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from llmchat.proxy.routing.config import Price
from llmchat.proxy.usage import UsageEvent
from llmchat.proxy.usage.prices import PriceTable

from ...support.usage import event

DAY1 = datetime.datetime(2026, 5, 1, 8, 0, tzinfo=datetime.timezone.utc).timestamp()
DAY2 = datetime.datetime(2026, 5, 2, 20, 0, tzinfo=datetime.timezone.utc).timestamp()

EVENTS = [
    event("a", model="m1", input_tokens=4, output_tokens=6, content_bytes=30,
          duration_ms=1500.0, started_at=DAY1, key_id="key_aaa"),
    event("b", model="m1", ok=False, status=502, error_type="http", duration_ms=250.0,
          started_at=DAY2, key_id="key_aaa"),
    event("c", model="m2", input_tokens=1, output_tokens=2, content_bytes=7,
          duration_ms=500.0, started_at=DAY2),
]  # fmt: skip


# -- priced events: awkward prices, the exact cost each event must have ------------------

PRICE_TEXT: dict[str, dict[str, str]] = {
    "flash": {"input": "0.075", "output": "0.3"},
    "sonnet": {"input": "3", "output": "15", "cache_read": "0.3", "cache_write": "3.75"},
    "mini": {"input": "0.15", "output": "0.6", "cache_read": "0.075"},
    # Four decimals: a token costs a fraction of a nano-unit, so events round (half even).
    "odd": {"input": "1.25", "output": "10", "cache_read": "0.125", "cache_write": "1.5625"},
}
"""Per-million prices as a config writes them: the oracle reads this text, the table its floats."""

PRICES = {name: Price(**{k: float(v) for k, v in p.items()}) for name, p in PRICE_TEXT.items()}

BOUNDARY = datetime.datetime(2026, 12, 20, tzinfo=datetime.timezone.utc).timestamp()
"""Events run from here for 25 days: 2026-W51 to 2027-W02, across 2026-W53."""


def expected_cost(e: UsageEvent) -> Decimal | None:
    """The oracle: tokens * the price's decimal text / 1e6, rounded to 1e-9 half even."""
    text = PRICE_TEXT.get(e.model or "")
    if text is None or (e.input_tokens is None and e.output_tokens is None):
        return None
    price = {kind: Decimal(value) for kind, value in text.items()}
    read = price.get("cache_read", price["input"])
    write = price.get("cache_write", price["input"])
    cached, written = e.cached_tokens or 0, e.cache_write_tokens or 0
    fresh = (e.input_tokens or 0) - cached - written
    exact = (
        fresh * price["input"]
        + cached * read
        + written * write
        + (e.output_tokens or 0) * price["output"]
    ) / 10**6
    return exact.quantize(Decimal("1E-9"), rounding=ROUND_HALF_EVEN)


def priced_events(n: int, seed: int = 28) -> list[UsageEvent]:
    """`n` events over `PRICES`' models (and an unpriced one), keys, nodes and 25 days."""
    rng = random.Random(seed)
    table = PriceTable(PRICES)
    out = []
    for i in range(n):
        input_tokens = rng.randrange(1, 200_000)
        cached = rng.randrange(0, input_tokens // 2 + 1)
        e = event(
            f"p{i}",
            model=rng.choice([*PRICES, "unpriced"]),
            key_id=rng.choice(["key_a", "key_b", "key_c", None]),
            node=rng.choice(["gpu-a", "gpu-b", "cloud"]),
            input_tokens=input_tokens,
            cached_tokens=cached,
            cache_write_tokens=rng.randrange(0, input_tokens - cached + 1),
            output_tokens=rng.randrange(1, 20_000),
            started_at=BOUNDARY + i * (25 * 86400 / n),
        )
        table.fill(e)
        out.append(e)
    return out


def exact_sums(events: list[UsageEvent], key: Callable[[UsageEvent], str | None]) -> dict[Any, Any]:
    """The oracle's cost per group of `key` (None for a group with no priced event)."""
    sums: dict[Any, Any] = {}
    for e in events:
        cost = expected_cost(e)
        group = key(e)
        if cost is not None:
            sums[group] = (sums.get(group) or Decimal(0)) + cost
        else:
            sums.setdefault(group, None)
    return sums
