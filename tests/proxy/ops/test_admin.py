"""``/admin/``: every route behind the admin key, over a real socket, and what each answers."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.proxy.usage.backend import open_store
from llmchat.testing import ChatResponder, ScriptedServer

from ...support.proxy import running_proxy
from ..routing.nodes_support import config, node_config, nodes, routed_proxy
from ..usage.support import exact_sums, priced_events

ADMIN = "admin-secret-0123456789"
CLIENT = "client-secret-0123456789"
ROUTES = ("/admin/nodes", "/admin/config", "/admin/usage", "/admin/budgets")


def _get(url: str, path: str, key: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.get(url + path, headers=headers, timeout=10)


@pytest.mark.parametrize("path", [*ROUTES, "/admin/unknown"])
def test_every_admin_route_needs_the_admin_key_and_is_a_404_without_one(path: str) -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url), api_key=CLIENT) as url:
            assert _get(url, path, CLIENT).status_code == 404
        with running_proxy(OpenAICommon(upstream_url), api_key=CLIENT, admin_key=ADMIN) as url:
            # 401 first, known route or not: an unauthenticated caller cannot map them.
            for key in (None, CLIENT):
                refused = _get(url, path, key)
                assert refused.status_code == 401
                assert ADMIN not in refused.text
            answer = _get(url, path, ADMIN)
            assert answer.status_code == (404 if path == "/admin/unknown" else 200) or (
                path == "/admin/usage" and answer.status_code == 409
            )


def test_one_upstream_answers_without_credentials(tmp_path: Path) -> None:
    with ScriptedServer(ChatResponder()) as upstream_url:
        secret_url = upstream_url.replace("http://", "http://user:pw-SECRET@")
        backend = OpenAICommon(secret_url)
        with running_proxy(backend, admin_key=ADMIN) as url:
            nodes_body = _get(url, "/admin/nodes", ADMIN).json()
            assert nodes_body["nodes"][0]["name"] == "upstream"
            assert "SECRET" not in str(nodes_body)
            assert _get(url, "/admin/config", ADMIN).json()["routed"] is False
            assert _get(url, "/admin/budgets", ADMIN).json() == {"budgets": []}
            assert _get(url, "/admin/usage", ADMIN).status_code == 409
        db = str(tmp_path / "usage.db")
        with running_proxy(OpenAICommon(upstream_url), admin_key=ADMIN, usage_db=db) as url:
            requests.post(
                url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                timeout=10,
            ).raise_for_status()
            usage = _get(url, "/admin/usage?by=model", ADMIN).json()
            assert usage["by"] == "model"
            assert sum(total["requests"] for total in usage["totals"]) >= 1
            bad = _get(url, "/admin/usage?since=yesterday", ADMIN)
            assert bad.status_code == 400 and "since" in bad.text


def test_routed_nodes_and_config() -> None:
    with nodes("a") as (a,):
        routed = RoutedUpstream(config([node_config(a)], {"coder": [Tier("x", ("a",))]}))
        with routed_proxy(routed, admin_key=ADMIN) as (url, _sink):
            listed = _get(url, "/admin/nodes", ADMIN).json()["nodes"]
            assert [node["name"] for node in listed] == ["a"]
            assert "inflight" in listed[0]
            body = _get(url, "/admin/config", ADMIN).json()
            assert body["routed"] is True
            assert [n["name"] for n in body["config"]["nodes"]] == ["a"]
            assert "coder" in body["config"]["models"]


def test_usage_totals_are_the_exact_decimal_sums(tmp_path: Path) -> None:
    events = priced_events(300)
    db = str(tmp_path / "usage.db")
    store = open_store(db)
    for item in events:
        store.record(item)
    store.close()
    with ScriptedServer(ChatResponder()) as upstream_url:
        with running_proxy(OpenAICommon(upstream_url), admin_key=ADMIN, usage_db=db) as url:
            by_key = _get(url, "/admin/usage?by=key_id", ADMIN).json()
            by_month = _get(
                url, "/admin/usage?by=month&since=2026-12-01&until=2026-12-31", ADMIN
            ).json()
            bad = _get(url, "/admin/usage?by=fortnight", ADMIN)
    # Decimal text, exact: a JSON number would be read back as a binary float.
    costs = {t["key"]: t["cost"] for t in by_key["totals"]}
    assert all(isinstance(cost, str) for cost in costs.values())
    assert {k: Decimal(v) for k, v in costs.items()} == exact_sums(events, lambda e: e.key_id)
    whole = exact_sums(events, lambda e: "all")["all"]
    assert Decimal(by_key["total"]["cost"]) == whole
    assert by_key["total"]["requests"] >= len(events)  # and the admin requests themselves
    december = [e for e in events if e.started_at < 1798761600.0]  # 2027-01-01T00:00Z
    assert [(t["key"], Decimal(t["cost"])) for t in by_month["totals"]] == [
        ("2026-12", exact_sums(december, lambda e: "m")["m"])
    ]
    assert bad.status_code == 400 and "by must be one of" in bad.text
