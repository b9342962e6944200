"""A key's budget under load: 16 parallel streams across 2 ``llmchat proxy`` processes
sharing one PostgreSQL usage store, until every stream is refused.

The bound under test is `llmchat.proxy.usage.budgets`'s: a request's size is
known only when it ends, so the spend past a token limit comes from the
requests in flight when the store's total crossed it, plus what other
processes admit before a re-read shows them the crossing. With
``refresh_s: 0`` (every check reads the store) that is below
STREAMS x one request's tokens; with a refresh that never lands during the
test, each process still counts its own spend, so the two together stay below
2 x the limit plus the streams in flight. Each request here spends the same
tokens (the node's usage is fixed by the prompt and the reply), so the bounds
are exact sums. The refusals are the budget's 429 in the OpenAI face's shape.
A requests-per-minute limit is per process: each proxy admits at most rpm in
any minute.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from llmchat.proxy.usage.backend import open_store
from llmchat.testing import ChatResponder, ScriptedServer

from ...clients.routed_proxy import routed_proxy
from ...support.proxy_servers import ServedProxy
from ...support.usage import fresh_postgres

KEY = "sk-budget-overshoot-0123"
STREAMS = 16
PROCESSES = 2
MOST_ROUNDS = 200
"""A stream gives up after this many admitted requests: a budget that never refuses."""
ROUTE = "/v1/chat/completions"
WAIT = 60.0


@dataclass
class Stream:
    """One client: streamed chats through one proxy until the first refusal."""

    proxy: ServedProxy
    admitted: int = 0
    refusal: requests.Response | None = None
    failure: str | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            with requests.Session() as session:
                while self.refusal is None and self.admitted < MOST_ROUNDS:
                    self._one(session)
        except Exception as exc:  # reported by the test, which waits on `done`
            self.failure = repr(exc)
        finally:
            self.done.set()

    def _one(self, session: requests.Session) -> None:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "one two three"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"Authorization": f"Bearer {KEY}"}
        url = self.proxy.url + ROUTE
        with session.post(url, json=body, headers=headers, stream=True, timeout=WAIT) as answer:
            data = answer.content  # the whole stream, to its end
            if answer.status_code == 429:
                self.refusal = answer
            elif answer.status_code == 200 and data.rstrip().endswith(b"data: [DONE]"):
                self.admitted += 1
            else:
                raise AssertionError(f"{answer.status_code}: {data[:500]!r}")


@contextmanager
def _proxies(
    tmp_path: Path, budget: dict[str, Any], refresh_s: float
) -> Iterator[tuple[list[ServedProxy], str]]:
    url = fresh_postgres()
    node = ScriptedServer(ChatResponder())
    with node as node_url, ExitStack() as stack:
        config = {
            "nodes": [{"name": "n", "url": node_url, "max_conns": STREAMS}],
            "models": {"*": [{"model": "local", "nodes": ["n"]}]},
            "keys": [{"name": "agent", "key_env": "AGENT_KEY", "budget": budget}],
            "budgets": {"refresh_s": refresh_s},
        }
        proxies = []
        for name in "ab"[:PROCESSES]:
            directory = tmp_path / name
            directory.mkdir()
            env = {"AGENT_KEY": KEY}
            served = routed_proxy(config, env, directory, "--usage-db", url)
            proxies.append(stack.enter_context(served))
        yield proxies, url


def _run_streams(proxies: list[ServedProxy]) -> list[Stream]:
    """STREAMS clients split evenly over `proxies`, all until refused; their events in."""
    streams = [Stream(proxies[i % len(proxies)]) for i in range(STREAMS)]
    threads = [threading.Thread(target=s.run, daemon=True) for s in streams]
    for thread in threads:
        thread.start()
    for stream in streams:
        assert stream.done.wait(WAIT * 4), "a stream neither ended nor was refused"
    assert not [s.failure for s in streams if s.failure], [s.failure for s in streams]
    assert all(s.refusal is not None for s in streams), [s.admitted for s in streams]
    for proxy in proxies:
        sent = sum(s.admitted + 1 for s in streams if s.proxy is proxy)
        # Each event reaches the FIFO after the store has it (`UsageLog.emit`).
        proxy.usage.wait(sent, WAIT, route=ROUTE)
    return streams


def _assert_budget_429(answer: requests.Response, what: str) -> None:
    assert answer.status_code == 429
    assert answer.headers["x-should-retry"] == "false"
    assert int(answer.headers["retry-after"]) >= 1
    error = answer.json()["error"]
    assert error["type"] == error["code"] == "usage_limit_reached", error
    assert what in error["message"] and isinstance(error["resets_at"], int), error


def _spent_in_store(url: str) -> tuple[int, int]:
    """(requests that got an answer from the node, their tokens) for the key, from the store."""
    store = open_store(url)
    try:
        [total] = [t for t in store.totals("key_id") if t.key == "agent"]
    finally:
        store.close()
    return total.ok, total.input_tokens + total.output_tokens


@pytest.mark.parametrize(
    ("refresh_s", "bound"),
    [
        # Every check reads the store: only the streams in flight at the crossing go past.
        (0, lambda limit, each: limit + STREAMS * each),
        # No re-read after the first during the test: each process spends the limit alone.
        (3600, lambda limit, each: PROCESSES * limit + STREAMS * each),
    ],
    ids=["refresh-every-check", "refresh-never-lands"],
)
def test_token_budget_overshoot_across_two_processes(tmp_path, refresh_s, bound) -> None:
    limit = 200
    with _proxies(tmp_path, {"tokens": limit}, refresh_s) as (proxies, url):
        streams = _run_streams(proxies)
        events = [e for p in proxies for e in p.usage.events if e["route"] == ROUTE]
        admitted, tokens = _spent_in_store(url)
    served = [e for e in events if e["ok"]]
    each = {e["input_tokens"] + e["output_tokens"] for e in served}
    assert len(each) == 1 and min(each) > 0, each  # every request spends the same
    [per_request] = each
    assert admitted == len(served) == sum(s.admitted for s in streams)
    assert tokens == admitted * per_request
    assert tokens < bound(limit, per_request), (tokens, admitted, per_request)
    refused = [e for e in events if not e["ok"]]
    assert len(refused) == STREAMS
    assert all(e["status"] == 429 and e["error_type"] == "budget" for e in refused), refused
    for stream in streams:
        assert stream.refusal is not None
        _assert_budget_429(stream.refusal, "token budget")


def test_rpm_is_per_process_across_two_processes(tmp_path) -> None:
    rpm = 3
    with _proxies(tmp_path, {"rpm": rpm}, 5.0) as (proxies, _url):
        streams = _run_streams(proxies)
        per_proxy = [[e for e in p.usage.events if e["route"] == ROUTE] for p in proxies]
    for events in per_proxy:
        starts = sorted(e["started_at"] for e in events if e["ok"])
        assert starts, "each proxy admitted some"
        # A sliding minute: no 60 s window holds more than rpm admissions of one process.
        for i, first in enumerate(starts):
            assert len([t for t in starts[i:] if t < first + 60.0]) <= rpm, starts
        assert all(e["error_type"] == "budget" for e in events if not e["ok"]), events
    for stream in streams:
        assert stream.refusal is not None
        _assert_budget_429(stream.refusal, "requests-per-minute limit")
        assert int(stream.refusal.headers["retry-after"]) <= 60  # the minute slides on
