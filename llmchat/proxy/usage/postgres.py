"""The PostgreSQL usage store: the SQLite store's schema, for several machines sharing one.

Needs psycopg 3 (the ``postgres`` extra). The URL may hold a password: it is
kept out of the repr and scrubbed from every error this store describes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import conninfo

from ...errors import InvalidArgumentError
from ...redact import Redactor
from .sql import TABLE, SqlStore

__all__ = ["PostgresStore"]

CONNECT_TIMEOUT_S = 5
"""Seconds to wait for the server when the URL sets no ``connect_timeout``."""

_SCHEMA_LOCK = 0x6C6C6D636861_7573  # "llmcha" "us": any constant all llmchat processes share


class PostgresStore(SqlStore["psycopg.Connection[tuple[Any, ...]]"]):
    """Usage rows in the PostgreSQL database at `url` (tables created if missing)."""

    placeholder = "%s"
    id_column = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    week_sql = """to_char(CAST(day AS DATE), 'IYYY-"W"IW')"""

    def __init__(self, url: str, *, field: str = "usage_db") -> None:
        try:
            params = conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            # Not the parser's message: it may quote the URL, password and all.
            raise InvalidArgumentError(f"{field} is not a valid postgresql:// URL") from None
        ports = str(params.get("port") or "0").split(",")
        if not all(port.isdigit() and int(port) < 65536 for port in ports):
            # libpq would only find out after resolving the host.
            raise InvalidArgumentError(f"{field}: the postgresql:// URL's port is not a number")
        super().__init__()
        self._url = url
        self._redactor = Redactor.of([str(params["password"])] if params.get("password") else [])
        self._timeout = None if "connect_timeout" in params else CONNECT_TIMEOUT_S
        # A row is written in the request's thread: not waiting for the server's
        # disk flush keeps that off the request's latency. A server crash can lose
        # the last fraction of a second of rows, never corrupt them. The URL's
        # ``options=-c synchronous_commit=on`` keeps the server's default.
        self._async_commit = "synchronous_commit" not in str(params.get("options") or "")
        host = params.get("host") or "localhost"
        port = f":{params['port']}" if params.get("port") else ""
        user = f"{params['user']}@" if params.get("user") else ""
        self.address = f"postgresql://{user}{host}{port}/{params.get('dbname') or ''}"
        """The URL without its password or options: for logs and the repr."""
        with self.connection():
            pass  # connect and create the schema now, so a wrong URL fails at startup

    def __repr__(self) -> str:
        return f"PostgresStore({self.address!r})"

    def describe_error(self, exc: BaseException) -> str:
        return self._redactor.text(f"{type(exc).__name__}: {exc}")

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        extra: dict[str, Any] = {} if self._timeout is None else {"connect_timeout": self._timeout}
        try:
            conn = psycopg.connect(self._url, autocommit=True, **extra)
            if self._async_commit:
                conn.execute("SET synchronous_commit TO off")
        except psycopg.Error as exc:
            # psycopg's message names host and user, never the password; scrubbed anyway.
            raise ConnectionError(
                f"usage database {self.address}: {self.describe_error(exc)}"
            ) from None
        return conn

    def _close_connection(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        conn.close()

    def _execute(
        self, conn: psycopg.Connection[tuple[Any, ...]], sql: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]]:
        with conn.cursor() as cursor:
            cursor.execute(sql, tuple(params))
            return cursor.fetchall() if cursor.description is not None else []

    def _create_schema(
        self, conn: psycopg.Connection[tuple[Any, ...]], statements: Callable[[], list[str]]
    ) -> None:
        with conn.transaction():
            # CREATE TABLE IF NOT EXISTS races in PostgreSQL: take turns across machines.
            self._execute(conn, "SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in statements():
                self._execute(conn, statement)
            self.upgrade(conn)

    def _column_names(self, conn: psycopg.Connection[tuple[Any, ...]]) -> set[str]:
        # The schema the unqualified table name resolves to (the search path's first).
        rows = self._execute(
            conn,
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            (TABLE,),
        )
        return {str(row[0]) for row in rows}
