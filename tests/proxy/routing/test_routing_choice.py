"""Admission under concurrency, weighted round-robin, prefix affinity: over loopback nodes."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from llmchat.proxy.routing.choice import Rankings, SmoothWRR, choose, prefix_key
from llmchat.proxy.routing.config import NodeConfig, Tier
from llmchat.proxy.routing.nodes import NodeState
from llmchat.proxy.routing.upstream import RoutedUpstream

from ..faces.gemini_support import Answered, request
from ..support import anthropic_client
from .nodes_support import chat, config, node_config, nodes, openai_client, routed_proxy

WAIT = 10.0


def _states(*weights: int) -> list[NodeState]:
    return [
        NodeState(NodeConfig(f"n{i}", "http://127.0.0.1:9/v1", weight=w), clock=lambda: 0.0)
        for i, w in enumerate(weights)
    ]


def test_smooth_wrr_interleaves_by_weight_like_nginx():
    a, b, c = _states(5, 1, 1)
    wrr = SmoothWRR()
    picks = [wrr.pick([a, b, c]).name for _ in range(7)]
    assert picks == ["n0", "n0", "n1", "n0", "n2", "n0", "n0"]


def test_max_conns_holds_under_concurrent_clients():
    with nodes("a", "b") as (a, b):
        a.hold = b.hold = 0.03
        routed = RoutedUpstream(
            config(
                [node_config(a, max_conns=2), node_config(b, max_conns=1)],
                {"m": [Tier("x", ("a", "b"))]},
                wait_ms=8000,
            )
        )
        with routed_proxy(routed) as (url, sink):
            openai_c, anthropic_c = openai_client(url), anthropic_client(url)
            errors: list[BaseException] = []

            def client_loop(i: int) -> None:
                try:
                    for _ in range(3):
                        if i % 2:
                            chat(openai_c, "m")
                        else:
                            anthropic_c.messages.create(
                                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
                            )
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT * 2)
            assert errors == []
            assert a.chats + b.chats == 24
            assert a.peak <= 2 and b.peak <= 1
            assert a.peak == 2  # the limit was reached, not merely respected
            assert len(sink.wait(24)) == 24
            assert routed.nodes["a"].inflight == routed.nodes["b"].inflight == 0
            openai_c.close()
            anthropic_c.close()


def test_weighted_round_robin_shares_requests_by_weight():
    with nodes("a", "b") as (a, b):
        routed = RoutedUpstream(
            config([node_config(a, weight=3), node_config(b)], {"m": [Tier("x", ("a", "b"))]})
        )
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)
            seen = Counter(chat(client, "m").headers["x-llmchat-node"] for _ in range(20))
            assert seen == {"a": 15, "b": 5}


def _conversation(n: int, turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"c{n}"}]
    for t in range(turns):
        messages += [
            {"role": "assistant", "content": f"answer {t}"},
            {"role": "user", "content": f"turn {t}"},
        ]
    return messages


def test_prefix_key_is_the_same_for_every_turn_and_differs_between_conversations():
    keys = {prefix_key({"messages": _conversation(1, t)}) for t in range(4)}
    assert len(keys) == 1 and None not in keys
    assert prefix_key({"messages": _conversation(2, 0)}) not in keys
    assert prefix_key({"messages": [{"role": "assistant", "content": "x"}]}) is None


def _gemini_turn(url: str, messages: list[dict[str, str]]) -> Answered:
    """The conversation as Gemini CLI sends it: the system turn as ``systemInstruction``."""
    contents = [
        {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
        for m in messages[1:]
    ]
    body = {
        "systemInstruction": {"parts": [{"text": messages[0]["content"]}]},
        "contents": contents,
    }
    answer = request(url, "POST", "/v1beta/models/m:generateContent", body)
    assert answer.status == 200, answer
    return answer


@pytest.mark.parametrize("face", ["openai", "anthropic", "gemini"])
def test_prefix_affinity_keeps_a_conversation_on_its_node(face):
    with nodes("a", "b", "c") as made:
        routed = RoutedUpstream(
            config(
                [node_config(n) for n in made],
                {"m": [Tier("x", ("a", "b", "c"))]},
                affinity="prefix",
            )
        )
        with routed_proxy(routed) as (url, _):
            oa, an = openai_client(url), anthropic_client(url)
            homes: dict[int, set[str]] = {}
            for n in range(12):
                for turn in range(3):
                    messages = _conversation(n, turn)
                    if face == "openai":
                        raw = oa.chat.completions.with_raw_response.create(
                            model="m", messages=messages
                        )
                    elif face == "gemini":
                        raw = _gemini_turn(url, messages)
                    else:
                        raw = an.messages.with_raw_response.create(
                            model="m", max_tokens=5, system="be brief", messages=messages[1:]
                        )
                    homes.setdefault(n, set()).add(raw.headers["x-llmchat-node"])
            assert all(len(h) == 1 for h in homes.values()), homes
            assert len(set().union(*homes.values())) >= 2  # spread over the nodes


def test_a_full_preferred_node_sends_the_turn_to_the_least_loaded():
    with nodes("a", "b", "c") as made:
        by_name = {n.name: n for n in made}
        routed = RoutedUpstream(
            config(
                [node_config(n, max_conns=1) for n in made],
                {"m": [Tier("x", ("a", "b", "c"))]},
                affinity="prefix",
                wait_ms=5000,
            )
        )
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)

            def turn(t: int) -> str:
                raw = client.chat.completions.with_raw_response.create(
                    model="m", messages=_conversation(7, t)
                )
                return raw.headers["x-llmchat-node"]

            home = turn(0)
            held_node = by_name[home]
            held_node.gate = threading.Event()
            holder = threading.Thread(target=turn, args=(1,))
            holder.start()
            assert held_node.entered.acquire(timeout=WAIT)  # turn 0's entry
            assert held_node.entered.acquire(timeout=WAIT)  # turn 1, now holding the slot
            other = turn(2)
            assert other != home
            held_node.gate.set()
            holder.join(WAIT)
            assert turn(3) == home  # back home once it has room


def test_choose_prefers_the_rendezvous_node_then_the_least_loaded():
    nodes_ = _states(1, 1, 1)
    for node in nodes_:
        node.max_conns = 2
    rankings = Rankings(nodes_)
    wrr = SmoothWRR()
    key = 12345
    home = choose(nodes_, key, wrr, rankings)
    assert home is not None and all(choose(nodes_, key, wrr, rankings) is home for _ in range(5))
    home.inflight = 2
    others = [n for n in nodes_ if n is not home]
    others[0].inflight = 1
    assert choose(nodes_, key, wrr, rankings) is others[1]
    others[1].inflight = 2
    assert choose(nodes_, key, wrr, rankings) is others[0]
    others[0].inflight = 2
    assert choose(nodes_, key, wrr, rankings) is None
