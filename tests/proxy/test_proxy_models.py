"""The Ollama model-list routes over a real proxy server: an honest answer when the
upstream is down, and the configured models when it has no list of its own.
"""

from __future__ import annotations

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, Reply, ScriptedServer

from ..support.proxy import running_proxy


@pytest.mark.parametrize("route", ["/api/tags", "/api/ps"])
def test_a_dead_upstream_is_a_502_in_ollamas_shape(route: str) -> None:
    with ScriptedServer() as url:
        pass  # the port is closed again: nothing listens there
    port = url.rsplit(":", 1)[1].split("/")[0]
    with running_proxy(OpenAICommon(url, model="m")) as proxy:
        answer = requests.get(proxy + route, timeout=10)
    assert answer.status_code == 502
    body = answer.json()
    assert set(body) == {"error"} and isinstance(body["error"], str)
    assert port not in answer.text and "127.0.0.1" not in answer.text


def test_an_upstream_failing_its_list_is_a_502() -> None:
    srv = ScriptedServer(ChatResponder("Hi"))
    with srv as url:
        srv.push(Reply(status=500, body="<html>Traceback (most recent call last)</html>"))
        with running_proxy(OpenAICommon(url)) as proxy:
            answer = requests.get(proxy + "/api/tags", timeout=10)
    assert answer.status_code == 502
    assert "Traceback" not in answer.text


def test_an_upstream_without_a_list_serves_its_configured_model() -> None:
    srv = ScriptedServer(ChatResponder("Hi"))
    with srv as url:
        srv.push(Reply(status=404, body='{"error": {"message": "not found"}}'))
        with running_proxy(OpenAICommon(url, model="configured")) as proxy:
            answer = requests.get(proxy + "/api/tags", timeout=10)
    assert answer.status_code == 200
    assert [m["name"] for m in answer.json()["models"]] == ["configured"]


def test_a_live_upstream_lists_its_models() -> None:
    with ScriptedServer(ChatResponder("Hi", model="served-model")) as url:
        with running_proxy(OpenAICommon(url)) as proxy:
            answer = requests.get(proxy + "/api/tags", timeout=10)
    assert answer.status_code == 200
    assert [m["name"] for m in answer.json()["models"]] == ["served-model"]
