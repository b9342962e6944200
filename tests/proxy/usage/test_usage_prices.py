"""Prices: which entry names a request's model, what the request cost, and the exact sums
`llmchat usage` reports on SQLite and the real PostgreSQL."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest

from llmchat.proxy.routing.config import Price
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.money import MAX_NANOS
from llmchat.proxy.usage.prices import PriceTable, cost_nanos, cost_of, exact_cost
from llmchat.proxy.usage.sinks import UsageLog
from llmchat.proxy.usage.store import combined

from ...support.usage import event

PRICES = {
    "claude-*": Price(input=2.0, output=8.0),
    "claude-big": Price(input=4.0, output=16.0, cache_read=0.5, cache_write=5.0),
    "local-*": Price(input=0.0, output=0.0),
}

TOKENS: dict[str, Any] = {
    "input_tokens": 1000,
    "cached_tokens": 400,
    "cache_write_tokens": 100,
    "output_tokens": 50,
}


@pytest.mark.parametrize(
    ("price", "expected"),
    [
        # 500 fresh, 400 read, 100 written, 50 out; each price as the decimal it is written as.
        (Price(input=4.0, output=16.0, cache_read=0.5, cache_write=5.0), "0.003500000"),
        (Price(input=3, output=15, cache_read=0.3, cache_write=3.75), "0.002745000"),
        (Price(input=0.075, output=0.3, cache_read=0.01875), "0.000067500"),
        (Price(input=1.25, output=10.0, cache_read=0.125, cache_write=1.5625), "0.001331250"),
        (Price(input=0.1, output=0.2, cache_read=0.1, cache_write=0.3), "0.000130000"),
    ],
)
def test_event_cost_is_tokens_times_price_exactly(price: Price, expected: str) -> None:
    e = event(**TOKENS)
    cost = exact_cost(price, e)
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    by_hand = sum(
        n * Decimal(repr(float(p)))
        for n, p in ((500, price.input), (400, read), (100, write), (50, price.output))
    ) / Decimal(10**6)
    assert cost == by_hand == Decimal(expected)
    nanos = cost_nanos(price, e)
    assert nanos == int(Decimal(expected) * 10**9)
    assert cost_of(price, e) == nanos / 10**9  # the float is the exact amount's nearest


def test_one_token_at_a_sub_nano_price_rounds_half_to_even() -> None:
    # 0.0005 per million: a token costs 0.5 nano-units.
    price = Price(input=0.0005, output=0.0015)
    assert [cost_nanos(price, event(input_tokens=n, output_tokens=0)) for n in (1, 3, 5)] == [
        0,  # 0.5 -> 0
        2,  # 1.5 -> 2
        2,  # 2.5 -> 2
    ]
    assert exact_cost(price, event(input_tokens=1, output_tokens=1)) == Decimal("2E-9")
    assert cost_nanos(price, event(input_tokens=1, output_tokens=1)) == 2


def test_a_float_price_counts_as_the_decimal_it_is_written_as() -> None:
    # 0.1 + 0.2 in binary is 0.30000000000000004; as decimals it is 0.3.
    e = event(input_tokens=1_000_000, output_tokens=1_000_000)
    assert exact_cost(Price(input=0.1, output=0.2), e) == Decimal("0.3")
    assert cost_of(Price(input=0.1, output=0.2), e) == 0.3


def test_cache_prices_default_to_the_input_price() -> None:
    e = event(**TOKENS)
    assert exact_cost(Price(input=2.0, output=8.0), e) == Decimal("0.0024")


def test_no_tokens_counted_is_no_cost() -> None:
    assert cost_of(Price(input=2.0, output=8.0), event()) is None
    assert exact_cost(Price(input=2.0, output=8.0), event()) is None


def test_a_cost_past_a_billion_units_is_no_cost() -> None:
    # Not a BIGINT of nanos: recorded as unpriced, never an overflow in the store.
    assert cost_nanos(Price(input=1e12, output=0.0), event(input_tokens=10**6)) is None
    assert cost_nanos(Price(input=1e9, output=0.0), event(input_tokens=10**6)) == MAX_NANOS


def test_exact_name_before_glob_and_model_before_alias() -> None:
    table = PriceTable(PRICES)
    assert table.price_for("claude-big") is PRICES["claude-big"]
    assert table.price_for("claude-small") is PRICES["claude-*"]
    assert table.price_for("unknown", "claude-big") is PRICES["claude-big"]
    assert table.price_for("gpt-4o", None) is None
    e = event(model="gpt-4o", alias="claude-*", input_tokens=10, output_tokens=1)
    assert table.cost(e) == 0.000028


def test_an_unpriced_model_costs_none() -> None:
    e = event(model="gpt-4o", input_tokens=10, output_tokens=1)
    assert PriceTable(PRICES).cost(e) is None


def test_a_price_that_is_not_a_number_names_the_field() -> None:
    with pytest.raises(TypeError, match=r"prices\.m\.input"):
        PriceTable({"m": Price(input="1", output=1.0)})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"prices\.m\.cache_read"):
        PriceTable({"m": Price(input=1.0, output=1.0, cache_read=float("nan"))})
    with pytest.raises(ValueError, match=r"prices\.m\.output"):
        PriceTable({"m": Price(input=1.0, output=-1.0)})


def test_emit_sets_the_cost_before_the_sinks_and_listeners_see_it() -> None:
    seen: list[object] = []
    heard: list[object] = []
    log = UsageLog(lambda d: seen.append(d["cost"]))
    log.prices = PriceTable(PRICES)
    log.listeners = [lambda e: heard.append(e.cost)]
    log.emit(event(model="claude-x", input_tokens=100, output_tokens=10))
    assert seen == heard == [0.00028]


def test_usage_totals_sum_costs_exactly(target: str) -> None:
    table = PriceTable(PRICES)
    store = open_store(target)
    day = datetime.datetime(2026, 3, 2, 12, tzinfo=datetime.timezone.utc).timestamp()
    expected: dict[str, Decimal] = {}
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
            price = table.price_for(e.model)
            assert price is not None
            cost = exact_cost(price, e)
            assert cost is not None and Decimal(repr(e.cost)) == cost
            expected[key] = expected.get(key, Decimal(0)) + cost
            store.record(e)
        unpriced = event("none", model="gpt-4o", key_id="k9", input_tokens=5, started_at=day)
        table.fill(unpriced)
        store.record(unpriced)
        by_key = {t.key: t.cost for t in store.totals("key_id")}
        assert by_key.pop("k9") is None  # an unpriced model's rows: no cost, not 0
        assert by_key == expected
        days = store.totals("day")
        assert sum(t.cost or 0 for t in days) == sum(expected.values())
        assert combined(days).cost == sum(expected.values())
    finally:
        store.close()
