"""The routing columns (node, tier, alias), cached prompt tokens and exact costs in the SQL stores.

Each case runs on a fresh SQLite file and a fresh database of the real
PostgreSQL the suite uses. A table schema version 1 made (the previous
llmchat's, its DDL written out as it was in `V1_COLUMNS`) gets the new columns when a
store opens it: once, keeping its rows, also when several processes open it
at the same moment. A version 3 table (costs as floats only) gets ``cost_nanos``,
and its rows' costs still sum, exactly, to their decimal values.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from llmchat.cli import main
from llmchat.proxy.usage import UsageLog
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.sql import ADDED_COLUMNS, COLUMNS, SCHEMA_VERSION, TABLE

from ...support.usage import (
    V1_COLUMNS,
    event,
    make_old_schema,
    race_processes,
    raw_sql,
    schema_versions,
)

ROUTED = [
    event("r1", model="coder", node="gpu-a", tier=0, alias="coder", input_tokens=100,
          cached_tokens=90, output_tokens=5, started_at=1_780_000_000.0),
    event("r2", model="coder", node="gpu-b", tier=0, alias="coder", input_tokens=100,
          cached_tokens=0, output_tokens=5, started_at=1_780_000_001.0),
    event("r3", model="claude-x", node="gpu-a", tier=1, alias="claude-*", input_tokens=40,
          cached_tokens=None, output_tokens=2, started_at=1_780_000_002.0),
    event("r4", model="other", started_at=1_780_000_003.0),  # not routed
]  # fmt: skip


def _make_version_1(target: str) -> None:
    """The tables llmchat's schema version 1 made, with one row it recorded."""
    make_old_schema(
        target,
        V1_COLUMNS,
        [1],
        (
            f"INSERT INTO {TABLE} (request_id, face, route, model, stream, status, ok, "
            "duration_ms, input_tokens, output_tokens, content_bytes, started_at, day) "
            "VALUES ('old', 'ollama', '/api/chat', 'm', ?, 200, ?, 1.0, 7, 3, 0, "
            "1780000000.0, '2026-05-28')",
            (False, True),
        ),
    )


def test_the_routing_fields_and_cached_tokens_are_columns(target: str) -> None:
    store = open_store(target)
    try:
        for item in ROUTED:
            store.record(item)
        by_node = {
            t.key: (t.requests, t.input_tokens, t.cached_tokens) for t in store.totals("node")
        }
        assert by_node == {"gpu-a": (2, 140, 90), "gpu-b": (1, 100, 0), None: (1, 0, 0)}
        by_alias = {t.key: t.requests for t in store.totals("alias")}
        assert by_alias == {"coder": 2, "claude-*": 1, None: 1}
        [model] = [t for t in store.totals("model") if t.key == "coder"]
        assert (model.cached_tokens, model.output_tokens) == (90, 10)
        with store.connection() as conn:
            rows = store._execute(
                conn, f"SELECT request_id, node, tier, alias, cached_tokens FROM {TABLE}"
            )
        assert sorted(tuple(r) for r in rows) == [
            ("r1", "gpu-a", 0, "coder", 90),
            ("r2", "gpu-b", 0, "coder", 0),  # 0 is a measured zero: kept
            ("r3", "gpu-a", 1, "claude-*", None),  # not reported: NULL, never 0
            ("r4", None, None, None, None),
        ]
    finally:
        store.close()


def test_a_version_1_table_gets_the_new_columns_and_keeps_its_rows(target: str) -> None:
    _make_version_1(target)
    store = open_store(target)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        store.record(ROUTED[0])
        with store.connection() as conn:
            rows = store._execute(
                conn,
                f"SELECT request_id, input_tokens, node, tier, alias, cached_tokens FROM {TABLE}",
            )
        assert sorted(tuple(r) for r in rows) == [
            ("old", 7, None, None, None, None),  # recorded before: routing not known
            ("r1", 100, "gpu-a", 0, "coder", 90),
        ]
        assert {t.key: t.requests for t in store.totals("node")} == {"gpu-a": 1, None: 1}
    finally:
        store.close()
    again = open_store(target)  # idempotent: nothing left to add, the version recorded once
    again.close()
    assert schema_versions(target) == [1, SCHEMA_VERSION]


_OPENER = """
import sys
from llmchat.proxy.usage import UsageEvent
from llmchat.proxy.usage.backend import open_store
target, worker = sys.argv[1], sys.argv[2]
sys.stdin.readline()  # the go signal: every process opens (and upgrades) at once
store = open_store(target)
store.record(UsageEvent(request_id=worker, face="openai", route="/v1/chat/completions",
                        node=worker, cached_tokens=1))
store.close()
print("done", flush=True)
"""


