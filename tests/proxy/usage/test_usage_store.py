"""The usage stores: SQLite and a real PostgreSQL pass the same suite.

Each case runs once per store kind on a fresh database; several threads and
several real processes record at once, and the totals must count every row.
"""

from __future__ import annotations

import datetime
import threading
from pathlib import Path
from typing import Any

import pytest

from llmchat.errors import LLMChatError
from llmchat.proxy.usage.backend import open_store, store_of
from llmchat.proxy.usage.event import key_id_of
from llmchat.proxy.usage.sql import SCHEMA_VERSION, VERSION_TABLE
from llmchat.proxy.usage.store import Total

from ...support.usage import event, fresh_postgres, race_processes

DAY1 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc).timestamp()
DAY2_LAST = datetime.datetime(2026, 3, 2, 23, 59, 59, tzinfo=datetime.timezone.utc).timestamp()
DAY4_FIRST = datetime.datetime(2026, 3, 4, tzinfo=datetime.timezone.utc).timestamp()


def _sample(store: Any) -> None:
    store.record(
        event(
            "a",
            model="m1",
            input_tokens=3,
            output_tokens=5,
            content_bytes=20,
            duration_ms=1.25,
            started_at=DAY1,
            key_id="key_one",
        )
    )
    store.record(
        event(
            "b",
            model="m1",
            ok=False,
            status=502,
            error_type="http",
            duration_ms=0.5,
            started_at=DAY2_LAST,
            key_id="key_one",
        )
    )
    store.record(
        event(
            "c",
            model="m2",
            input_tokens=10,
            output_tokens=1,
            content_bytes=4,
            duration_ms=2.0,
            started_at=DAY4_FIRST,
        )
    )
    store.record(event("d", face="proxy", route="/health", started_at=DAY4_FIRST))


def test_totals_per_model_day_and_key(target: str) -> None:
    store = open_store(target)
    try:
        _sample(store)
        assert store.totals("model") == [
            Total("m1", 2, 1, 1, 3, 5, 20, 1.75),
            Total("m2", 1, 1, 0, 10, 1, 4, 2.0),
            Total(None, 1, 1, 0, 0, 0, 0, 0.0),
        ]
        assert store.totals("day") == [
            Total("2026-03-01", 1, 1, 0, 3, 5, 20, 1.25),
            Total("2026-03-02", 1, 0, 1, 0, 0, 0, 0.5),
            Total("2026-03-04", 2, 2, 0, 10, 1, 4, 2.0),
        ]
        assert store.totals("key_id") == [
            Total("key_one", 2, 1, 1, 3, 5, 20, 1.75),
            Total(None, 2, 2, 0, 10, 1, 4, 2.0),
        ]
    finally:
        store.close()


def test_since_and_until_are_whole_utc_days(target: str) -> None:
    store = open_store(target)
    try:
        _sample(store)
        march = datetime.date(2026, 3, 1)
        days = [t.key for t in store.totals("day", since=march + datetime.timedelta(days=1))]
        assert days == ["2026-03-02", "2026-03-04"]
        days = [t.key for t in store.totals("day", until=march + datetime.timedelta(days=1))]
        assert days == ["2026-03-01", "2026-03-02"]  # 23:59:59 on the last day is in
        one = store.totals("model", since=march, until=march)
        assert [(t.key, t.requests) for t in one] == [("m1", 1)]
        assert (
            store.totals("day", since=datetime.date(2026, 3, 3), until=march.replace(day=3)) == []
        )
        with pytest.raises(ValueError, match="since"):
            store.totals("day", since=march.replace(day=5), until=march)
        with pytest.raises(ValueError, match="by must be one of"):
            store.totals("face")
    finally:
        store.close()


def test_every_event_field_round_trips_into_the_sums(target: str) -> None:
    store = open_store(target)
    try:
        store.record(event("x", model="m", stream=True, input_tokens=None, output_tokens=None))
        [total] = store.totals("model")
        assert (total.requests, total.input_tokens, total.output_tokens) == (1, 0, 0)
    finally:
        store.close()


def test_several_threads_record_at_once(target: str) -> None:
    store = open_store(target)
    threads, each = 8, 60
    gate = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            gate.wait(timeout=10)
            for i in range(each):
                store.record(event(f"t{worker}-{i}", model=f"w{worker}", input_tokens=i))
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    try:
        assert errors == []
        totals = store.totals("model")
        assert [t.key for t in totals] == [f"w{n}" for n in range(threads)]
        assert all(t.requests == each and t.input_tokens == sum(range(each)) for t in totals)
    finally:
        store.close()


_WORKER = """
import sys
from llmchat.proxy.usage import UsageEvent
from llmchat.proxy.usage.backend import open_store
target, worker, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # the go signal: every process opens (and creates the schema) at once
store = open_store(target)
for i in range(n):
    store.record(UsageEvent(request_id=f"{worker}-{i}", face="ollama", route="/api/chat",
                            model=worker, output_tokens=1))
store.close()
print("done", flush=True)
"""


