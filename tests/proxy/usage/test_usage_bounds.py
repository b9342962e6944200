"""Nothing a client sends makes the usage record large, and keyless probing costs a bounded
number of rows: real requests over sockets with 60 KB paths, model names and user agents,
then the JSON log and the store (SQLite and PostgreSQL) read back.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy import ProxyApp, make_app, make_server
from llmchat.proxy.usage.backend import open_store
from llmchat.proxy.usage.fields import MAX_TEXT, UNKNOWN_ROUTE
from llmchat.proxy.usage.sinks import PROBES_PER_MINUTE, ProbeBudget
from llmchat.proxy.usage.sql import COLUMNS, TABLE
from llmchat.testing import ChatResponder, Reply, ScriptedServer

from ...support.usage import event

KEY = "proxy-client-key-0123456789"
WAIT = 10.0
HUGE = 60_000
"""Characters in a hostile path, model name or user agent (the head limit is 64 KiB)."""
LINE_BOUND = 1024
"""Bytes one JSON log line may take, whatever the client sent."""
ROUTES = {
    "/",
    "/health",
    "/api/hello",
    "/api/version",
    "/api/tags",
    "/api/ps",
    "/api/show",
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/api/embeddings",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/chat/completions",
    "/v1/models",
    "/v1/embeddings",
    "/v1/responses",
    UNKNOWN_ROUTE,
}


@contextlib.contextmanager
def serving(upstream_url: str, **options: Any) -> Iterator[tuple[str, ProxyApp]]:
    """The proxy app over `upstream_url` on a loopback port: its URL and the app itself."""
    with OpenAICommon(upstream_url) as backend:
        app = make_app(backend, **options)
        server = make_server(app, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.url, app
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=WAIT)
            app.close()


def _rows(target: str) -> list[dict[str, Any]]:
    reader = open_store(target)
    try:
        with reader.connection() as conn:
            rows = reader._execute(conn, f"SELECT {', '.join(COLUMNS)} FROM {TABLE}")
    finally:
        reader.close()
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def _assert_bounded(record: dict[str, Any]) -> None:
    assert record["route"] in ROUTES, record["route"][:80]
    for name, value in record.items():
        assert not isinstance(value, str) or len(value) <= MAX_TEXT, name


def test_hostile_strings_are_bounded_in_the_log_and_the_store(target: str, tmp_path: Path) -> None:
    log = tmp_path / "usage.jsonl"
    keyed = {"Authorization": f"Bearer {KEY}", "User-Agent": "u" * HUGE}
    sent = 0
    with (
        ScriptedServer(ChatResponder("fine")) as upstream,
        serving(upstream, usage_log=str(log), usage_db=target, api_key=KEY) as (url, app),
        requests.Session() as session,
    ):
        app.usage.probes = ProbeBudget(per_window=10_000, window=3600.0)  # every probe recorded
        for n in range(20):
            long_path = f"/{n}" + "a" * HUGE
            assert session.get(url + long_path, timeout=WAIT).status_code == 401
            assert session.post(url + long_path, headers=keyed, timeout=WAIT).status_code == 404
            assert session.post(url + "/v1/messages", timeout=WAIT).status_code == 401
            sent += 3
        body = {"model": "m" * HUGE, "messages": [{"role": "user", "content": "hi"}]}
        answer = session.post(
            url + "/api/chat", json={**body, "stream": False}, headers=keyed, timeout=WAIT
        )
        assert answer.status_code == 200
        sent += 1
    lines = log.read_bytes().splitlines()
    rows = _rows(target)
    assert len(lines) == len(rows) == sent
    for line in lines:
        assert len(line) <= LINE_BOUND
    for record in [json.loads(line) for line in lines] + rows:
        _assert_bounded(record)
    [chat] = [row for row in rows if row["route"] == "/api/chat"]
    assert chat["model"] == "m" * MAX_TEXT and chat["ok"]
    assert {row["route"] for row in rows if row["status"] == 404} == {UNKNOWN_ROUTE}
    assert {row["route"] for row in rows if row["status"] == 401} == {UNKNOWN_ROUTE, "/v1/messages"}


def test_keyless_probes_are_recorded_up_to_a_budget_and_counted_past_it(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    probes = PROBES_PER_MINUTE + 40
    with (
        ScriptedServer(ChatResponder("fine")) as upstream,
        serving(upstream, usage_db=target, api_key=KEY) as (url, app),
        requests.Session() as session,
        caplog.at_level("WARNING", logger="llmchat.proxy"),
    ):
        # An hour's window, so the test's pace cannot open a second one.
        app.usage.probes = ProbeBudget(window=3600.0)
        for n in range(probes):
            path = "/v1/messages" if n % 2 else f"/probe{n}/" + "x" * HUGE
            assert session.post(url + path, timeout=WAIT).status_code == 401
        keyed = session.get(url + "/nope", headers={"x-api-key": KEY}, timeout=WAIT)
        assert keyed.status_code == 404  # a keyed client's mistake is not a probe
        dropped = app.usage.probes.dropped
    rows = _rows(target)
    assert len(rows) == PROBES_PER_MINUTE + 1
    assert dropped == probes - PROBES_PER_MINUTE
    assert sum(row["key_id"] is not None for row in rows) == 1
    warned = [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()]
    assert len(warned) == 1 and f"more than {PROBES_PER_MINUTE}" in warned[0]


def test_negative_and_odd_upstream_counts_are_not_stored(target: str, tmp_path: Path) -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": -5, "completion_tokens": 2**62, "total_tokens": 3},
    }
    log = tmp_path / "usage.jsonl"
    with (
        ScriptedServer(Reply.json(completion)) as upstream,
        serving(upstream, usage_log=str(log), usage_db=target) as (url, _),
    ):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
        assert requests.post(url + "/api/chat", json=body, timeout=WAIT).status_code == 200
    [row] = _rows(target)
    [line] = [json.loads(line) for line in log.read_bytes().splitlines()]
    for record in (row, line):
        assert (record["input_tokens"], record["output_tokens"]) == (None, None)


def test_the_event_refuses_negative_and_non_int_counts_at_its_boundary(target: str) -> None:
    odd: dict[str, Any] = {"input_tokens": -5, "output_tokens": True, "content_bytes": -3}
    store = open_store(target)
    try:
        store.record(event("odd", **odd, duration_ms=float("nan")))
    finally:
        store.close()
    [row] = _rows(target)
    assert (row["input_tokens"], row["output_tokens"], row["content_bytes"]) == (None, None, 0)
    assert row["duration_ms"] == 0.0
