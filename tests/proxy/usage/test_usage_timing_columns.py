"""Schema version 4: the time to first byte and the admission wait, as columns of both stores.

Each case runs on a fresh SQLite file and a fresh database of the real
PostgreSQL the suite uses. A table schema version 3 made (its DDL written out
here as it was) gets ``ttfb_ms`` and ``wait_ms`` when a store opens it, keeping
its rows (NULL in the new columns: not recorded), the version recorded once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.cli import main
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.sql import SCHEMA_VERSION, TABLE

from ...support.usage import V1_COLUMNS, event, make_old_schema, schema_versions

V3_COLUMNS = (
    V1_COLUMNS + ", node TEXT, tier INTEGER, alias TEXT, cached_tokens BIGINT, "
    "cache_write_tokens BIGINT, reasoning_tokens BIGINT, cost DOUBLE PRECISION"
)
"""Schema version 3's columns (version 2's added node, tier, alias, cached_tokens; 3 the rest)."""

TIMED = event("new", model="m", node="gpu-a", alias="m", input_tokens=10, output_tokens=2,
              ttfb_ms=12.5, wait_ms=0.25, started_at=1_780_000_100.0)  # fmt: skip


def _make_version_3(target: str) -> None:
    """The tables llmchat's schema version 3 made (upgraded from 1), with one row."""
    make_old_schema(
        target,
        V3_COLUMNS,
        [1, 3],
        (
            f"INSERT INTO {TABLE} (request_id, face, route, model, stream, status, ok, "
            "duration_ms, input_tokens, output_tokens, content_bytes, started_at, day, "
            "node, alias, cost) VALUES ('old', 'openai', '/v1/chat/completions', 'm', ?, "
            "200, ?, 40.0, 7, 3, 0, 1780000000.0, '2026-05-28', 'gpu-a', 'm', 0.5)",
            (True, True),
        ),
    )


def test_a_version_3_table_gets_the_timing_columns_and_keeps_its_rows(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _make_version_3(target)
    store = open_store(target)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        store.record(TIMED)
        with store.connection() as conn:
            rows = store._execute(
                conn, f"SELECT request_id, node, cost, ttfb_ms, wait_ms FROM {TABLE}"
            )
        assert sorted(tuple(r) for r in rows) == [
            ("new", "gpu-a", None, 12.5, 0.25),
            ("old", "gpu-a", 0.5, None, None),  # recorded before: its timings not known
        ]
        [node] = store.totals("node")
        assert (node.key, node.requests, node.input_tokens, node.cost) == ("gpu-a", 2, 17, 0.5)
    finally:
        store.close()
    again = open_store(target)  # idempotent: nothing left to add, the version recorded once
    again.close()
    assert schema_versions(target) == [1, 3, SCHEMA_VERSION]
    assert main(["usage", "--db", target, "--json"]) == 0
    report: Any = json.loads(capsys.readouterr().out)
    assert report["total"]["requests"] == 2


def test_a_fresh_store_round_trips_the_timings(target: str) -> None:
    store = open_store(target)
    try:
        store.record(TIMED)
        store.record(event("untimed", started_at=1_780_000_101.0))
        with store.connection() as conn:
            rows = store._execute(conn, f"SELECT request_id, ttfb_ms, wait_ms FROM {TABLE}")
        assert sorted(tuple(r) for r in rows) == [("new", 12.5, 0.25), ("untimed", None, None)]
    finally:
        store.close()
