"""Failover before the first byte, in-band errors after it, ejection, reload under a stream."""

from __future__ import annotations

import threading

import anthropic
import openai
import pytest

from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import MAX_BACKOFF, PASSIVE_BACKOFF, RoutedUpstream
from llmchat.testing import Reply, WaitFor, Write

from ...support.chat_frames import chunk
from ..faces.gemini_support import HOWS, generate, text_of
from ..support import anthropic_client, cut_stream
from .nodes_support import (
    chat,
    closed_port_url,
    config,
    hold,
    node_config,
    nodes,
    openai_client,
    routed_proxy,
)

WAIT = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _frame(event: dict) -> bytes:
    import json

    return b"data: " + json.dumps(event).encode() + b"\n\n"


def test_a_refused_connection_moves_on_and_ejects_the_node():
    clock = Clock()
    with nodes("b") as (b,):
        routed = RoutedUpstream(
            config(
                [node_config("dead", closed_port_url()), node_config(b)],
                {"m": [Tier("x", ("dead",)), Tier("x", ("b",))]},
            ),
            clock=clock,
        )
        with routed_proxy(routed) as (url, sink):
            client = openai_client(url)
            assert chat(client, "m").headers["x-llmchat-node"] == "b"  # the relay path
            dead = routed.nodes["dead"].report()
            assert dead["state"] == "ejected" and dead["ejected_for_s"] == PASSIVE_BACKOFF
            # The Completions path (the Anthropic face) skips the ejected node.
            raw = anthropic_client(url).messages.with_raw_response.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
            assert raw.headers["x-llmchat-node"] == "b"
            assert b.chats == 2
            # Back-off over: eligible again, fails again, ejected for twice as long.
            clock.now += PASSIVE_BACKOFF
            assert routed.nodes["dead"].report()["state"] == "healthy"
            assert chat(client, "m").headers["x-llmchat-node"] == "b"
            assert routed.nodes["dead"].report()["ejected_for_s"] == 2 * PASSIVE_BACKOFF
            assert b.chats == 3
            events = sink.wait(3)
            assert {e["node"] for e in events} == {"b"}


def test_backoff_doubles_to_its_ceiling_and_a_success_readmits():
    clock = Clock()
    with nodes("a") as (a,):
        routed = RoutedUpstream(config([node_config(a)], {"m": [Tier("x", ("a",))]}), clock=clock)
        node = routed.nodes["a"]
        seconds = PASSIVE_BACKOFF
        for _ in range(6):  # each failure after the last back-off: twice as long
            routed.on_failure(node, "connection")
            routed.on_failure(node, "connection")  # during the back-off: the same ejection
            assert node.backoff == seconds
            clock.now += seconds
            seconds = min(MAX_BACKOFF, seconds * 2)
        assert node.backoff == MAX_BACKOFF
        routed.on_failure(node, "http", 404)  # the request's fault, not the node's
        routed.on_failure(node, "http", 503)  # loading or shedding load: the prober's to judge
        assert routed.health.report(node)["strikes"] == 6
        with routed_proxy(routed) as (url, _):  # the back-off is over: a request readmits it
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "a"
        assert node.backoff == 0.0 and node.report()["state"] == "healthy"
        assert routed.health.report(node) == {"ejected": False, "strikes": 0}
        routed.on_failure(node, "http", 500)
        assert node.backoff == PASSIVE_BACKOFF
        routed.close()


@pytest.mark.parametrize("face", ["openai", "anthropic", "gemini"])
def test_a_5xx_before_the_first_chunk_is_retried_on_another_node(face):
    with nodes("a", "b") as (a, b):
        a.override = lambda request: Reply.json({"error": {"message": "boom"}}, status=500)
        routed = RoutedUpstream(
            config([node_config(a), node_config(b)], {"m": [Tier("x", ("a", "b"))]})
        )
        with routed_proxy(routed) as (url, _):
            if face == "openai":
                raw = chat(openai_client(url), "m")
                text = raw.parse().choices[0].message.content
            elif face == "gemini":
                raw, chunks = generate(url, "generateContent", "m")
                text = text_of(chunks)
            else:
                raw = anthropic_client(url).messages.with_raw_response.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
                )
                text = raw.parse().content[0].text
            assert raw.headers["x-llmchat-node"] == "b"
            assert text == "answer from b"
            assert (a.chats, b.chats) == (1, 1)