def test_several_processes_record_at_once(target: str) -> None:
    processes, each = 4, 100
    race_processes(_WORKER, [[target, f"p{n}", str(each)] for n in range(processes)])
    store = open_store(target)
    try:
        totals = store.totals("model")
        assert [(t.key, t.requests, t.output_tokens) for t in totals] == [
            (f"p{n}", each, each) for n in range(processes)
        ]
        assert store.schema_version() == SCHEMA_VERSION
    finally:
        store.close()


def test_schema_creation_is_idempotent(target: str) -> None:
    first = open_store(target)
    first.record(event("kept", model="m"))
    second = open_store(target)  # while the first is open
    first.close()
    second.close()
    third = open_store(target)
    try:
        assert [(t.key, t.requests) for t in third.totals("model")] == [("m", 1)]
        with third.connection() as conn:
            rows = third._execute(conn, f"SELECT version FROM {VERSION_TABLE}")
        assert [tuple(r) for r in rows] == [(SCHEMA_VERSION,)]
    finally:
        third.close()


def test_a_newer_schema_is_refused(target: str) -> None:
    store = open_store(target)
    with store.connection() as conn:
        store._execute(conn, f"UPDATE {VERSION_TABLE} SET version = 99")
    store.close()
    with pytest.raises(LLMChatError, match=rf"schema version 99.*knows {SCHEMA_VERSION}"):
        open_store(target)


def test_a_closed_store_refuses_and_close_is_idempotent(target: str) -> None:
    store = open_store(target)
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.record(event())


# -- checked before any I/O -----------------------------------------------------


@pytest.mark.parametrize("bad", [42, None, b"usage.db", ["usage.db"]])
def test_wrong_type_names_the_field(bad: Any) -> None:
    with pytest.raises(TypeError, match="usage_db must be"):
        open_store(bad)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("", "usage_db must be a non-empty file path"),
        ("usage\x00.db", "usage_db must be a non-empty file path without NUL"),
        ("mysql://host/db", "usage_db must be a file path or a postgresql:// URL, not a mysql"),
        ("postgresql://u:hunter2@host/db?nonsense=1", "usage_db is not a valid postgresql"),
        ("postgresql://u:hunter2@host:port/db", "usage_db: the postgresql:// URL's port"),
        ("postgresql://u:hunter2@host:99999/db", "usage_db: the postgresql:// URL's port"),
    ],
)
def test_bad_value_names_the_field_and_never_the_password(bad: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        open_store(bad)
    assert "hunter2" not in str(raised.value)


def test_the_field_name_is_the_callers() -> None:
    with pytest.raises(ValueError, match="--db must be"):
        open_store("redis://x", field="--db")


def test_an_unwritable_sqlite_path_fails_at_open_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "usage.db"
    with pytest.raises(OSError, match=r"usage database .*no-such-dir"):
        open_store(path)
    assert not path.parent.exists()


def test_an_unreachable_postgres_fails_at_open_without_the_password() -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed (the postgres extra)")
    # Port 9 on loopback: nothing listens (discard), so the connect is refused at once.
    url = "postgresql://user:hunter2@127.0.0.1:9/usage?connect_timeout=5"
    with pytest.raises(OSError) as raised:
        open_store(url)
    assert "127.0.0.1:9" in str(raised.value) and "hunter2" not in str(raised.value)


def test_repr_holds_no_password() -> None:
    url = fresh_postgres()
    store = open_store(url.replace("llmchat@", "llmchat:hunter2@"))  # trust auth ignores it
    try:
        assert "hunter2" not in repr(store) and "llmchat@" in repr(store)
        assert "hunter2" not in store.describe_error(RuntimeError("bad hunter2"))
    finally:
        store.close()


def test_store_of_takes_paths_urls_stores_or_none(tmp_path: Path) -> None:
    assert store_of(None) == (None, False)
    store, owned = store_of(tmp_path / "u.db")
    assert owned and store is not None
    assert store_of(store) == (store, False)
    store.close()
    with pytest.raises(TypeError, match="usage_db must be"):
        store_of(42)


def test_key_id_is_stable_short_and_not_the_key() -> None:
    key = "sk-local-0123456789abcdef"
    assert key_id_of(key) == key_id_of(key)
    assert key_id_of(key) != key_id_of(key + "x")
    assert key_id_of(key).startswith("key_") and len(key_id_of(key)) == 16
    assert key[3:9] not in key_id_of(key)


def test_postgres_rows_do_not_wait_for_the_disk_unless_the_url_says() -> None:
    url = fresh_postgres()
    on = ("&" if "?" in url else "?") + "options=-c%20synchronous_commit%3Don"
    for extra, expected in [("", "off"), (on, "on")]:
        store = open_store(url + extra)
        try:
            with store.connection() as conn:
                rows = store._execute(conn, "SHOW synchronous_commit")
            assert [tuple(r) for r in rows] == [(expected,)]
        finally:
            store.close()
