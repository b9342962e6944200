"""Prices: which entry names a request's model, what the request cost, and the exact sums
`llmchat usage` reports on SQLite and the real PostgreSQL."""

from __future__ import annotations

import datetime

import pytest

from llmchat.proxy.routing.config import Price
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.prices import PriceTable, cost_of
from llmchat.proxy.usage.sinks import UsageLog

from ...support.usage import event

# Costs are DOUBLE PRECISION: a database adds them in its own order, so a sum
# equals the events' to the last few ulps (rel 1e-12), not bit for bit.
PRICES = {
    "claude-*": Price(input=2.0, output=8.0),
    "claude-big": Price(input=4.0, output=16.0, cache_read=0.5, cache_write=5.0),
    "local-*": Price(input=0.0, output=0.0),
}


def test_cost_counts_each_kind_of_token_at_its_price() -> None:
    price = Price(input=4.0, output=16.0, cache_read=0.5, cache_write=5.0)
    e = event(input_tokens=1000, cached_tokens=400, cache_write_tokens=100, output_tokens=50)
    assert cost_of(price, e) == (500 * 4.0 + 400 * 0.5 + 100 * 5.0 + 50 * 16.0) / 1e6


def test_cache_prices_default_to_the_input_price() -> None:
    e = event(input_tokens=1000, cached_tokens=400, cache_write_tokens=100, output_tokens=50)
    assert cost_of(Price(input=2.0, output=8.0), e) == (1000 * 2.0 + 50 * 8.0) / 1e6


def test_no_tokens_counted_is_no_cost() -> None:
    assert cost_of(Price(input=2.0, output=8.0), event()) is None


def test_exact_name_before_glob_and_model_before_alias() -> None:
    table = PriceTable(PRICES)
    assert table.price_for("claude-big") is PRICES["claude-big"]
    assert table.price_for("claude-small") is PRICES["claude-*"]
    assert table.price_for("unknown", "claude-big") is PRICES["claude-big"]
    assert table.price_for("gpt-4o", None) is None
    e = event(model="gpt-4o", alias="claude-*", input_tokens=10, output_tokens=1)
    assert table.cost(e) == (10 * 2.0 + 8.0) / 1e6


def test_an_unpriced_model_costs_none() -> None:
    e = event(model="gpt-4o", input_tokens=10, output_tokens=1)
    assert PriceTable(PRICES).cost(e) is None


def test_a_price_that_is_not_a_number_names_the_field() -> None:
    with pytest.raises(TypeError, match=r"prices\.m\.input"):
        PriceTable({"m": Price(input="1", output=1.0)})  # type: ignore[arg-type]


def test_emit_sets_the_cost_before_the_sinks_and_listeners_see_it() -> None:
    seen: list[object] = []
    heard: list[object] = []
    log = UsageLog(lambda d: seen.append(d["cost"]))
    log.prices = PriceTable(PRICES)
    log.listeners = [lambda e: heard.append(e.cost)]
    log.emit(event(model="claude-x", input_tokens=100, output_tokens=10))
    assert seen == heard == [(100 * 2.0 + 10 * 8.0) / 1e6]


def test_usage_totals_sum_costs_exactly(target: str) -> None:
    table = PriceTable(PRICES)
    store = open_store(target)
    day = datetime.datetime(2026, 3, 2, 12, tzinfo=datetime.timezone.utc).timestamp()
    expected: dict[str, float] = {}
    try:
        for i in range(40):
            key = f"k{i % 3}"
            e = event(
                f"r{i}",
                model="claude-big" if i % 2 else "claude-small",
                key_id=key,
                input_tokens=1024 * (i + 1),
                cached_tokens=256 * (i % 4),
                cache_write_tokens=128 * (i % 2),
                output_tokens=64 * (i + 3),
                started_at=day + i * 86400,
            )
            table.fill(e)
            assert e.cost is not None
            expected[key] = expected.get(key, 0.0) + e.cost
            store.record(e)
        unpriced = event("none", model="gpt-4o", key_id="k9", input_tokens=5, started_at=day)
        table.fill(unpriced)
        store.record(unpriced)
        by_key = {t.key: t.cost for t in store.totals("key_id")}
        assert by_key.pop("k9") is None  # an unpriced model's rows: no cost, not 0
        assert by_key == pytest.approx(expected, rel=1e-12)
        days = store.totals("day")
        assert sum(t.cost or 0.0 for t in days) == pytest.approx(sum(expected.values()), rel=1e-12)
    finally:
        store.close()
