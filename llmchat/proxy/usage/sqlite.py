"""The SQLite usage store: stdlib `sqlite3`, WAL, one row per request.

Safe for several threads and processes on one machine: WAL lets readers run
beside the one writer, and a busy timeout makes a writer wait its turn instead
of failing. Not for a database on a network file system (SQLite's own advice).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import InvalidArgumentError, InvalidTypeError
from .sql import TABLE, SqlStore

__all__ = ["SqliteStore"]

BUSY_TIMEOUT_S = 30.0
"""How long a write waits for another process's transaction to end."""


class SqliteStore(SqlStore[sqlite3.Connection]):
    """Usage rows in the SQLite file at `path` (created with its schema if missing).

    ``":memory:"`` is a private in-memory database shared by this store's
    connections (what `llmchat usage --log` aggregates in).
    """

    # Any SQLite (``%G``/``%V`` came only in 3.46): the ISO week is the week of
    # the day's Thursday, and "-3 days, weekday 4" is that Thursday (Monday
    # +3 ... Sunday -3); its year is the ISO year, its day of the year / 7 the week.
    week_sql = (
        "strftime('%Y', day, '-3 days', 'weekday 4') || '-W' || printf('%02d', "
        "(CAST(strftime('%j', day, '-3 days', 'weekday 4') AS INTEGER) - 1) / 7 + 1)"
    )

    def __init__(self, path: str | os.PathLike[str], *, field: str = "usage_db") -> None:
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str):
            raise InvalidTypeError(f"{field} must be a file path (str or os.PathLike)")
        if not path or "\x00" in path:
            raise InvalidArgumentError(f"{field} must be a non-empty file path without NUL")
        super().__init__()
        self.path = path
        self._anchor: sqlite3.Connection | None = None
        self._uri: str | None = None
        if path == ":memory:":
            self._uri = f"file:llmchat-usage-{uuid.uuid4().hex}?mode=memory&cache=shared"
            # The database lives as long as one connection to it: this one.
            self._anchor = self._connect()
        try:
            with self.connection():
                pass  # the schema now, so a bad path fails where it was given
        except sqlite3.Error as exc:
            raise ConnectionError(f"usage database {path}: {exc}") from None

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def _connect(self) -> sqlite3.Connection:
        if self._uri is not None:
            conn = sqlite3.connect(
                self._uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False
            )
        else:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        # Autocommit: each INSERT is its own transaction, so no lock outlives a call.
        conn.isolation_level = None
        # Used by one thread at a time (the pool hands it out), closed by any.
        conn.execute("PRAGMA synchronous=NORMAL")  # durable in WAL but for a power cut
        return conn

    def _close_connection(self, conn: sqlite3.Connection) -> None:
        conn.close()

    def _execute(
        self, conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        return conn.execute(sql, tuple(params)).fetchall()

    def _create_schema(self, conn: sqlite3.Connection, statements: Callable[[], list[str]]) -> None:
        if self._uri is None:
            conn.execute("PRAGMA journal_mode=WAL")  # a property of the file: set once, kept
        conn.execute("BEGIN IMMEDIATE")  # one process at a time creates and versions
        try:
            for statement in statements():
                conn.execute(statement)
            self.upgrade(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _column_names(self, conn: sqlite3.Connection) -> set[str]:
        return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({TABLE})")}

    def close(self) -> None:
        super().close()
        if self._anchor is not None:
            self._anchor.close()
            self._anchor = None