def test_concurrent_openers_upgrade_a_version_1_table_once(target: str) -> None:
    _make_version_1(target)
    openers = 4
    race_processes(_OPENER, [[target, f"p{n}"] for n in range(openers)])
    assert schema_versions(target) == [1, SCHEMA_VERSION]
    store = open_store(target)
    try:
        totals = store.totals("node")
        assert [(t.key, t.requests, t.cached_tokens) for t in totals] == [
            *[(f"p{n}", 1, 1) for n in range(openers)],
            (None, 1, 0),  # version 1's row
        ]
        with store.connection() as conn:
            names = store._column_names(conn)
        assert set(COLUMNS) | {"id"} == {name.lower() for name in names}
        assert set(ADDED_COLUMNS) <= set(COLUMNS)
    finally:
        store.close()


def test_the_report_groups_by_node_and_alias(
    target: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(target)
    for item in ROUTED:
        store.record(item)
    store.close()
    log = tmp_path / "usage.jsonl"
    sink = UsageLog(log)
    for item in ROUTED:
        sink.emit(item)
    outs = []
    for source in (["--db", target], ["--log", str(log)]):
        assert main(["usage", *source, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    for out in outs:
        assert out["total"]["cached_tokens"] == 90
        assert [(r["node"], r["requests"], r["cached_tokens"]) for r in out["by_node"]] == [
            ("gpu-a", 2, 90),
            ("gpu-b", 1, 0),
            (None, 1, 0),
        ]
        assert [(r["alias"], r["requests"]) for r in out["by_alias"]] == [
            ("claude-*", 1),
            ("coder", 2),
            (None, 1),
        ]
    assert main(["usage", "--db", target]) == 0
    text = capsys.readouterr().out.splitlines()
    heads = [line.split()[:2] for line in text if line.startswith("per ")]
    assert ["per", "node"] in heads and ["per", "alias"] in heads
    assert ["gpu-a", "2", "2", "0", "140", "90", "7", "0", "0.000", "-"] in [
        line.split() for line in text
    ]


_V3_ADDED = (
    "node TEXT, tier INTEGER, alias TEXT, cached_tokens BIGINT, cache_write_tokens BIGINT, "
    "reasoning_tokens BIGINT, cost DOUBLE PRECISION"
)
"""What schema versions 2 and 3 added to version 1's columns (cost a float, no cost_nanos)."""

_V3_INSERT = (
    f"INSERT INTO {TABLE} (request_id, face, route, model, stream, status, ok, duration_ms, "
    "input_tokens, output_tokens, content_bytes, started_at, day, key_id, cost) "
    "VALUES (?, 'ollama', '/api/chat', 'm', ?, 200, ?, 1.0, 7, 3, 0, 1780000000.0, "
    "'2026-05-28', 'key_old', ?)"
)


def _make_version_3(target: str) -> None:
    """The tables llmchat's schema version 3 made, with rows it recorded (float costs)."""
    # A float sum's artefact and a small cost: each is its decimal to 1e-9.
    make_old_schema(
        target, f"{V1_COLUMNS}, {_V3_ADDED}", [1, 3], (_V3_INSERT, ("old1", False, True, 0.1 + 0.2))
    )
    raw_sql(
        target,
        [(_V3_INSERT, ("old2", False, True, 7.5e-05)), (_V3_INSERT, ("old3", False, True, None))],
    )


def test_a_version_3_table_gets_cost_nanos_and_its_float_costs_sum_exactly(target: str) -> None:
    _make_version_3(target)
    store = open_store(target)
    try:
        assert store.schema_version() == SCHEMA_VERSION == 4
        store.record(event("new", model="m", key_id="key_old", cost=0.000125, input_tokens=1))
        # A version 3 writer still running (it checked the version when it opened): no nanos.
        raw_sql(target, [(_V3_INSERT, ("old4", False, True, 1.1))])
        [total] = store.totals("key_id")
        assert total.requests == 5
        assert total.cost == Decimal("0.3") + Decimal("0.000075") + Decimal("0.000125") + Decimal(
            "1.1"
        )
        assert total.as_dict()["cost"] == "1.400200000"
        rows = raw_sql(target, [(f"SELECT request_id, cost_nanos FROM {TABLE}", ())])
        assert sorted(tuple(r) for r in rows) == [
            ("new", 125_000),
            ("old1", None),  # not rewritten: summed from its float
            ("old2", None),
            ("old3", None),
            ("old4", None),
        ]
    finally:
        store.close()
    assert schema_versions(target) == [1, 3, SCHEMA_VERSION]
