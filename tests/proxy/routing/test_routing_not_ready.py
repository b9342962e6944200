"""One 503 rule for requests and probes: the node is up but not serving yet, not failing.

`ejections.not_ready` says it once; the health monitor applies it to a
probe's answer (llama-server's ``/health``, or a dialect's model listing)
and to a request's (through `RoutedUpstream.on_failure`, for completions and
the OpenAI face's byte relay alike): the node is not eligible until a probe
finds it healthy, with no strike and no back-off. Loopback nodes; time is a
test clock, the probe schedule is driven with `run_due`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.ejections import ejects, not_ready
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.testing import RecordedRequest, Reply

from .nodes_support import Node, chat, config, node_config, openai_client, routed_proxy

LOADING = Reply.error(503, "Loading model", "unavailable_error")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ProbedNode(Node):
    """A loopback node whose probe routes (``/health``, ``/models``, ...) can answer `probe`."""

    def __init__(self, name: str) -> None:
        self.probe: Reply | None = None
        super().__init__(name)

    def _answer(self, request: RecordedRequest) -> Reply:
        if not request.path.endswith("/chat/completions") and self.probe is not None:
            return self.probe
        return super()._answer(request)


@pytest.mark.parametrize(
    ("error_class", "status", "ready", "ejected"),
    [
        ("http", 503, False, False),
        ("http", 500, True, True),
        ("http", 502, True, True),
        ("http", 429, True, False),
        ("http", None, True, True),
        ("connection", 503, True, True),  # a refused connection is no answer at all
        ("timeout", None, True, True),
    ],
)
def test_a_503_is_not_ready_never_an_ejection(
    error_class: str, status: int | None, ready: bool, ejected: bool
) -> None:
    assert not_ready(error_class, status) is not ready
    assert ejects(error_class, status) is ejected


@contextlib.contextmanager
def probed_nodes() -> Iterator[tuple[ProbedNode, ProbedNode]]:
    a, b = ProbedNode("a"), ProbedNode("b")
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def _routed(a: Node, b: Node, clock: Clock, **options: Any) -> RoutedUpstream:
    """Alias ``m``: node `a` first, `b` as the next tier (so a request tries `a` first)."""
    tiers = {"m": [Tier("x", ("a",)), Tier("x", ("b",))]}
    return RoutedUpstream(config([node_config(a, **options), node_config(b)], tiers), clock=clock)


def _state(routed: RoutedUpstream, name: str) -> tuple[str, bool, dict[str, Any]]:
    node = routed.nodes[name]
    report = node.report()
    return report["state"], report["eligible"], routed.health.report(node)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_probes_503_is_loading_whatever_the_dialect(dialect: str) -> None:
    """llama-server's ``/health`` and any dialect's model listing: a 503 is loading, not down."""
    clock = Clock()
    with probed_nodes() as (a, b):
        routed = _routed(a, b, clock, dialect=dialect)
        a.probe = LOADING
        results = routed.health.probe_now()
        assert results["a"].state == "loading"
        state, eligible, health = _state(routed, "a")
        assert (state, eligible) == ("loading", False)
        assert health["ejected"] is False and health["strikes"] == 0
        a.probe = None
        routed.health.probe_now()
        assert _state(routed, "a")[:2] == ("healthy", True)
        routed.close()


@pytest.mark.parametrize("face", ["completions", "relay"])
def test_a_requests_503_holds_the_node_until_a_probe_finds_it_healthy(face: str) -> None:
    """A request answered 503 goes to the next node; the 503 node is out, unstruck, until a
    probe says it serves: one probe later for a node that sheds load, longer for one loading."""
    clock = Clock()
    with probed_nodes() as (a, b):
        routed = _routed(a, b, clock)
        routed.health.run_due()  # the schedule runs (a test's `start`): both nodes healthy
        with routed_proxy(routed) as (url, sink):
            client = openai_client(url)

            def served_by() -> str:
                if face == "relay":  # the OpenAI face relays bytes: `relayed.relay_routed`
                    return str(chat(client, "m").headers["x-llmchat-node"])
                # The Anthropic face goes through `Completions` and `RoutedUpstream.start`.
                import anthropic

                answer = anthropic.Anthropic(
                    base_url=url, api_key="k", max_retries=0
                ).messages.with_raw_response.create(
                    model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
                )
                return str(answer.headers["x-llmchat-node"])

            a.override = lambda request: LOADING
            a.probe = LOADING  # still loading when probed
            assert served_by() == "b"
            state, eligible, health = _state(routed, "a")
            assert (state, eligible) == ("loading", False)
            assert health["ejected"] is False and health["strikes"] == 0
            chats = a.chats
            assert served_by() == "b" and a.chats == chats  # not tried while held
            routed.health.run_due()  # probed at once: still loading, still held
            assert _state(routed, "a")[:2] == ("loading", False)
            a.override, a.probe = None, None  # loaded
            clock.now += routed.health.interval
            routed.health.run_due()
            assert _state(routed, "a")[:2] == ("healthy", True)
            assert served_by() == "a"
            events = sink.wait(3)
            assert [e["node"] for e in events] == ["b", "b", "a"]
            assert all(e["ok"] for e in events)


def test_a_shedding_node_is_back_after_one_probe() -> None:
    """A plain 503 from a server whose probe still answers: out until that probe, no longer."""
    clock = Clock()
    with probed_nodes() as (a, b):
        routed = _routed(a, b, clock)
        routed.health.run_due()
        with routed_proxy(routed) as (url, _):
            a.override = lambda request: Reply.error(503, "overloaded", "server_error")
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "b"
            assert _state(routed, "a")[:2] == ("loading", False)
            a.override = None
            routed.health.run_due()  # due at once, at the same clock time: no interval waited
            assert _state(routed, "a")[:2] == ("healthy", True)
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "a"


def test_without_a_prober_a_503_stays_the_requests() -> None:
    """Nothing would make a held node eligible again: with no probe schedule, no hold."""
    clock = Clock()
    with probed_nodes() as (a, b):
        routed = _routed(a, b, clock)
        with routed_proxy(routed) as (url, _):
            a.override = lambda request: LOADING
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "b"
            assert _state(routed, "a")[:2] == ("healthy", True)
            assert routed.health.report(routed.nodes["a"])["strikes"] == 0
            a.override = None
            assert chat(openai_client(url), "m").headers["x-llmchat-node"] == "a"
