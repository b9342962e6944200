"""Budgets: the UTC period arithmetic, and the accounting with an injected clock."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmchat.proxy.routing.config import Budget
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.budgets import Budgets, period_start
from llmchat.proxy.usage.sinks import UsageLog

from ...support.usage import event


def _at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    utc = datetime.timezone.utc
    return datetime.datetime(year, month, day, hour, minute, second, tzinfo=utc).timestamp()


@pytest.mark.parametrize(
    ("period", "when", "start"),
    [
        ("day", _at(2026, 3, 4, 0, 0, 0), datetime.date(2026, 3, 4)),
        ("day", _at(2026, 3, 4, 23, 59, 59), datetime.date(2026, 3, 4)),
        ("week", _at(2026, 3, 2, 0, 0, 0), datetime.date(2026, 3, 2)),  # a Monday
        ("week", _at(2026, 3, 8, 23, 59, 59), datetime.date(2026, 3, 2)),  # its Sunday
        ("week", _at(2026, 1, 1, 12), datetime.date(2025, 12, 29)),  # across a year
        ("month", _at(2026, 2, 28, 23, 59, 59), datetime.date(2026, 2, 1)),
        ("month", _at(2026, 3, 1), datetime.date(2026, 3, 1)),
    ],
)
def test_periods_start_on_utc_days(period: str, when: float, start: datetime.date) -> None:
    assert period_start(period, when) == start


def test_an_unknown_period_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"keys\.alice\.budget\.period"):
        Budgets({"alice": Budget(period="year", tokens=1)})


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_tokens_then_a_new_period_without_a_store() -> None:
    clock = Clock(_at(2026, 3, 4, 23, 0))
    budgets = Budgets({"alice": Budget(period="day", tokens=100)}, clock=clock)
    assert budgets.check("alice") is None
    budgets.record(event(key_id="alice", input_tokens=60, output_tokens=40, started_at=clock.now))
    refusal = budgets.check("alice")
    assert refusal is not None and refusal.limit == "tokens"
    assert refusal.retry_at == _at(2026, 3, 5)
    assert budgets.check("bob") is None  # no budget: never refused
    clock.now = _at(2026, 3, 5, 0, 0, 1)
    assert budgets.check("alice") is None


def test_rpm_is_a_sliding_minute() -> None:
    clock = Clock(_at(2026, 3, 4, 12, 0))
    budgets = Budgets({"alice": Budget(rpm=2)}, clock=clock)
    assert budgets.check("alice") is None
    clock.now += 30
    assert budgets.check("alice") is None
    refusal = budgets.check("alice")
    assert refusal is not None and refusal.limit == "rpm"
    assert refusal.retry_at == _at(2026, 3, 4, 12, 1)
    clock.now = _at(2026, 3, 4, 12, 1)
    assert budgets.check("alice") is None


def test_the_store_is_reread_after_refresh_s(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "usage.db"))
    try:
        clock = Clock(_at(2026, 3, 4, 12, 0))
        budgets = Budgets({"alice": Budget(cost=1.0)}, store, refresh_s=5.0, clock=clock)
        assert budgets.check("alice") is None
        # Another process spent the budget: seen once refresh_s has passed.
        store.record(event("other", key_id="alice", input_tokens=1, cost=1.5, started_at=clock.now))
        clock.now += 4.0
        assert budgets.check("alice") is None
        clock.now += 1.0
        refusal = budgets.check("alice")
        assert refusal is not None and refusal.limit == "cost"
        [row] = budgets.report()
        assert row["key"] == "alice" and row["spent"]["cost"] == 1.5
        assert row["left"]["cost"] == 0.0 and row["refreshed_at"] == clock.now
    finally:
        store.close()


def test_the_config_refuses_a_budget_without_a_limit_or_a_cost_without_prices() -> None:
    from llmchat.proxy.routing.config_checks import config_errors

    data = {
        "nodes": [{"name": "a", "url": "http://127.0.0.1:1"}],
        "models": {"m": [{"model": "m", "nodes": ["a"]}]},
        "keys": [
            {"name": "k", "key_env": "K", "budget": {"period": "day"}},
            {"name": "j", "key_env": "J", "budget": {"cost": 1}},
        ],
    }
    assert config_errors(data) == [
        "keys[0].budget: sets no limit (cost, tokens or rpm)",
        "keys[1].budget.cost: needs `prices` (no request would ever cost anything)",
    ]
    assert config_errors({**data, "prices": {"m": {"input": 1}}}) == [
        "keys[0].budget: sets no limit (cost, tokens or rpm)"
    ]


class ReadingStore:
    """A store whose next `totals` first lets `during` run: an event landing mid-read."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.during: Callable[[], None] | None = None

    def record(self, event: Any) -> None:
        self.store.record(event)

    def describe_error(self, exc: BaseException) -> str:
        return self.store.describe_error(exc)

    def totals(self, by: str, since: Any = None, until: Any = None) -> Any:
        during, self.during = self.during, None
        if during is not None:
            during()
        return self.store.totals(by, since, until)


def test_own_spend_is_counted_once_across_re_reads(tmp_path: Path) -> None:
    # The log writes the store before the budget hears of an event, so an event the
    # read holds was counted before it began (and is covered), never lost between.
    store = ReadingStore(open_store(str(tmp_path / "usage.db")))
    try:
        clock = Clock(_at(2026, 3, 4, 12, 0))
        budgets = Budgets({"alice": Budget(tokens=100)}, store, refresh_s=5.0, clock=clock)
        log = UsageLog(None, store)  # type: ignore[arg-type]
        log.listeners.append(budgets.record)

        def spend(name: str, tokens: int) -> None:
            log.emit(event(name, key_id="alice", input_tokens=tokens, started_at=clock.now))

        spend("a", 30)
        assert budgets.check("alice") is None  # the first read: 30 stored, 30 covered
        assert budgets.report()[0]["spent"]["tokens"] == 30
        spend("b", 40)  # counted here, not yet re-read
        assert budgets.report()[0]["spent"]["tokens"] == 70
        clock.now += 5.0
        store.during = lambda: spend("c", 10)  # stored and counted while the read runs
        assert budgets.check("alice") is None
        # "c" is both in the read and counted after it began: twice, erring to refuse.
        assert budgets.report()[0]["spent"]["tokens"] == 90
        clock.now += 5.0
        assert budgets.report()[0]["spent"]["tokens"] == 80  # the next read: once
        spend("d", 20)
        refusal = budgets.check("alice")
        assert refusal is not None and refusal.limit == "tokens"
    finally:
        store.store.close()


def test_refresh_s_0_reads_the_store_on_every_check(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "usage.db"))
    try:
        clock = Clock(_at(2026, 3, 4, 12, 0))
        budgets = Budgets({"alice": Budget(tokens=10)}, store, refresh_s=0, clock=clock)
        assert budgets.check("alice") is None
        # Another process's spend, at the same instant: the next check sees it.
        store.record(event("other", key_id="alice", input_tokens=10, started_at=clock.now))
        refusal = budgets.check("alice")
        assert refusal is not None and refusal.limit == "tokens"
    finally:
        store.close()
    with pytest.raises(ValueError, match=r"budgets\.refresh_s"):
        Budgets({"alice": Budget(tokens=10)}, refresh_s=-1)
