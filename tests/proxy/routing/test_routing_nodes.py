"""Node state: its own key (never the client's, never shown), dialects, slots given back once."""

from __future__ import annotations

import json
import threading

import openai
import pytest
import requests

from llmchat import Anthropic, Gemini, Ollama, OpenAICommon, OpenAIResponses
from llmchat.proxy.routing.config import NodeConfig, Tier
from llmchat.proxy.routing.nodes import DEFAULT_MAX_CONNS, NodeState
from llmchat.proxy.routing.upstream import RoutedUpstream

from .nodes_support import chat, config, node_config, nodes, openai_client, routed_proxy

WAIT = 10.0
SECRET = "sk-node-secret-0123456789"


def test_the_node_sends_its_own_key_and_never_shows_it():
    env = {"GPU_A_KEY": SECRET}
    with nodes("a") as (a,):
        routed = RoutedUpstream(
            config([node_config(a, api_key_env="GPU_A_KEY")], {"m": [Tier("x", ("a",))]}),
            environ=env,
        )
        with routed_proxy(routed) as (url, _):
            chat(openai_client(url, key="client-key"), "m")  # the relay path
            raw = requests.post(
                url + "/api/chat",  # the Completions path (the Ollama face)
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer client-key"},
                timeout=WAIT,
            )
            assert raw.status_code == 200 and raw.headers["x-llmchat-node"] == "a"
        sent = [r.headers.get("Authorization") for r in a.server.requests]
        assert sent == [f"Bearer {SECRET}"] * 2
        node = routed.nodes["a"]
        shown = repr(routed) + repr(node) + repr(node.report()) + repr(routed.report())
        assert SECRET not in shown and "GPU_A_KEY" not in repr(node.report())
        assert routed.redactor().text(f"key {SECRET}") != f"key {SECRET}"


def test_a_node_whose_key_is_unset_is_not_eligible_and_says_why():
    with nodes("a") as (a,):
        routed = RoutedUpstream(
            config([node_config(a, api_key_env="NOPE_KEY")], {"m": [Tier("x", ("a",))]}),
            environ={},
        )
        report = routed.nodes["a"].report()
        assert report["state"] == "unavailable" and "NOPE_KEY" in report["reason"]
        with routed_proxy(routed) as (url, _):
            with pytest.raises(openai.InternalServerError) as caught:
                chat(openai_client(url), "m")
            assert caught.value.status_code == 503
            assert caught.value.response.headers["x-llmchat-node"] == "proxy"
            assert int(caught.value.response.headers["retry-after"]) >= 1
        assert a.chats == 0


@pytest.mark.parametrize(
    ("dialect", "kind"),
    [
        ("openai", OpenAICommon),
        ("anthropic", Anthropic),
        ("responses", OpenAIResponses),
        ("ollama", Ollama),
        ("gemini", Gemini),
    ],
)
def test_each_dialect_gets_its_backend_with_no_borrowed_key(dialect, kind, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-the-environment")
    node = NodeState(NodeConfig("n", "http://127.0.0.1:9/v1", dialect=dialect), clock=lambda: 0.0)
    assert type(node.backend) is kind
    assert node.backend._secrets() == ()  # no api_key_env: no key, not the provider's default
    assert node.max_conns == DEFAULT_MAX_CONNS


def test_health_target_calls():
    clock = [0.0]
    node = NodeState(NodeConfig("n", "http://127.0.0.1:9/v1"), clock=lambda: clock[0])
    assert node.eligible(0.0)
    node.set_capacity(3)
    assert node.max_conns == 3
    node.set_loading(True)
    assert not node.eligible(0.0) and node.report()["state"] == "loading"
    node.set_loading(False)
    node.eject(10.0, "probe failed")
    assert node.report()["state"] == "ejected" and node.report()["reason"] == "probe failed"
    assert not node.eligible(5.0)
    node.readmit()
    assert node.eligible(5.0)
    fixed = NodeState(NodeConfig("f", "http://127.0.0.1:9/v1", max_conns=2), clock=lambda: 0.0)
    fixed.set_capacity(6)
    assert fixed.max_conns == 2  # the configured limit wins over the probe


def _wait_idle(node: NodeState) -> bool:
    with node.lock:
        return node.lock.wait_for(lambda: node.inflight == 0, WAIT)


@pytest.mark.parametrize("route", ["/api/chat", "/v1/chat/completions"])
def test_a_client_that_hangs_up_gives_its_slot_back_once(route):
    with nodes("a") as (a,):
        a.gate = threading.Event()
        routed = RoutedUpstream(
            config([node_config(a, max_conns=1)], {"m": [Tier("x", ("a",))]}, wait_ms=5000)
        )
        node = routed.nodes["a"]
        with routed_proxy(routed) as (url, _):
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            with pytest.raises(requests.exceptions.ReadTimeout):
                requests.post(url + route, json=body, timeout=(WAIT, 0.3))
            assert a.entered.acquire(timeout=WAIT)
            assert _wait_idle(node)  # the hang-up cancelled it; the slot is back
            a.gate.set()
            a.gate = None
            answer = requests.post(url + route, json={**body, "stream": False}, timeout=WAIT)
            assert answer.status_code == 200 and answer.headers["x-llmchat-node"] == "a"
            assert _wait_idle(node) and node.inflight == 0


def test_x_llmchat_node_is_on_the_proxys_own_answers():
    with nodes("a") as (a,):
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}))
        with routed_proxy(routed) as (url, _):
            assert requests.get(url + "/health", timeout=WAIT).headers["x-llmchat-node"] == "proxy"
            bad = requests.post(url + "/api/chat", data=b"{", timeout=WAIT)
            assert bad.status_code == 400 and bad.headers["x-llmchat-node"] == "proxy"


