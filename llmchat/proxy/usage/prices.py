"""What a request cost: a table of per-million-token prices and the event's cost.

The table takes any object with the four price attributes (`PriceLike`), so
this layer needs nothing of routing: the app builds it from the config's
``prices``. A price is found for, in order, the model the upstream reported
(`UsageEvent.model`), then the alias the client's model matched
(`UsageEvent.alias`); for each name an exact entry wins over a glob, and of
several globs the first in the config's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Protocol

from .event import UsageEvent

__all__ = ["PriceLike", "PriceTable", "cost_of"]

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


def cost_of(price: PriceLike, event: UsageEvent) -> float | None:
    """The event's cost at `price`; None when no token was counted."""
    if event.input_tokens is None and event.output_tokens is None:
        return None
    cached = event.cached_tokens or 0
    written = event.cache_write_tokens or 0
    # Upstreams that report cached tokens apart from input (none known) would
    # make this negative: clamp, the cached part is still priced.
    fresh = max((event.input_tokens or 0) - cached - written, 0)
    read_price = price.input if price.cache_read is None else price.cache_read
    write_price = price.input if price.cache_write is None else price.cache_write
    total = (
        fresh * price.input
        + cached * read_price
        + written * write_price
        + (event.output_tokens or 0) * price.output
    )
    return total / 1e6


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
