"""One configured node as the router sees it: its backend, its capacity, its health.

`NodeState` is what the health prober drives (the ``HealthTarget`` protocol:
`eject`, `readmit`, `set_loading`, `set_capacity`, `report`) and what
admission counts (`inflight` against `max_conns`). Its backend is built by
dialect with the node's own key, read from ``api_key_env``; never a client's.
A node whose key variable is configured but unset is not eligible, and says
so in `report`.

Every node of one `RoutedUpstream` shares that upstream's condition
(`lock`): admission checks and takes a slot on several nodes in one step, and
a release wakes the requests waiting for one. A slot is an index
(`slots.NodeSlots`): with a `slots.SlotLedger` (``--workers N``) it is also
held in the ledger, so ``max_conns`` holds for the node across processes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Final

from ...backends.anthropic import Anthropic
from ...backends.gemini import Gemini
from ...backends.ollama import Ollama
from ...backends.openai_common import OpenAICommon
from ...backends.responses import OpenAIResponses
from .config import NodeConfig
from .slots import NodeSlots, SlotLedger

__all__ = ["DEFAULT_MAX_CONNS", "NodeState", "backend_for"]

DEFAULT_MAX_CONNS: Final = 8
"""A node's slots when its config names none and no probe has reported its own."""

_BACKENDS: Final[dict[str, type[OpenAICommon]]] = {
    "openai": OpenAICommon,
    "anthropic": Anthropic,
    "responses": OpenAIResponses,
    "ollama": Ollama,
    "gemini": Gemini,
}


def backend_for(config: NodeConfig, key: str | None) -> OpenAICommon:
    """The llmchat backend of `config`'s dialect at its url, with `key` (never the env's default).

    No model of its own: the router names the tier's model on every request.
    """
    kind = _BACKENDS.get(config.dialect)
    if kind is None:
        raise ValueError(f"node {config.name!r}: unknown dialect {config.dialect!r}")
    # "" rather than None: a backend reads its provider's usual variable for None.
    return kind(api_url=config.url, api_key=key or "")


