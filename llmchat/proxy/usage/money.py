"""Exact money: costs as integer nano-units, and their decimal text.

A cost is kept as an integer count of nano-units (1e-9 of the prices'
currency), so sums of any number of events are exact integer sums, in Python
and in SQL alike. The rounding happens once per event, where the cost is
computed (`prices.cost_nanos`); everything after is exact.

A float cost (`UsageEvent.cost`, as a sink writes it and an older llmchat
stored it) maps back to its nanos by `nanos_of`: the float's shortest decimal
text (its ``repr``), rounded to 1e-9, ties to even. For a float made as
``nanos / 1e9`` this gives `nanos` back exactly whenever the cost is below
2**23 (~8.4 million) units: there the floats are closer together than 1e-9,
so no two nano amounts share one float.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final

__all__ = ["MAX_NANOS", "NANOS_PER_UNIT", "decimal_of", "nanos_of", "text_of"]

NANOS_PER_UNIT: Final = 10**9
"""Nano-units per unit of the prices' currency."""

MAX_NANOS: Final = 10**18
"""The largest cost one event may have (1e9 units): it and any few of it fit a signed
64-bit integer (BIGINT, 9.2e18), and a larger one is nonsense, recorded as no cost."""


def nanos_of(cost: float | None) -> int | None:
    """`cost` (units) as nanos: its shortest decimal text rounded to 1e-9, ties to even.

    None for None, a cost that is not finite, negative, or above `MAX_NANOS`.
    """
    if cost is None or not math.isfinite(cost) or cost < 0:
        return None
    nanos = int((Decimal(repr(float(cost))) * NANOS_PER_UNIT).to_integral_value(ROUND_HALF_EVEN))
    return nanos if nanos <= MAX_NANOS else None


def decimal_of(nanos: int) -> Decimal:
    """`nanos` as an exact Decimal of units, nine places (``Decimal('1.250000000')``)."""
    # From text: exact at any size (arithmetic would round to the context's 28 digits).
    return Decimal(f"{int(nanos)}E-9")


def text_of(nanos: int | None) -> str | None:
    """`nanos` as exact decimal text of units, nine places (``"1.250000000"``); None for None.

    Never an exponent: ``Decimal``'s own ``str`` would write small sums as ``7.5E-5``.
    """
    return None if nanos is None else f"{decimal_of(nanos):.9f}"
