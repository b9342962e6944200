"""What a request cost: a table of per-million-token prices and the event's cost.

The table takes any object with the four price attributes (`PriceLike`), so
this layer needs nothing of routing: the app builds it from the config's
``prices``. A price is found for, in order, the model the upstream reported
(`UsageEvent.model`), then the alias the client's model matched
(`UsageEvent.alias`); for each name an exact entry wins over a glob, and of
several globs the first in the config's order.

The cost is computed in decimal, never in binary floating point: each price
is taken as the decimal it is written as (its shortest text, so ``0.075`` is
0.075, not the binary float nearest it), and the event's exact cost

    (fresh input * input + cache read * cache_read + cache write * cache_write
     + output * output) / 1e6

is rounded once, to the nearest 1e-9 of the prices' currency (a nano-unit),
ties to even (`cost_nanos`). That rounding changes nothing when every price
has at most 3 decimal places (per million tokens): a token then costs a whole
number of nano-units. `UsageEvent.cost` is that amount as a float (nanos /
1e9), and the stores and the log reader turn it back into the same integer
nanos (`money.nanos_of`) to sum exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fnmatch import fnmatchcase
from typing import Protocol

from .event import UsageEvent
from .money import MAX_NANOS, NANOS_PER_UNIT

__all__ = ["PriceLike", "PriceTable", "cost_nanos", "cost_of", "exact_cost"]

_GLOB_CHARS = frozenset("*?[")


class PriceLike(Protocol):
    """A price per million tokens of each kind; None cache prices mean the input price."""

    @property
    def input(self) -> float: ...
    @property
    def output(self) -> float: ...
    @property
    def cache_read(self) -> float | None: ...
    @property
    def cache_write(self) -> float | None: ...


def exact_cost(price: PriceLike, event: UsageEvent) -> Decimal | None:
    """The event's cost at `price` in units, exactly (unrounded); None when no token was counted."""
    if event.input_tokens is None and event.output_tokens is None:
        return None
    cached = event.cached_tokens or 0
    written = event.cache_write_tokens or 0
    # Upstreams that report cached tokens apart from input (none known) would
    # make this negative: clamp, the cached part is still priced.
    fresh = max((event.input_tokens or 0) - cached - written, 0)
    read_price = price.input if price.cache_read is None else price.cache_read
    write_price = price.input if price.cache_write is None else price.cache_write
    with localcontext() as context:
        # Enough digits that nothing here rounds: 13-digit counts times
        # 17-digit prices, four terms.
        context.prec = 80
        total = (
            fresh * _decimal(price.input)
            + cached * _decimal(read_price)
            + written * _decimal(write_price)
            + (event.output_tokens or 0) * _decimal(price.output)
        )
        return total.scaleb(-6)


def cost_nanos(price: PriceLike, event: UsageEvent) -> int | None:
    """`exact_cost` rounded to a nano-unit (1e-9), ties to even; None past `MAX_NANOS`."""
    cost = exact_cost(price, event)
    if cost is None:
        return None
    with localcontext() as context:
        context.prec = 80
        nanos = int((cost * NANOS_PER_UNIT).to_integral_value(ROUND_HALF_EVEN))
    return nanos if nanos <= MAX_NANOS else None


def cost_of(price: PriceLike, event: UsageEvent) -> float | None:
    """The event's cost at `price` as a float: `cost_nanos` / 1e9 (the float nearest it)."""
    nanos = cost_nanos(price, event)
    return None if nanos is None else nanos / NANOS_PER_UNIT


def _decimal(value: float) -> Decimal:
    # repr: the shortest text that reads back as this float, i.e. what the config wrote.
    return Decimal(value) if isinstance(value, int) else Decimal(repr(float(value)))


class PriceTable:
    """The config's prices: exact names and fnmatch globs, looked up per event."""

    def __init__(self, prices: Mapping[str, PriceLike]) -> None:
        self._exact: dict[str, PriceLike] = {}
        self._globs: list[tuple[str, PriceLike]] = []
        for name, price in prices.items():
            if not isinstance(name, str) or not name:
                raise TypeError("prices: each name must be a non-empty string")
            for attr in ("input", "output"):
                if not isinstance(getattr(price, attr, None), (int, float)):
                    raise TypeError(f"prices.{name}.{attr} must be a number")
            for attr in ("input", "output", "cache_read", "cache_write"):
                value = getattr(price, attr, None)
                if value is not None and not (math.isfinite(value) and value >= 0):
                    raise ValueError(f"prices.{name}.{attr} must be a finite number >= 0")
            if _GLOB_CHARS.isdisjoint(name):
                self._exact[name] = price
            else:
                self._globs.append((name, price))

    def __len__(self) -> int:
        return len(self._exact) + len(self._globs)

    def price_for(self, *names: str | None) -> PriceLike | None:
        """The price of the first of `names` any entry names (exact before glob)."""
        for name in names:
            if not name:
                continue
            price = self._exact.get(name)
            if price is not None:
                return price
            for pattern, price in self._globs:
                if fnmatchcase(name, pattern):
                    return price
        return None

    def cost(self, event: UsageEvent) -> float | None:
        """The event's cost; None when no price names its model or no token was counted."""
        price = self.price_for(event.model, event.alias)
        return None if price is None else cost_of(price, event)

    def fill(self, event: UsageEvent) -> None:
        """Set `event.cost` unless it is already set (once per request)."""
        if event.cost is None:
            event.cost = self.cost(event)
