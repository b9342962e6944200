"""The SQL both usage stores share: one row per proxied request, and totals over them.

`backend.open_store(target)` picks the store: a ``postgresql://`` URL is
`postgres.PostgresStore` (several machines sharing one database), any other
string or path is `sqlite.SqliteStore` (the embedded default; safe for several
processes on one machine). Both keep the same schema, written here once:
table ``llmchat_usage`` with a column per `UsageEvent` field plus two derived
ones: ``day`` (the UTC date of ``started_at``, so grouping by day is the same
SQL in both; weeks and months are computed from it when grouped by) and
``cost_nanos`` (``cost`` as exact integer nano-units, `money.nanos_of`), and
``llmchat_usage_schema`` holding the schema's version.

Costs are summed as ``cost_nanos``, an integer, so every sum is exact:
PostgreSQL sums BIGINT as NUMERIC (no bound); SQLite sums it as a signed
64-bit integer and fails with "integer overflow" past 9.2e18 nanos, i.e.
9.2 billion units in one group. A row without ``cost_nanos`` (written by
schema version 3, perhaps by an older llmchat still running beside this one)
counts as its float ``cost`` rounded to 1e-9 in SQL (half away from zero in
SQLite; PostgreSQL's ``round``; an exact tie cannot come from a float cost
computed from prices of at most 3 decimals).

A table an older llmchat created is brought up to date when a store opens it
(`SqlStore.upgrade`): the columns it lacks are added (nullable, so its rows
read as "not recorded"), inside the same transaction and cross-process lock
that creates a new schema, so concurrent openers add each column once.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, Generic, TypeVar

from ...errors import InvalidArgumentError, LLMChatError
from .event import UsageEvent
from .money import nanos_of
from .store import GROUPINGS, Total, time_bounds

__all__ = ["COLUMNS", "SCHEMA_VERSION", "TABLE", "VERSION_TABLE", "SqlStore"]

SCHEMA_VERSION = 4
"""Bumped when a column changes; a store refuses a database with a newer version.

1: the request's fields; 2: adds ``node``, ``tier``, ``alias`` and ``cached_tokens``;
3: adds ``cache_write_tokens``, ``reasoning_tokens`` and ``cost``; 4: adds ``cost_nanos``,
``ttfb_ms`` and ``wait_ms``."""

TABLE = "llmchat_usage"
VERSION_TABLE = "llmchat_usage_schema"

COLUMNS: tuple[str, ...] = (*(f.name for f in fields(UsageEvent)), "day", "cost_nanos")
"""The row's columns, in insert order: every event field, then the UTC day and exact cost."""

_TYPES = {
    "request_id": "TEXT NOT NULL",
    "face": "TEXT NOT NULL",
    "route": "TEXT NOT NULL",
    "model": "TEXT",
    "stream": "BOOLEAN NOT NULL",
    "status": "INTEGER NOT NULL",
    "ok": "BOOLEAN NOT NULL",
    "duration_ms": "DOUBLE PRECISION NOT NULL",
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "content_bytes": "BIGINT NOT NULL",
    "error_type": "TEXT",
    "started_at": "DOUBLE PRECISION NOT NULL",
    "key_id": "TEXT",
    "node": "TEXT",
    "tier": "INTEGER",
    "alias": "TEXT",
    "cached_tokens": "BIGINT",
    "cache_write_tokens": "BIGINT",
    "reasoning_tokens": "BIGINT",
    "cost": "DOUBLE PRECISION",
    "ttfb_ms": "DOUBLE PRECISION",
    "wait_ms": "DOUBLE PRECISION",
    "day": "TEXT NOT NULL",
    "cost_nanos": "BIGINT",
}
assert set(_TYPES) == set(COLUMNS), "every UsageEvent field needs a column type"

ADDED_COLUMNS: tuple[str, ...] = (
    "node",
    "tier",
    "alias",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost",
    "cost_nanos",
    "ttfb_ms",
    "wait_ms",
)
"""The columns schema versions 1 to 3 lack, added to such a table when a store opens it.

Nullable all (a column added to rows that exist cannot be NOT NULL without a default)."""
assert all("NOT NULL" not in _TYPES[name] for name in ADDED_COLUMNS)


_COST_NANOS = "COALESCE(cost_nanos, CAST(ROUND(cost * 1000000000) AS BIGINT))"
"""A row's exact cost: its nanos, or (a version 3 row) its float cost rounded to nanos."""


def _row(event: UsageEvent) -> tuple[Any, ...]:
    values = event.as_dict()
    values["day"] = datetime.datetime.fromtimestamp(
        event.started_at, datetime.timezone.utc
    ).strftime("%Y-%m-%d")
    values["cost_nanos"] = nanos_of(values["cost"])
    return tuple(values[name] for name in COLUMNS)


Conn = TypeVar("Conn")


