"""One request's attempts over its route: the loop the completions path and the byte relay share.

A request takes a slot on the first tier that admits it (`admission.admit`),
skipping the nodes it already failed on, and tries that node. The attempt
either ends the request (its outcome, whatever it is) or moves on with
`Next`: the node failed before any output reached the client (its failure is
what the client gets if no other node admits the request), or it cannot
serve this kind of request at all (passed over without a failure). When no
node admits the request any more, the client gets `refusal`: 429 when every
eligible node was busy, else the last node's failure, else 503. The time spent
waiting for slots, every attempt's summed, goes on the request's `Waited`
(its ``wait_ms``, for the usage event), a refused request's too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..failures import CANCELLED, Failure
from .admission import Busy, Slot
from .table import Route

if TYPE_CHECKING:
    from .upstream import RoutedUpstream, Tables

__all__ = ["Next", "Waited", "over_route", "refusal"]

T = TypeVar("T")


class Waited(Protocol):
    """What carries a routed request's wait for slots (`Call`, `Relay`)."""

    wait_ms: float | None


@dataclass(frozen=True)
class Next:
    """An attempt's node did not serve the request; try another.

    `failure`: how it failed before any output (the answer if none is left);
    None: the node cannot serve this kind of request (no failure of its own).
    The attempt has released its slot and told the router of the failure.
    """

    failure: Failure | None = None


def over_route(
    router: RoutedUpstream,
    tables: Tables,
    route: Route,
    key: int | None,
    cancelled: Callable[[], bool],
    attempt: Callable[[Slot], T | Next],
    waited: Waited,
) -> T | Failure:
    """`attempt` on each node `route` admits, in turn, until one does not return `Next`.

    That attempt's outcome is the request's; with no node left, `refusal`.
    `key` is the affinity key (None: no affinity); `cancelled` is checked at
    every wake-up of the wait for a slot. `waited.wait_ms` is the time spent in
    admission so far, set before each attempt (real time: the router's clock
    may be a test's).
    """
    failed: set[str] = set()
    last: Failure | None = None
    spent = 0.0
    while True:
        began = time.monotonic()
        got = router.admit(tables, route, key, failed, cancelled)
        spent += time.monotonic() - began
        waited.wait_ms = round(spent * 1000, 3)
        if isinstance(got, Busy):
            return refusal(got, last, tables.config.routing.wait_timeout_ms)
        outcome = attempt(got)
        if not isinstance(outcome, Next):
            return outcome
        failed.add(got.node.name)
        if outcome.failure is not None:
            last = outcome.failure


def refusal(busy: Busy, last: Failure | None, wait_timeout_ms: int) -> Failure:
    """What a request that got no slot is answered: 429 (all busy), the last node's
    failure, or 503 (no eligible node); a cancelled one is `CANCELLED`."""
    if busy.cancelled:
        return CANCELLED
    retry = str(max(1, math.ceil(wait_timeout_ms / 1000)))
    if busy.full:
        return Failure(
            429, "Every node serving this model is busy", "overloaded", retry_after=retry
        )
    if last is not None:
        return last
    return Failure(503, "No node serving this model is available", "unavailable", retry_after=retry)
