"""Exact cost sums and time windows, the same from SQLite, PostgreSQL and the JSON-lines log.

A thousand events at awkward per-million prices (0.075, 0.3, 1.25, 3.75, and a
1.5625 that makes events round): every sum `llmchat usage` reports, per key,
model, node, day, ISO week and month, is the oracle's exact Decimal sum, digit
for digit. Weeks and months are checked across year ends, 2026-W53 among them.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from llmchat.cli import main
from llmchat.proxy.usage import UsageEvent, UsageLog
from llmchat.proxy.usage.backend import open_store

from ...support.usage import event, fresh_target
from .support import exact_sums, priced_events

EVENTS = priced_events(1000)


def _utc(e: UsageEvent) -> datetime.date:
    return datetime.datetime.fromtimestamp(e.started_at, datetime.timezone.utc).date()


def _week(e: UsageEvent) -> str:
    year, week, _ = _utc(e).isocalendar()
    return f"{year}-W{week:02d}"


GROUP_OF: dict[str, Callable[[UsageEvent], str | None]] = {
    "key_id": lambda e: e.key_id,
    "model": lambda e: e.model,
    "node": lambda e: e.node,
    "day": lambda e: _utc(e).isoformat(),
    "week": _week,
    "month": lambda e: _utc(e).strftime("%Y-%m"),
}


def _source(kind: str, tmp_path: Path, events: list[UsageEvent]) -> list[str]:
    """`llmchat usage` arguments naming a source of `kind` that holds `events`."""
    if kind == "log":
        path = tmp_path / "usage.jsonl"
        log = UsageLog(path)
        for item in events:
            log.emit(item)
        return ["--log", str(path)]
    target = fresh_target(kind, tmp_path)
    store = open_store(target)
    try:
        for item in events:
            store.record(item)
    finally:
        store.close()
    return ["--db", target]


def _report(source: list[str], capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    assert main(["usage", *source, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _costs(rows: list[dict[str, Any]], by: str) -> dict[Any, Decimal | None]:
    return {r[by]: None if r["cost"] is None else Decimal(r["cost"]) for r in rows}


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "log"])
def test_a_thousand_awkwardly_priced_events_sum_exactly(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _source(kind, tmp_path, EVENTS)
    out = _report(source, capsys, "--by", ",".join(GROUP_OF))
    whole = exact_sums(EVENTS, lambda e: "all")["all"]
    assert whole is not None and whole.as_tuple().exponent == -9
    # Not a float's digits: the sum has nine decimals that a float sum would not keep.
    assert Decimal(out["total"]["cost"]) == whole
    assert out["total"]["requests"] == len(EVENTS)
    for by, key in GROUP_OF.items():
        assert _costs(out[f"by_{by}"], by) == exact_sums(EVENTS, key), by
    assert _costs(out["by_model"], "model")["unpriced"] is None
    # The text table prints the same exact text.
    assert main(["usage", *source, "--by", "key"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    [total] = [cells for cells in lines if cells[:1] == ["total"]]
    assert total[1:4] == [str(out["total"][c]) for c in ("requests", "ok", "failed")]
    assert total[-1] == out["total"]["cost"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_store_gives_decimal_totals(kind: str, tmp_path: Path) -> None:
    target = fresh_target(kind, tmp_path)
    store = open_store(target)
    try:
        for item in EVENTS[:200]:
            store.record(item)
        expected = exact_sums(EVENTS[:200], GROUP_OF["node"])
        totals = store.totals("node")
        assert {t.key: t.cost for t in totals} == expected
        assert all(isinstance(t.cost, Decimal) for t in totals)
        assert {t.key: t.cost_nanos for t in totals} == {
            k: None if v is None else int(v * 10**9) for k, v in expected.items()
        }
    finally:
        store.close()


def _year_ends() -> list[UsageEvent]:
    """One event at noon on each day from Dec 20 to Jan 10 of five year ends."""
    out = []
    for year in (2020, 2024, 2026, 2027, 2032):
        day = datetime.date(year, 12, 20)
        while day <= datetime.date(year + 1, 1, 10):
            noon = datetime.datetime(day.year, day.month, day.day, 12, tzinfo=datetime.timezone.utc)
            out.append(event(f"d{day}", started_at=noon.timestamp()))
            day += datetime.timedelta(days=1)
    return out


YEAR_ENDS = _year_ends()


def _counts(
    events: list[UsageEvent], key: Callable[[UsageEvent], str | None]
) -> dict[str | None, int]:
    counts: dict[str | None, int] = {}
    for e in events:
        counts[key(e)] = counts.get(key(e), 0) + 1
    return counts


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "log"])
def test_iso_weeks_and_months_across_year_ends(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _source(kind, tmp_path, YEAR_ENDS)
    out = _report(source, capsys, "--by", "week,month")
    weeks = {r["week"]: r["requests"] for r in out["by_week"]}
    assert weeks == _counts(YEAR_ENDS, _week)
    # The edges, spelled out: 2027-01-01..03 are in 2026's 53rd week; 2024-12-30 in 2025-W01.
    assert weeks["2026-W53"] == 7 and weeks["2027-W01"] == 7 and weeks["2025-W01"] == 7
    assert weeks["2020-W53"] == 7 and "2024-W53" not in weeks and "2027-W53" not in weeks
    assert [r["week"] for r in out["by_week"]] == sorted(weeks)
    months = {r["month"]: r["requests"] for r in out["by_month"]}
    assert months == _counts(YEAR_ENDS, GROUP_OF["month"]) and months["2026-12"] == 12
    assert set(out) >= {"by_week", "by_month"} and "by_model" not in out
    # A window and a grouping combine: the days of 2026's last week.
    window = _report(
        source, capsys, "--by", "week", "--since", "2026-12-28", "--until", "2027-01-03"
    )
    assert [(r["week"], r["requests"]) for r in window["by_week"]] == [("2026-W53", 7)]
    assert main(["usage", *source, "--by", "week,month"]) == 0
    text = capsys.readouterr().out.splitlines()
    heads = [line.split()[:3] for line in text if line.startswith("per ")]
    assert heads == [["per", "ISO", "week"], ["per", "month", "(UTC)"]]
    assert ["2026-W53", "7"] in [line.split()[:2] for line in text]


def test_an_unknown_grouping_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["usage", "--log", "x.jsonl", "--by", "week,fortnight"])
    assert exited.value.code == 2 and "not a grouping: 'fortnight'" in capsys.readouterr().err