class NodeState:
    """One node: its backend, slots in use, weight and health. Thread-safe.

    `inflight`, `max_conns` and the health fields change under `lock` (shared
    by the nodes of one router); reading one of them alone needs no lock.
    """

    def __init__(
        self,
        config: NodeConfig,
        lock: threading.Condition | None = None,
        *,
        clock: Callable[[], float],
        environ: Any = None,
        ledger: SlotLedger | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        key = env.get(config.api_key_env) if config.api_key_env else None
        self.config = config
        self.name: str = config.name
        self.dialect: str = config.dialect
        self.weight: int = config.weight
        self.key_missing: bool = config.api_key_env is not None and not key
        self.backend: OpenAICommon = backend_for(config, key)
        self.lock = lock if lock is not None else threading.Condition()
        self._clock = clock
        self.max_conns: int = config.max_conns or DEFAULT_MAX_CONNS
        self.inflight = 0
        self.slots = NodeSlots(config.name, ledger)
        """The slot indexes this process holds (and, with a ledger, holds for all workers)."""
        self.server_slots: int | None = None
        """llama-server's own slot count (``/props``), learnt by the prober; None: not a
        llama-server, or not probed yet. Only a node with one is sent ``id_slot``."""
        self.served = 0
        self.loading = False
        self.ejected_until: float | None = None
        self.eject_reason: str | None = None
        self.backoff = 0.0
        """The last ejection's length in seconds (passive ejection doubles it)."""

    def reconfigure(self, config: NodeConfig, environ: Any = None) -> None:
        """Take a reloaded `config` of the same name; its slots and health carry over.

        A new url, dialect or key gets a new backend: requests in flight keep
        the Response they started on the old one.
        """
        env = os.environ if environ is None else environ
        key = env.get(config.api_key_env) if config.api_key_env else None
        with self.lock:
            old = self.config
            self.config = config
            self.weight = config.weight
            self.key_missing = config.api_key_env is not None and not key
            if config.max_conns is not None:
                self.max_conns = config.max_conns
            elif old.max_conns is not None:
                self.max_conns = DEFAULT_MAX_CONNS
            if (old.url, old.dialect, old.api_key_env) != (
                config.url,
                config.dialect,
                config.api_key_env,
            ):
                self.dialect = config.dialect
                self.backend = backend_for(config, key)
                self.server_slots = None  # maybe another server now: the prober says again
            self.lock.notify_all()

    def __repr__(self) -> str:
        return f"NodeState({self.name!r}, {self.dialect}, {self.inflight}/{self.max_conns})"

    # -- eligibility and admission (the caller holds `lock`) --------------

    def eligible(self, now: float) -> bool:
        """Can serve at all: key resolved, not loading, not ejected. Under `lock`."""
        if self.key_missing or self.loading:
            return False
        if self.ejected_until is not None:
            if now < self.ejected_until:
                return False
            self.ejected_until, self.eject_reason = None, None
        return True

    def can_serve(self) -> bool:
        """`eligible` by the node's own clock, read-only: a lapsed ejection is not cleared
        (for a reader outside routing, e.g. a metrics scrape, which must change nothing)."""
        if self.key_missing or self.loading:
            return False
        until = self.ejected_until
        return until is None or self._clock() >= until

    def has_room(self) -> bool:
        """Admission as this process sees it: a slot it does not hold. Under `lock`."""
        return self.inflight < self.max_conns

    def take(self, key: int | None = None) -> int | None:
        """Hold a free slot (`key`'s preferred one first): its index, or None when
        another worker holds every slot this process has free. Under `lock`."""
        index = self.slots.take(self.max_conns, key)
        if index is not None:
            self.inflight += 1
            self.served += 1
        return index

    def pin(self, index: int) -> int | None:
        """The ``id_slot`` to send for a request holding `index`; None for a node that is
        not a llama-server (as far as its probes say), or an index past its slots
        (llama-server reads ``id_slot`` modulo its slot count: another request's)."""
        slots = self.server_slots
        return index if slots is not None and index < slots else None

    def release(self, index: int | None = None) -> None:
        """Give slot `index` back and wake the requests waiting for one."""
        with self.lock:
            self.inflight -= 1
            if index is not None:
                self.slots.give(index)
            self.lock.notify_all()

    # -- the health prober's side (HealthTarget) ---------------------------

    def eject(self, seconds: float, reason: str) -> None:
        """Not eligible for `seconds` (until `readmit`); `reason` shows in `report`."""
        with self.lock:
            self.ejected_until = self._clock() + max(0.0, seconds)
            self.eject_reason = reason
            self.backoff = seconds

    def readmit(self) -> None:
        """Eligible again now; waiting requests are woken."""
        with self.lock:
            self.ejected_until, self.eject_reason = None, None
            self.backoff = 0.0
            self.lock.notify_all()

    def set_loading(self, loading: bool) -> None:
        """llama-server's "loading model": not eligible while set (not a failure)."""
        with self.lock:
            self.loading = loading
            self.lock.notify_all()

    def set_capacity(self, slots: int) -> None:
        """The probe's slot count; a configured ``max_conns`` wins over it."""
        if slots < 1:
            return
        with self.lock:
            self.server_slots = slots
            if self.config.max_conns is None:
                self.max_conns = slots
            self.lock.notify_all()

    def report(self) -> dict[str, Any]:
        """The node's state for ``GET /health``: no key, no url credentials."""
        with self.lock:
            now = self._clock()
            ejected = self.ejected_until is not None and now < self.ejected_until
            reason: str | None
            if self.key_missing:
                state, reason = "unavailable", f"key variable {self.config.api_key_env} is not set"
            elif ejected:
                state, reason = "ejected", self.eject_reason
            elif self.loading:
                state, reason = "loading", None
            else:
                state, reason = "healthy", None
            out: dict[str, Any] = {
                "name": self.name,
                "dialect": self.dialect,
                "state": state,
                "eligible": self.eligible(now),
                "inflight": self.inflight,
                "max_conns": self.max_conns,
                "weight": self.weight,
                "served": self.served,
                "slots_held": self.slots.held(),
            }
            if self.server_slots is not None:
                out["server_slots"] = self.server_slots
            if reason:
                out["reason"] = reason
            if ejected and self.ejected_until is not None:
                out["ejected_for_s"] = round(self.ejected_until - now, 3)
            return out