class SqlStore(Generic[Conn]):
    """The SQL both stores share; a subclass says how to connect and what differs.

    Connections are pooled, not per thread: the embedded server starts a thread
    per client connection, and a connection per thread would leak one per client.
    """

    placeholder = "?"
    """The driver's parameter marker."""
    id_column = "id INTEGER PRIMARY KEY"
    """The surrogate key's DDL (request ids are the client's and need not be unique)."""
    max_idle = 8
    """Idle connections kept for reuse; more are closed when given back."""
    week_sql = ""
    """The ISO week (``2026-W53``) of the row's ``day`` (``YYYY-MM-DD`` text) in the
    subclass's SQL dialect (the databases share no ISO-week function)."""

    def __init__(self) -> None:
        self._idle: list[Conn] = []
        self._lock = threading.Lock()
        self._closed = False
        self._ready = False

    # -- what a subclass provides --------------------------------------------

    def _connect(self) -> Conn:
        raise NotImplementedError

    def _close_connection(self, conn: Conn) -> None:
        raise NotImplementedError

    def _execute(self, conn: Conn, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in its own transaction; return its rows."""
        raise NotImplementedError

    def _create_schema(self, conn: Conn, statements: Callable[[], list[str]]) -> None:
        """Run `statements()` and `upgrade`, once and serialized across processes."""
        raise NotImplementedError

    def _column_names(self, conn: Conn) -> set[str]:
        """The columns the usage table has (in the transaction `_create_schema` holds)."""
        raise NotImplementedError

    def describe_error(self, exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exc}"

    # -- the shared part -----------------------------------------------------

    def schema_statements(self) -> list[str]:
        columns = ", ".join(f"{name} {_TYPES[name]}" for name in COLUMNS)
        return [
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {TABLE} ({self.id_column}, {columns})",
            f"CREATE INDEX IF NOT EXISTS {TABLE}_started_at ON {TABLE} (started_at)",
        ]

    def upgrade(self, conn: Conn) -> None:
        """Refuse a newer schema; add the columns an older one lacks; record this version.

        Called by `_create_schema` under its cross-process lock, after the
        ``CREATE ... IF NOT EXISTS``: idempotent, and a second opener finds
        the columns there. A version's rows are kept (the history of upgrades).
        """
        rows = self._execute(conn, f"SELECT MAX(version) FROM {VERSION_TABLE}")
        found = rows[0][0] if rows else None
        if found is not None and int(found) > SCHEMA_VERSION:
            raise LLMChatError(
                f"the usage database has schema version {found}; this llmchat knows "
                f"{SCHEMA_VERSION} (upgrade llmchat)"
            )
        present = {name.lower() for name in self._column_names(conn)}
        for name in ADDED_COLUMNS:
            if name not in present:
                self._execute(conn, f"ALTER TABLE {TABLE} ADD COLUMN {name} {_TYPES[name]}")
        if found is None or int(found) < SCHEMA_VERSION:
            self._execute(
                conn,
                f"INSERT INTO {VERSION_TABLE} (version) VALUES ({self.placeholder})",
                (SCHEMA_VERSION,),
            )

    def schema_version(self) -> int:
        """The schema version the database records."""
        with self.connection() as conn:
            return int(self._execute(conn, f"SELECT MAX(version) FROM {VERSION_TABLE}")[0][0])

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A pooled connection, its schema ensured; given back after use."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the usage store is closed")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            if not self._ready:
                self._create_schema(conn, self.schema_statements)
                self._ready = True
            yield conn
        except BaseException:
            # A connection that failed mid-statement may be unusable: not reused.
            self._close_connection(conn)
            raise
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        self._close_connection(conn)

    def record(self, event: UsageEvent) -> None:
        marks = ", ".join([self.placeholder] * len(COLUMNS))
        sql = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({marks})"
        with self.connection() as conn:
            self._execute(conn, sql, _row(event))

    def totals(
        self,
        by: str,
        since: datetime.date | None = None,
        until: datetime.date | None = None,
    ) -> list[Total]:
        if by not in GROUPINGS:
            raise InvalidArgumentError(f"by must be one of {', '.join(GROUPINGS)}, got {by!r}")
        low, high = time_bounds(since, until)
        group = {"week": self.week_sql, "month": "SUBSTR(day, 1, 7)"}.get(by, by)
        where, params = [], []
        if low is not None:
            where.append(f"started_at >= {self.placeholder}")
            params.append(low)
        if high is not None:
            where.append(f"started_at < {self.placeholder}")
            params.append(high)
        sql = (
            f"SELECT {group}, COUNT(*), SUM(CASE WHEN ok THEN 1 ELSE 0 END), "
            "SUM(input_tokens), SUM(output_tokens), SUM(content_bytes), SUM(duration_ms), "
            f"SUM(cached_tokens), SUM({_COST_NANOS}) "
            f"FROM {TABLE}{' WHERE ' + ' AND '.join(where) if where else ''} GROUP BY {group}"
        )
        with self.connection() as conn:
            rows = self._execute(conn, sql, params)
        out = [_total(row) for row in rows]
        # Sorted here: the two databases order NULL differently.
        return sorted(out, key=lambda t: (t.key is None, t.key or ""))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._close_connection(conn)


def _total(row: Sequence[Any]) -> Total:
    key, requests, ok, input_tokens, output_tokens, content_bytes, duration, cached, nanos = row
    # int()/float(): PostgreSQL sums BIGINT as NUMERIC (a Decimal, exact: int() keeps it so).
    return Total(
        key=None if key is None else str(key),
        requests=int(requests),
        ok=int(ok or 0),
        failed=int(requests) - int(ok or 0),
        input_tokens=int(input_tokens or 0),
        output_tokens=int(output_tokens or 0),
        content_bytes=int(content_bytes or 0),
        duration_ms=round(float(duration or 0.0), 3),
        cached_tokens=int(cached or 0),
        cost_nanos=None if nanos is None else int(nanos),
    )
