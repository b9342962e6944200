"""The usage stores under test: a fresh SQLite file, or a real PostgreSQL database.

PostgreSQL comes from ``LLMCHAT_TEST_POSTGRES_URL`` (``.ci/run`` starts a
cluster and sets it); when that is unset, one throwaway cluster is started for
the whole test process (`pg_cluster`) and stopped at exit. Only when neither
works do the PostgreSQL cases skip, and the reason names what was missing.
"""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from llmchat.proxy.usage import UsageEvent
from llmchat.proxy.usage.sql import TABLE, VERSION_TABLE, SqlStore

from . import pg_cluster
from .paths import REPO_ROOT

KINDS = ["sqlite", "postgres"]

V1_COLUMNS = (
    "request_id TEXT NOT NULL, face TEXT NOT NULL, route TEXT NOT NULL, model TEXT, "
    "stream BOOLEAN NOT NULL, status INTEGER NOT NULL, ok BOOLEAN NOT NULL, "
    "duration_ms DOUBLE PRECISION NOT NULL, input_tokens BIGINT, output_tokens BIGINT, "
    "content_bytes BIGINT NOT NULL, error_type TEXT, started_at DOUBLE PRECISION NOT NULL, "
    "key_id TEXT, day TEXT NOT NULL"
)
"""Schema version 1's columns, as llmchat before the routing columns created them."""


@functools.cache
def postgres_url() -> tuple[str | None, str]:
    """(URL, how it was found) or (None, why there is none); one cluster per process."""
    url = os.environ.get("LLMCHAT_TEST_POSTGRES_URL")
    if url:
        return url, "LLMCHAT_TEST_POSTGRES_URL"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        directory, url = pg_cluster.start()
    except pg_cluster.ClusterUnavailable as exc:
        return None, f"LLMCHAT_TEST_POSTGRES_URL is unset and no cluster could be started: {exc}"
    atexit.register(pg_cluster.stop, directory)
    return url, f"a cluster started in {directory}"


def fresh_postgres() -> str:
    """The test database's URL with no usage tables in it (skips when there is none)."""
    url, why = postgres_url()
    if url is None:
        pytest.skip(f"no PostgreSQL server: {why}")
    import psycopg
    from psycopg import conninfo

    # Every case drops the usage tables: never in a database that is not a test's.
    dbname = str(conninfo.conninfo_to_dict(url).get("dbname") or "")
    if "test" not in dbname:
        pytest.fail(f"LLMCHAT_TEST_POSTGRES_URL's database {dbname!r} must have 'test' in its name")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}, {VERSION_TABLE}")
    return url


def fresh_target(kind: str, tmp_path: Path) -> str:
    """Where a new, empty store of `kind` lives."""
    if kind == "postgres":
        return fresh_postgres()
    return str(tmp_path / "usage.db")


def event(request_id: str = "req_1", **fields: Any) -> UsageEvent:
    return UsageEvent(
        **{"request_id": request_id, "face": "ollama", "route": "/api/chat", **fields}
    )


class NotifyingStore:
    """A store that counts what it recorded, so a test can wait for the proxy's rows."""

    def __init__(self, store: SqlStore[Any]) -> None:
        self.store = store
        self.recorded = 0
        self._cond = threading.Condition()

    def record(self, event: UsageEvent) -> None:
        self.store.record(event)
        with self._cond:
            self.recorded += 1
            self._cond.notify_all()

    def describe_error(self, exc: BaseException) -> str:
        return self.store.describe_error(exc)

    def wait(self, n: int, timeout: float = 10.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.recorded >= n, timeout):
                raise AssertionError(f"expected {n} stored events, got {self.recorded}")


def race_processes(script: str, argvs: list[list[str]]) -> None:
    """Run ``python -c script *argv`` once per `argvs` entry, all released at the same moment.

    Each process is started and waits for a line on stdin, so none starts its
    work before every one is up; each must print ``done`` and exit 0.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env=env,
        )
        for argv in argvs
    ]
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert (process.returncode, out.strip()) == (0, "done"), err


def make_old_schema(
    target: str, columns: str, versions: Sequence[int], row: tuple[str, tuple[Any, ...]]
) -> None:
    """The tables an older llmchat made on `target`: its `columns` (DDL), the schema
    `versions` it recorded, and one `row` it inserted (SQL and parameters)."""
    surrogate = (
        "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        if target.startswith("postgresql://")
        else "id INTEGER PRIMARY KEY"
    )
    raw_sql(
        target,
        [
            (f"CREATE TABLE {VERSION_TABLE} (version INTEGER NOT NULL)", ()),
            (f"CREATE TABLE {TABLE} ({surrogate}, {columns})", ()),
            (f"CREATE INDEX {TABLE}_started_at ON {TABLE} (started_at)", ()),
            *((f"INSERT INTO {VERSION_TABLE} (version) VALUES (?)", (v,)) for v in versions),
            row,
        ],
    )


def raw_sql(target: str, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """Run `statements` on `target` with the driver alone (no store), in one transaction;
    the last one's rows. ``?`` marks a parameter on both databases."""
    rows: list[Any] = []
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:  # commits on leaving
            for sql, params in statements:
                cursor = conn.execute(sql.replace("?", "%s"), params)
                rows = cursor.fetchall() if cursor.description is not None else []
        return rows
    import sqlite3

    conn = sqlite3.connect(target)
    try:
        with conn:
            for sql, params in statements:
                rows = conn.execute(sql, params).fetchall()
    finally:
        conn.close()
    return rows


def schema_versions(target: str) -> list[int]:
    """Every schema version the database recorded, in order (the history of upgrades)."""
    rows = raw_sql(target, [(f"SELECT version FROM {VERSION_TABLE}", ())])
    return sorted(int(r[0]) for r in rows)
