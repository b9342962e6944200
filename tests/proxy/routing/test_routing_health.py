"""RoutedUpstream health: the monitor's one ejection policy, re-admission by probe, GET /health."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import replace
from typing import Any

from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import PASSIVE_BACKOFF, RoutedUpstream
from llmchat.testing import Reply

from .nodes_support import WAIT, chat, config, node_config, nodes, openai_client, routed_proxy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def get_health(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url + "/health", timeout=WAIT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_failed_request_ejects_through_the_monitor_and_a_probe_readmits() -> None:
    clock = Clock()
    with nodes("a", "b") as (a, b):
        a.override = lambda request: Reply.error(500, "broken")
        routed = RoutedUpstream(
            config(
                [node_config(a), node_config(b)],
                {"m": [Tier("x", ("a",)), Tier("x", ("b",))]},
            ),
            clock=clock,
        )
        with routed_proxy(routed) as (url, _):
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "b"
            status, report = get_health(url)
            assert status == 200 and report["status"] == "ok"
            by_name = {node["name"]: node for node in report["nodes"]}
            assert by_name["a"]["eligible"] is False and by_name["a"]["state"] == "ejected"
            assert by_name["a"]["health"]["ejected"] is True
            assert by_name["a"]["health"]["backoff_remaining_s"] == PASSIVE_BACKOFF
            assert by_name["b"]["eligible"] is True and by_name["b"]["health"]["ejected"] is False
            assert report["config"]["source"] == "test.yaml"
            # A probe inside the back-off does not readmit; one after it does.
            a.override = None
            routed.health.probe_now()
            assert routed.health.report(routed.nodes["a"])["ejected"] is True
            clock.now += PASSIVE_BACKOFF
            routed.health.probe_now()
            assert routed.health.report(routed.nodes["a"])["ejected"] is False
            assert routed.nodes["a"].report()["state"] == "healthy"
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "a"


def test_no_eligible_node_is_a_degraded_health_answer() -> None:
    with nodes("a") as (a,):
        a.override = lambda request: Reply.error(502, "bad gateway")
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}))
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)
            try:
                chat(client, "m")
            except Exception:
                pass
            status, report = get_health(url)
            assert status == 503 and report["status"] == "degraded"
            assert report["nodes"][0]["health"]["strikes"] == 1


def test_reload_moves_the_monitor_to_the_new_nodes() -> None:
    with nodes("a", "b") as (a, b):
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}))
        assert routed.health.interval == 5.0
        again = config([node_config(a), node_config(b)], {"m": [Tier("x", ("a", "b"))]})
        routed.reload(replace(again, routing=replace(again.routing, health_interval_s=0.5)))
        assert [t.name for t in routed.health.targets] == ["a", "b"]
        assert routed.health.interval == 0.5
        assert set(routed.health.probe_now()) == {"a", "b"}
        routed.close()


def test_the_cli_upstream_probes_from_its_first_use() -> None:
    from llmchat.cli.routed import routed_upstream

    with nodes("a") as (a,):
        routed = routed_upstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}))
        assert not routed.health.probing
        with routed_proxy(routed) as (url, _):
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "a"
            assert routed.health.probing
        assert not routed.health.probing  # close() stopped it
