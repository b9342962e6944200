"""Routing in ``GET /metrics``: admission waits and 429s, budget refusals, the node gauges.

A routed proxy over loopback nodes; a request held inside a node (its `gate`)
keeps that node's one slot busy. Scraped and parsed with prometheus-client's
parser.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from llmchat.proxy.routing.config import Budget, Tier
from llmchat.proxy.routing.upstream import RoutedUpstream

from ...support.metrics import scrape, total
from ..routing.nodes_support import (
    chat,
    closed_port_url,
    config,
    hold,
    node_config,
    nodes,
    openai_client,
    routed_proxy,
)
from ..usage.budget_proxy import budget_proxy

pytest.importorskip("prometheus_client", reason="needs the metrics extra")

WAIT = 10.0
WAIT_MS = 100


FACES = ("openai", "ollama", "gemini")


def _ask(url: str, face: str, model: str) -> requests.Response:
    if face == "gemini":
        route = f"/v1beta/models/{model}:generateContent"
        body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    else:
        route = {"openai": "/v1/chat/completions", "ollama": "/api/chat"}[face]
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False}
    return requests.post(url + route, json=body, timeout=WAIT)


def test_admission_waits_and_429s_are_counted_by_alias_node_and_face() -> None:
    with nodes("a") as (a,):
        routed = RoutedUpstream(
            config([node_config(a, max_conns=1)], {"m": [Tier("x", ("a",))]}, wait_ms=WAIT_MS)
        )
        with routed_proxy(routed) as (url, sink):
            held = hold(a, openai_client(url), "m")  # a's one slot, busy until its gate opens
            for face in FACES:
                refused = _ask(url, face, "m")
                assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["status"] == "RESOURCE_EXHAUSTED"  # Gemini's
            assert a.gate is not None
            a.gate.set()
            held.join(WAIT)
            events = sink.wait(1 + len(FACES))
            samples = scrape(url)
    refusals = [e for e in events if e["status"] == 429]
    [served] = [e for e in events if e["status"] == 200]
    assert sorted(e["face"] for e in refusals) == sorted(FACES)
    for event in refusals:
        assert (event["error_type"], event["alias"], event["node"]) == ("overloaded", "m", None)
        assert event["wait_ms"] >= WAIT_MS  # it waited its tier's whole wait, then gave up
    assert served["node"] == "a" and served["wait_ms"] is not None and served["wait_ms"] >= 0
    for face in FACES:
        assert total(samples, "llmchat_admission_refusals_total", alias="m", face=face) == 1
        assert total(samples, "llmchat_admission_wait_seconds_count", node="none", face=face) == 1
        # Every refused wait lasted the tier's wait: none below it.
        below = total(samples, "llmchat_admission_wait_seconds_bucket", node="none", face=face,
                      le="0.05")  # fmt: skip
        assert below == 0
    waited = total(samples, "llmchat_admission_wait_seconds_sum", alias="m")
    assert waited == pytest.approx(sum(e["wait_ms"] for e in events) / 1000, rel=1e-9, abs=1e-9)
    assert total(samples, "llmchat_admission_wait_seconds_count", node="a", face="openai") == 1
    # Still an error class among the failures too (documented), and no budget refusal.
    assert total(samples, "llmchat_upstream_failures_total", error_type="overloaded") == len(FACES)
    assert total(samples, "llmchat_budget_refusals_total") == 0


def test_budget_refusals_are_counted_by_key_apart_from_admission() -> None:
    with nodes("a") as (a,), budget_proxy(a, Budget(tokens=1)) as (url, _app, sink):
        client: Any = openai_client(url, "sk-alice-SECRET")
        assert chat(client, "m").headers["x-llmchat-node"] == "a"
        for _ in range(2):
            refused = requests.post(
                url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer sk-alice-SECRET"},
                timeout=WAIT,
            )
            assert refused.status_code == 429
        events = sink.wait(3)
        samples = scrape(url)
    assert [e["error_type"] for e in events] == [None, "budget", "budget"]
    assert total(samples, "llmchat_budget_refusals_total", key="alice") == 2
    assert total(samples, "llmchat_admission_refusals_total") == 0
    # Refused before any node: nothing waited for a slot.
    assert [e["wait_ms"] is None for e in events] == [False, True, True]


def test_node_gauges_follow_a_held_request_and_an_ejection() -> None:
    with nodes("a") as (a,):
        # A clock that stands still: the dead node's ejection outlasts the test.
        routed = RoutedUpstream(
            config(
                [node_config(a, max_conns=1), node_config("b", closed_port_url())],
                {"m": [Tier("x", ("a",))], "d": [Tier("y", ("b",))]},
            ),
            clock=lambda: 1000.0,
        )
        with routed_proxy(routed) as (url, sink):
            before = scrape(url)
            held = hold(a, openai_client(url), "m")
            during = scrape(url)
            assert a.gate is not None
            a.gate.set()
            held.join(WAIT)
            sink.wait(1, route="/v1/chat/completions")  # recorded once its slot was given back
            after = scrape(url)
            assert _ask(url, "openai", "d").status_code == 502  # b refuses the connection
            ejected = scrape(url)
    inflight, healthy = "llmchat_node_inflight_requests", "llmchat_node_healthy"
    assert [total(s, inflight, node="a") for s in (before, during, after)] == [0, 1, 0]
    assert total(before, healthy, node="a") == total(before, healthy, node="b") == 1
    assert total(ejected, healthy, node="a") == 1
    assert total(ejected, healthy, node="b") == 0
    assert total(ejected, inflight, node="b") == 0
