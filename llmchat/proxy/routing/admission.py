"""Eligibility, then admission: a slot on a node of the first tier that can take the request.

A node is *eligible* for a tier when the tier names it and it is healthy: key
resolved, not loading, not ejected (`NodeState.eligible`). It *admits* a
request when it has a free slot (``inflight < max_conns``). A request waits up
to its tier's ``wait_ms`` (default ``routing.wait_timeout_ms``) for an admitted
slot on an eligible node, woken by every release (the router's one condition:
no polling), then falls to the next tier. A tier without an eligible node is
passed at once. The slot is held from the choice until the node's Response
settles, and released exactly once (`Slot.release`).

A slot is one of the node's slot indexes (`slots.NodeSlots`: a conversation's
preferred one first). Under ``--workers N`` a node with room in this process
may have every free index held by other workers (the `slots.SlotLedger`): the
choice then moves to the next node, and a request left waiting on such slots
looks again every `RECHECK_S` (no other process can notify this one's
condition). A llama-server node is asked for its slot by index (``id_slot`` in
the body, `Slot.request_body`) when the request has a conversation key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .choice import Rankings, SmoothWRR, choose
from .config import Tier
from .nodes import NodeState

__all__ = ["RECHECK_S", "Busy", "PlannedTier", "Slot", "admit", "retryable"]

RECHECK_S: Final = 0.01
"""How often a request waiting for slots that other workers hold looks again, in seconds.

A release in another process cannot notify this process's condition; a pipe
or semaphore per node could, at a system call per release and a listening
thread per worker. Looking again costs a few non-blocking flocks, and 10 ms
past the release is small against a generation's seconds. The wait stays
bounded by its ``wait_ms``; a release in this process still wakes it at once."""


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
    """Slot `index` held on `node` for one request of `tier`; `release` gives it back once.

    `id_slot` is the llama-server slot to ask for (None: send none).
    """

    __slots__ = ("_lock", "_released", "id_slot", "index", "node", "tier")

    def __init__(
        self, node: NodeState, tier: int, index: int | None = None, id_slot: int | None = None
    ) -> None:
        self.node = node
        self.tier = tier
        self.index = index
        self.id_slot = id_slot
        self._released = False
        self._lock = threading.Lock()

    def request_body(self, body: Mapping[str, Any], model: str) -> dict[str, Any]:
        """The OpenAI chat `body` as this slot's node gets it: the tier's `model`, and the
        slot pinned (``id_slot``: llama-server honours it on ``/v1/chat/completions``)."""
        sent = {**body, "model": model}
        if self.id_slot is not None:
            sent["id_slot"] = self.id_slot
        return sent

    def release(self) -> None:
        """Give the slot back; a second call does nothing."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self.node.release(self.index)

    def __repr__(self) -> str:
        return (
            f"Slot({self.node.name!r}, tier={self.tier}, index={self.index}, "
            f"released={self._released})"
        )


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
        wait_s = wait_ms / 1000.0
        deadline = clock() + wait_s
        rechecked = 0.0  # re-check waits that timed out: bounded even if `clock` stands still
        with lock:
            while True:
                if cancelled():
                    return Busy(full, cancelled=True)
                now = clock()
                eligible = [n for n in planned.nodes if n.name not in skip and n.eligible(now)]
                if not eligible:
                    break
                got = _take(eligible, key, planned)
                if isinstance(got, Slot):
                    return got
                full = True
                remaining = deadline - now
                if remaining <= 0:
                    break
                if got:  # held by other workers: no release of theirs notifies `lock`
                    step = min(remaining, RECHECK_S, wait_s - rechecked)
                    if step <= 0:
                        break
                    if not lock.wait(step):
                        rechecked += step
                elif not lock.wait(remaining):
                    break
    return Busy(full)


def _take(eligible: list[NodeState], key: int | None, planned: PlannedTier) -> Slot | bool:
    """A slot on the node `choose` picks, else on its next pick without it; when none:
    True if some node with room here had its free slots all held by other workers."""
    elsewhere = False
    node = choose(eligible, key, planned.wrr, planned.rankings)
    while node is not None:
        index = node.take(key)
        if index is not None:
            return Slot(node, planned.index, index, node.pin(index) if key is not None else None)
        elsewhere = True
        eligible = [n for n in eligible if n is not node]
        node = choose(eligible, key, planned.wrr, planned.rankings) if eligible else None
    return elsewhere


def retryable(error_class: str, status: int | None) -> bool:
    """A failure before any output that another node may not have: the node's, not the request's
    (no connection, no answer in time, a 429 or a 5xx)."""
    if error_class in ("connection", "timeout"):
        return True
    return error_class == "http" and status is not None and (status >= 500 or status == 429)