@pytest.mark.parametrize("how", HOWS)
def test_a_gemini_model_name_is_an_alias_and_fails_over_before_the_first_byte(how):
    """Gemini CLI asks for ``gemini-2.5-pro``: an alias like any model name, its tier's
    model sent up; a node's 5xx before the first byte moves on, streamed or whole."""
    with nodes("a", "b") as (a, b):
        a.override = lambda request: Reply.json({"error": {"message": "boom"}}, status=500)
        tiers = {"gemini-2.5-pro": [Tier("x", ("a", "b"))]}
        routed = RoutedUpstream(config([node_config(a), node_config(b)], tiers))
        with routed_proxy(routed) as (url, sink):
            answer, chunks = generate(url, how, "models/gemini-2.5-pro")
            unknown, _ = generate(url, how, "gemini-1.0-unknown")
            events = sink.wait(2)
    [served] = [e for e in events if e["status"] == 200]
    [refused] = [e for e in events if e["status"] != 200]
    assert answer.status == 200 and answer.headers["x-llmchat-node"] == "b", answer
    assert text_of(chunks) == "answer from b"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert (a.chats, b.chats) == (1, 1)
    assert [body["model"] for body in a.chat_bodies() + b.chat_bodies()] == ["x", "x"]
    assert (served["face"], served["model"], served["alias"]) == ("gemini", *["gemini-2.5-pro"] * 2)
    assert (served["node"], served["tier"], served["ok"]) == ("b", 0, True)
    assert unknown.status == 404 and unknown.json()["error"]["status"] == "NOT_FOUND", unknown
    assert (refused["face"], refused["status"], refused["node"]) == ("gemini", 404, None)


def test_a_failure_after_the_first_chunk_is_in_band_never_a_switch():
    with nodes("a", "b") as (a, b):
        a.override = lambda request: cut_stream()
        clock = Clock()
        routed = RoutedUpstream(
            config([node_config(a), node_config(b)], {"m": [Tier("x", ("a",)), Tier("x", ("b",))]}),
            clock=clock,
        )
        with routed_proxy(routed) as (url, _):
            events = anthropic_client(url).messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            kinds = []
            with pytest.raises(anthropic.APIError, match="answer was unusable"):
                kinds.extend(event.type for event in events)
            assert "content_block_delta" in kinds  # the text came first
            assert routed.nodes["a"].report()["state"] == "ejected"  # the cut ejects it
            clock.now += PASSIVE_BACKOFF  # its back-off over, it is eligible again
            # The OpenAI relay: the frames that came, then the in-band error.
            stream = openai_client(url).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            got = []
            with pytest.raises(openai.APIError):
                for part in stream:
                    got.append(part.choices[0].delta.content if part.choices else None)
            assert "partial " in got
            assert b.chats == 0
            assert routed.nodes["a"].inflight == 0


def test_a_client_error_from_a_node_is_not_retried_and_names_the_node():
    with nodes("a", "b") as (a, b):
        a.override = lambda request: Reply.json({"error": {"message": "bad"}}, status=400)
        routed = RoutedUpstream(
            config([node_config(a), node_config(b)], {"m": [Tier("x", ("a", "b"))]})
        )
        with routed_proxy(routed) as (url, _):
            with pytest.raises(anthropic.BadRequestError) as info:
                anthropic_client(url).messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
                )
            assert info.value.response.headers["x-llmchat-node"] == "a"
            assert b.chats == 0
            assert routed.nodes["a"].report()["state"] == "healthy"


def test_reload_keeps_a_stream_in_flight_on_its_node():
    release = threading.Event()
    with nodes("a", "b") as (a, b):
        first = _frame(chunk({"role": "assistant", "content": "from a, "}))
        rest = [
            _frame(chunk({"content": "still a"})),
            _frame(chunk({}, "stop")),
            b"data: [DONE]\n\n",
        ]
        a.override = lambda request: Reply(
            200,
            {"Content-Type": "text/event-stream"},
            framing="chunked",
            steps=[Write(first), WaitFor(release, WAIT), *(Write(r) for r in rest)],
        )
        old = config([node_config(a), node_config(b)], {"m": [Tier("x", ("a",))]})
        routed = RoutedUpstream(old)
        with routed_proxy(routed) as (url, sink):
            client = openai_client(url)
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            parts = iter(stream)
            assert next(parts).choices[0].delta.content == "from a, "
            node_a = routed.nodes["a"]
            assert node_a.inflight == 1
            routed.reload(config([node_config(b)], {"m": [Tier("y", ("b",))]}, wait_ms=100))
            assert "a" not in routed.nodes
            assert chat(client, "m").headers["x-llmchat-node"] == "b"
            assert b.chat_bodies()[-1]["model"] == "y"
            release.set()
            rest_text = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            assert rest_text == "still a"
            assert a.chats == 1
            # The usage event is emitted as the proxy's body closes, after the Response
            # settled: waited for before the slot is looked at (the client may be faster).
            nodes_seen = sorted(e["node"] for e in sink.wait(2))
            assert nodes_seen == ["a", "b"]
            assert node_a.inflight == 0  # released to the node object it started on


def test_reload_keeps_a_persisting_nodes_slots():
    with nodes("a") as (a,):
        routed = RoutedUpstream(
            config([node_config(a, max_conns=1)], {"m": [Tier("x", ("a",))]}, wait_ms=100)
        )
        with routed_proxy(routed) as (url, _):
            held = hold(a, openai_client(url), "m")
            node = routed.nodes["a"]
            routed.reload(
                config([node_config(a, max_conns=1, weight=2)], {"n": [Tier("x", ("a",))]})
            )
            assert routed.nodes["a"] is node and node.inflight == 1 and node.weight == 2
            assert routed.model_names() == ["n"]
            assert a.gate is not None
            a.gate.set()
            held.join(WAIT)
            assert node.inflight == 0
