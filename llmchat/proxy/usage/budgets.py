"""What each client key may spend, and whether it still may: per-key budgets.

A budget limits a key's cost and tokens per UTC period (day, week from
Monday, month) and its requests per minute. The check runs before the
upstream call and admits a request while, for the key,

    the usage store's total for the period, as of its last re-read,
    + what this process's own requests spent since that re-read began

is below each limit. The store is the truth across workers and hosts; it is
re-read at most every ``refresh_s`` seconds (one request thread re-reads
while the others go on with the last total), and on every check with
``refresh_s: 0``. This process's own spend is counted as each request's usage
event is emitted, which is after the store has the event (`UsageLog.emit`
writes the store first), so an event is never missed between the two.

How far past a cost or token limit a key may go. A request's size is known
only when it ends (nothing is reserved), so the spend past the limit is at
most what these requests spend:

1. the key's requests in flight anywhere (admitted, not yet in the store)
   when the store's total crossed the limit; and
2. the requests other processes admitted after that, before a re-read
   showed them the crossing: at most ``refresh_s`` (plus one read) later.

With ``refresh_s: 0`` the second set is empty, and the overshoot is below
(the key's concurrent requests) x (the largest one's spend). Whatever
``refresh_s``, each process always counts its own spend, so across P
processes a key spends less than P x the limit plus its in-flight requests
even if no re-read ever lands. A store that cannot be read keeps its last
total (plus the local spend). Without a store each process counts only its
own spend (the limit then applies per process).

``rpm`` is a sliding minute per process: across P processes a key gets at
most P x rpm requests in any minute.
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
    counted_cost: float = 0.0
    """This process's spend in the period, as its events were emitted (only grows)."""
    counted_tokens: int = 0
    covered_cost: float = 0.0
    """The part of `counted_cost` the stored total already holds."""
    covered_tokens: int = 0
    reads: int = 0
    """Re-reads begun; the one applied last is `applied`, and an older one is dropped."""
    applied: int = 0
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
        if not refresh_s >= 0:
            raise ValueError(f"budgets.refresh_s must be >= 0, got {refresh_s!r}")
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
            cost, tokens = _spent(state)
            if budget.cost is not None and cost >= budget.cost:
                return Refusal("cost", end)
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
            state.counted_cost += event.cost or 0.0
            state.counted_tokens += tokens

    def _refresh(self, key_id: str, state: _State, now: float) -> None:
        start = period_start(state.budget.period, now)
        with self._lock:
            new_period = start != state.start
            if not new_period and now < state.next_refresh:
                return
            # Claimed before the query, so one thread re-reads while the rest go on.
            state.next_refresh = now + self.refresh_s
            if new_period:
                # The last period's spend no longer counts, whatever the read finds.
                state.start = start
                state.stored_cost, state.stored_tokens = 0.0, 0
                state.counted_cost, state.counted_tokens = 0.0, 0
                state.covered_cost, state.covered_tokens = 0.0, 0
            # Every event counted so far is in the store already (it is written before
            # the listeners run), so the read below holds it: counted once. One counted
            # after this point may be in it too; it is then counted twice until the next
            # read, which errs towards refusing.
            state.reads += 1
            read = state.reads
            covered = state.counted_cost, state.counted_tokens
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
            if self.store is not None and read > state.applied and start == state.start:
                # A read begun later than the one applied covers more of the local
                # spend; an earlier one finishing late is dropped.
                state.applied = read
                state.stored_cost, state.stored_tokens = cost, tokens
                state.covered_cost, state.covered_tokens = covered
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
                cost, tokens = _spent(state)
                spent: dict[str, Any] = {
                    "cost": cost,
                    "tokens": tokens,
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


def _spent(state: _State) -> tuple[float, int]:
    """The key's spend as this process sees it: the stored total plus its own since."""
    cost = state.stored_cost + state.counted_cost - state.covered_cost
    return cost, state.stored_tokens + state.counted_tokens - state.covered_tokens


def _period_end(period: str, now: float) -> float:
    start = period_start(period, now)
    if period == "day":
        end = start + datetime.timedelta(days=1)
    elif period == "week":
        end = start + datetime.timedelta(days=7)
    else:
        end = (start.replace(day=28) + datetime.timedelta(days=4)).replace(day=1)
    return _unix(end)
