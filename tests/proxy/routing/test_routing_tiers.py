"""Aliases, tiers and the 429: the routed proxy over loopback nodes, through the real SDKs."""

from __future__ import annotations

import threading

import openai
import pytest

from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream

from ..support import anthropic_client
from .nodes_support import chat, config, hold, node_config, nodes, openai_client, routed_proxy

WAIT = 10.0


def test_alias_rewrites_the_model_and_names_the_node():
    with nodes("gpu-a") as (a,):
        routed = RoutedUpstream(
            config([node_config(a)], {"local-coder": [Tier("qwen3-coder", ("gpu-a",))]})
        )
        with routed_proxy(routed) as (url, sink):
            raw = chat(openai_client(url), "local-coder")
            assert raw.headers["x-llmchat-node"] == "gpu-a"
            assert raw.parse().choices[0].message.content == "answer from gpu-a"
            assert a.chat_bodies()[-1]["model"] == "qwen3-coder"
            (event,) = sink.wait(1)
            assert (event["node"], event["tier"], event["alias"]) == ("gpu-a", 0, "local-coder")


def test_glob_longest_match_wins_and_unknown_model_is_a_404_from_the_proxy():
    with nodes("a", "b") as (a, b):
        routed = RoutedUpstream(
            config(
                [node_config(a), node_config(b)],
                {"claude-*": [Tier("m-a", ("a",))], "claude-opus-*": [Tier("m-b", ("b",))]},
            )
        )
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)
            assert chat(client, "claude-opus-4").headers["x-llmchat-node"] == "b"
            assert chat(client, "claude-haiku").headers["x-llmchat-node"] == "a"
            with pytest.raises(openai.NotFoundError) as caught:
                chat(client, "gpt-nothing")
            assert caught.value.response.headers["x-llmchat-node"] == "proxy"
            assert "gpt-nothing" in caught.value.message
            assert a.chats + b.chats == 2
            assert routed.model_names() == []  # globs name no model


def test_model_names_are_the_exact_aliases_once():
    with nodes("a") as (a,):
        routed = RoutedUpstream(
            config(
                [node_config(a)],
                {"x": [Tier("m", ("a",))], "y": [Tier("m", ("a",))], "z-*": [Tier("m", ("a",))]},
            )
        )
        with routed_proxy(routed) as (url, _):
            listed = [m.id for m in openai_client(url).models.list()]
            assert listed == ["x", "y"] or sorted(listed) == ["x", "y"]
        assert routed.model_names() == ["x", "y"]


def test_a_full_tier_with_no_wait_falls_to_the_next():
    with nodes("gpu", "cloud") as (gpu, cloud):
        routed = RoutedUpstream(
            config(
                [node_config(gpu, max_conns=1), node_config(cloud)],
                {"m": [Tier("big", ("gpu",), wait_ms=0), Tier("small", ("cloud",))]},
            )
        )
        with routed_proxy(routed) as (url, sink):
            client = openai_client(url)
            held = hold(gpu, client, "m")
            raw = chat(client, "m")
            assert raw.headers["x-llmchat-node"] == "cloud"
            assert cloud.chat_bodies()[-1]["model"] == "small"
            assert gpu.gate is not None
            gpu.gate.set()
            held.join(WAIT)
            tiers = sorted(e["tier"] for e in sink.wait(2))
            assert tiers == [0, 1]


def test_no_slot_in_time_is_a_429_in_the_face_shape_with_retry_after():
    with nodes("gpu") as (gpu,):
        routed = RoutedUpstream(
            config([node_config(gpu, max_conns=1)], {"m": [Tier("big", ("gpu",))]}, wait_ms=150)
        )
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)
            held = hold(gpu, client, "m")
            with pytest.raises(openai.RateLimitError) as caught:
                chat(client, "m")
            headers = caught.value.response.headers
            assert headers["x-llmchat-node"] == "proxy"
            assert int(headers["retry-after"]) >= 1
            assert caught.value.body["type"] == "rate_limit_error" or caught.value.body
            # The Anthropic face answers in its own shape.
            anthropic = pytest.importorskip("anthropic")
            with pytest.raises(anthropic.RateLimitError) as shaped:
                anthropic_client(url).messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
                )
            assert shaped.value.body["type"] == "error"
            assert int(shaped.value.response.headers["retry-after"]) >= 1
            assert gpu.gate is not None
            gpu.gate.set()
            held.join(WAIT)
            assert gpu.chats == 1


def test_a_waiting_request_gets_the_slot_a_release_frees():
    with nodes("gpu") as (gpu,):
        gpu.gate = threading.Event()
        routed = RoutedUpstream(
            config([node_config(gpu, max_conns=1)], {"m": [Tier("big", ("gpu",))]}, wait_ms=5000)
        )
        with routed_proxy(routed) as (url, _):
            client = openai_client(url)
            results: list[str] = []

            def ask() -> None:
                results.append(chat(client, "m").headers["x-llmchat-node"])

            first = threading.Thread(target=ask)
            first.start()
            assert gpu.entered.acquire(timeout=WAIT)
            second = threading.Thread(target=ask)
            second.start()
            assert not gpu.entered.acquire(timeout=0.1)  # the second waits for admission
            gpu.gate.set()
            first.join(WAIT)
            second.join(WAIT)
            assert results == ["gpu", "gpu"]
            assert gpu.peak == 1


def test_anthropic_client_is_served_by_a_routed_node():
    with nodes("gpu-a") as (a,):
        routed = RoutedUpstream(config([node_config(a)], {"claude-*": [Tier("q", ("gpu-a",))]}))
        with routed_proxy(routed) as (url, _):
            client = anthropic_client(url)
            raw = client.messages.with_raw_response.create(
                model="claude-sonnet-4", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
            )
            assert raw.headers["x-llmchat-node"] == "gpu-a"
            assert raw.parse().content[0].text == "answer from gpu-a"