@pytest.mark.parametrize("ending", ["settle", "cancel"])
def test_a_settle_hook_runs_once_however_the_response_ends(ending):
    from llmchat.response import Response, writer_of

    response = Response()
    ran: list[int] = []
    assert response._add_settle_hook(lambda: ran.append(1))
    if ending == "settle":
        writer_of(response).settle("connection", "refused")
    else:
        response.cancel()
    response.cancel()
    writer_of(response).settle()
    assert ran == [1]
    assert not response._add_settle_hook(lambda: ran.append(2))  # settled: the caller runs it


def test_an_anthropic_dialect_node_serves_the_ollama_face_and_is_not_relayed():
    from llmchat.testing import ScriptedServer

    from ...support.anthropic import message_events, sse, sse_reply

    text = {"type": "text", "text": "from the claude node"}
    message: dict = {"id": "msg_1", "type": "message", "role": "assistant", "content": [text]}
    message.update(model="claude-x", stop_reason="end_turn", stop_sequence=None)
    message["usage"] = {"input_tokens": 3, "output_tokens": 4}
    server = ScriptedServer(lambda request: sse_reply(sse(message_events(message)))).start()
    try:
        routed = RoutedUpstream(
            config(
                [node_config("claude", server.url, dialect="anthropic")],
                {"m": [Tier("claude-x", ("claude",))]},
            )
        )
        with routed_proxy(routed) as (url, _):
            answer = requests.post(
                url + "/api/chat",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                timeout=WAIT,
                stream=False,
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-llmchat-node"] == "claude"
            lines = [json.loads(line) for line in answer.text.splitlines() if line]
            assert "".join(line["message"]["content"] for line in lines) == "from the claude node"
            sent = server.requests[-1]
            assert sent.path.endswith("/messages") and sent.json()["model"] == "claude-x"
            with pytest.raises(openai.NotFoundError) as caught:  # the byte relay: at once
                chat(openai_client(url), "m")
            assert "the translating routes serve it" in caught.value.message
            assert caught.value.response.headers["x-llmchat-node"] == "proxy"
            assert len(server.requests) == 1
    finally:
        server.stop()


def test_the_relay_takes_an_aliass_openai_nodes_and_refuses_one_with_none():
    with nodes("box", "gpu") as (box, gpu):
        tiers = {
            "other": [Tier("x", ("box",))],
            "mixed": [Tier("x", ("box",)), Tier("y", ("gpu",))],
        }
        routed = RoutedUpstream(
            config([node_config(box, dialect="ollama"), node_config(gpu)], tiers)
        )
        with routed_proxy(routed) as (url, sink):
            client = openai_client(url)
            # No node of "other" speaks OpenAI's wire: a 404 no retry mends, not a 503.
            with pytest.raises(openai.NotFoundError) as caught:
                chat(client, "other", stream=True)
            assert "'other' is not served on this route" in caught.value.message
            assert "retry-after" not in caught.value.response.headers
            answer = chat(client, "mixed")  # the OpenAI node of its second tier
            assert answer.headers["x-llmchat-node"] == "gpu"
            assert answer.parse().choices[0].message.content == "answer from gpu"
            events = sink.wait(2)
        assert [(e["alias"], e["status"], e["error_type"]) for e in events] == [
            ("other", 404, "not_found"),
            ("mixed", 200, None),
        ]
        assert box.chats == 0 and [body["model"] for body in gpu.chat_bodies()] == ["y"]
