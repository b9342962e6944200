"""What each client key may spend, and whether it still may: per-key budgets.

A budget limits a key's cost and tokens per UTC period (day, week from
Monday, month) and its requests per minute. The check runs before the
upstream call, from:

- the usage store's total for the key's period, re-read at most every
  ``refresh_s`` seconds (the store is the truth across workers and hosts);
- plus this process's own spend since that re-read (`record`, a `UsageLog`
  listener, counts each event as it is emitted).

How stale it may be: another process's spend is seen at most ``refresh_s``
seconds late, and a request's tokens are known only when it ends (no
reservation: a request's size is not known before it runs). So a key may
overshoot its cost or token limit by what its requests in flight at the
crossing cost, plus what other processes' requests ending within
``refresh_s`` cost. Without a store each process counts only its own
spend (the limit then applies per process). ``rpm`` is a sliding
minute per process: across N processes a key gets at most N * rpm.
"""

from __future__ import annotations

import calendar
import datetime
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .event import UsageEvent

if TYPE_CHECKING:
    from .store import UsageStore

__all__ = ["PERIODS", "BudgetLike", "Budgets", "Refusal", "period_start"]

PERIODS = ("day", "week", "month")


class BudgetLike(Protocol):
    """A key's limits (the config's `Budget`); None: no such limit."""

    @property
    def period(self) -> str: ...
    @property
    def cost(self) -> float | None: ...
    @property
    def tokens(self) -> int | None: ...
    @property
    def rpm(self) -> int | None: ...


def period_start(period: str, now: float) -> datetime.date:
    """The UTC day `period` began on at unix time `now` (a week begins on Monday)."""
    day = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).date()
    if period == "day":
        return day
    if period == "week":
        return day - datetime.timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    raise ValueError(f"budget period must be one of {', '.join(PERIODS)}, got {period!r}")


def _unix(day: datetime.date) -> float:
    return float(calendar.timegm(day.timetuple()))


@dataclass(frozen=True)
class Refusal:
    """Why a key's request is refused: which limit, and when it may try again (unix time)."""

    limit: str
    """``cost``, ``tokens`` or ``rpm``."""
    retry_at: float


@dataclass
class _State:
    budget: BudgetLike
    start: datetime.date | None = None
    stored_cost: float = 0.0
    stored_tokens: int = 0
    local_cost: float = 0.0
    local_tokens: int = 0
    refreshed_at: float = 0.0
    next_refresh: float = float("-inf")
    admitted: deque[float] = field(default_factory=deque)


class Budgets:
    """The budgets of the keys that have one (by key name, the events' ``key_id``)."""

    def __init__(
        self,
        budgets: Mapping[str, BudgetLike],
        store: UsageStore | None = None,
        refresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, budget in budgets.items():
            if budget.period not in PERIODS:
                raise ValueError(f"keys.{name}.budget.period must be one of {', '.join(PERIODS)}")
        if not refresh_s > 0:
            raise ValueError(f"budgets.refresh_s must be > 0, got {refresh_s!r}")
        self.store = store
        self.refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._states = {name: _State(budget) for name, budget in budgets.items()}

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._states

    def check(self, key_id: str | None) -> Refusal | None:
        """Admit one request of `key_id` now (counted for rpm), or say why not."""
        state = self._states.get(key_id) if key_id is not None else None
        if state is None:
            return None
        now = self._clock()
        self._refresh(key_id, state, now)  # type: ignore[arg-type]
        budget = state.budget
        with self._lock:
            end = _period_end(budget.period, now)
            if budget.cost is not None and state.stored_cost + state.local_cost >= budget.cost:
                return Refusal("cost", end)
            tokens = state.stored_tokens + state.local_tokens
            if budget.tokens is not None and tokens >= budget.tokens:
                return Refusal("tokens", end)
            admitted = state.admitted
            while admitted and admitted[0] <= now - 60.0:
                admitted.popleft()
            if budget.rpm is not None and len(admitted) >= budget.rpm:
                return Refusal("rpm", admitted[0] + 60.0)
            admitted.append(now)
        return None

    def record(self, event: UsageEvent) -> None:
        """Count `event`'s spend for its key (a `UsageLog` listener)."""
        state = self._states.get(event.key_id) if event.key_id is not None else None
        if state is None:
            return
        tokens = (event.input_tokens or 0) + (event.output_tokens or 0)
        with self._lock:
            if (
                state.start is not None
                and period_start(state.budget.period, event.started_at) < state.start
            ):
                return  # a request of the last period ending in this one
            state.local_cost += event.cost or 0.0
            state.local_tokens += tokens

    def _refresh(self, key_id: str, state: _State, now: float) -> None:
        start = period_start(state.budget.period, now)
        with self._lock:
            new_period = start != state.start
            if not new_period and now < state.next_refresh:
                return
            # Claimed before the query, so one thread re-reads while the rest go on.
            state.next_refresh = now + self.refresh_s
        cost, tokens = 0.0, 0
        if self.store is not None:
            try:
                for total in self.store.totals("key_id", since=start):
                    if total.key == key_id:
                        # A float beside this process's own float spend; the
                        # store's exact sum is for reports, a budget check needs no more.
                        cost = float(total.cost or 0)
                        tokens = total.input_tokens + total.output_tokens
            except Exception:
                if not new_period:
                    return  # a store down: the last total and the local spend still count
        with self._lock:
            if new_period:
                state.start = start
                state.local_cost, state.local_tokens = 0.0, 0
            if self.store is not None:
                # The store now holds what this process recorded: counted once.
                state.stored_cost, state.stored_tokens = cost, tokens
                state.local_cost, state.local_tokens = 0.0, 0
            state.refreshed_at = now

    def report(self) -> list[dict[str, Any]]:
        """Each budgeted key's limits, spend and what is left (never the key itself)."""
        out = []
        now = self._clock()
        for name, state in sorted(self._states.items()):
            self._refresh(name, state, now)
            budget = state.budget
            with self._lock:
                while state.admitted and state.admitted[0] <= now - 60.0:
                    state.admitted.popleft()
                spent: dict[str, Any] = {
                    "cost": state.stored_cost + state.local_cost,
                    "tokens": state.stored_tokens + state.local_tokens,
                    "requests_last_minute": len(state.admitted),
                }
                refreshed_at = state.refreshed_at
            limits = {"cost": budget.cost, "tokens": budget.tokens, "rpm": budget.rpm}
            left = {
                "cost": None if budget.cost is None else max(budget.cost - spent["cost"], 0.0),
                "tokens": None
                if budget.tokens is None
                else max(budget.tokens - spent["tokens"], 0),
                "rpm": None
                if budget.rpm is None
                else max(budget.rpm - spent["requests_last_minute"], 0),
            }
            out.append(
                {
                    "key": name,
                    "period": budget.period,
                    "limits": limits,
                    "spent": spent,
                    "left": left,
                    "refreshed_at": refreshed_at,
                }
            )
        return out


def _period_end(period: str, now: float) -> float:
    start = period_start(period, now)
    if period == "day":
        end = start + datetime.timedelta(days=1)
    elif period == "week":
        end = start + datetime.timedelta(days=7)
    else:
        end = (start.replace(day=28) + datetime.timedelta(days=4)).replace(day=1)
    return _unix(end)
