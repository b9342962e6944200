"""Eligibility, then admission: a slot on a node of the first tier that can take the request.

A node is *eligible* for a tier when the tier names it and it is healthy: key
resolved, not loading, not ejected (`NodeState.eligible`). It *admits* a
request when it has a free slot (``inflight < max_conns``). A request waits up
to its tier's ``wait_ms`` (default ``routing.wait_timeout_ms``) for an admitted
slot on an eligible node, woken by every release (the router's one condition:
no polling), then falls to the next tier. A tier without an eligible node is
passed at once. The slot is held from the choice until the node's Response
settles, and released exactly once (`Slot.release`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .choice import Rankings, SmoothWRR, choose
from .config import Tier
from .nodes import NodeState

__all__ = ["Busy", "PlannedTier", "Slot", "admit", "retryable"]


@dataclass(frozen=True)
class PlannedTier:
    """One tier of a route with its nodes resolved and its round-robin state."""

    index: int
    tier: Tier
    nodes: tuple[NodeState, ...]
    wrr: SmoothWRR = field(default_factory=SmoothWRR, compare=False)
    rankings: Rankings = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rankings", Rankings(self.nodes))


class Slot:
    """A slot held on `node` for one request of `tier`; `release` gives it back once."""

    __slots__ = ("_lock", "_released", "node", "tier")

    def __init__(self, node: NodeState, tier: int) -> None:
        self.node = node
        self.tier = tier
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        """Give the slot back; a second call does nothing."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self.node.release()

    def __repr__(self) -> str:
        return f"Slot({self.node.name!r}, tier={self.tier}, released={self._released})"


@dataclass(frozen=True)
class Busy:
    """No slot: `full` when some eligible node was there but had none free in time."""

    full: bool
    cancelled: bool = False


def admit(
    tiers: Sequence[PlannedTier],
    *,
    lock: threading.Condition,
    clock: Callable[[], float],
    default_wait_ms: int,
    key: int | None,
    skip: frozenset[str] | set[str] = frozenset(),
    cancelled: Callable[[], bool] = lambda: False,
) -> Slot | Busy:
    """A slot on the first tier with one free within its wait; `Busy` when none had.

    `skip` names nodes this request already failed on. `cancelled` is checked
    at every wake-up (the caller's cancel notifies `lock`).
    """
    full = False
    for planned in tiers:
        wait_ms = planned.tier.wait_ms if planned.tier.wait_ms is not None else default_wait_ms
        deadline = clock() + wait_ms / 1000.0
        with lock:
            while True:
                if cancelled():
                    return Busy(full, cancelled=True)
                now = clock()
                eligible = [n for n in planned.nodes if n.name not in skip and n.eligible(now)]
                if not eligible:
                    break
                node = choose(eligible, key, planned.wrr, planned.rankings)
                if node is not None:
                    node.take()
                    return Slot(node, planned.index)
                full = True
                remaining = deadline - now
                if remaining <= 0 or not lock.wait(remaining):
                    break
    return Busy(full)


def retryable(error_class: str, status: int | None) -> bool:
    """A failure before any output that another node may not have: the node's, not the request's
    (no connection, no answer in time, a 429 or a 5xx)."""
    if error_class in ("connection", "timeout"):
        return True
    return error_class == "http" and status is not None and (status >= 500 or status == 429)
