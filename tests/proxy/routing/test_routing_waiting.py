"""A request a node accepted and never answers, when the node is found gone: moved, not lost.

What llama-server does on SIGTERM, on loopback: the listener closes at once
(a new connection is refused) while a request it had accepted stays open
with no answer. The next request to the node is refused; that ejects the
node and abandons the request waiting there, which goes to another node
before its first byte. Its client (the openai SDK) gets a 200 from the other
node long before the node's 60 s headers timeout.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.proxy.routing.waiting import Waiting

from ..support import anthropic_client
from .nodes_support import chat, config, node_config, nodes, openai_client, routed_proxy

WAIT = 10.0


class Unanswering:
    """A node that accepts requests and never answers; `close_listener` refuses new ones
    and keeps the accepted connections open (a llama-server after SIGTERM)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.accepted: list[socket.socket] = []
        self.received = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.accepted.append(conn)
        conn.recv(65536)  # the request's head (and body): read, never answered
        self.received.set()

    def close_listener(self) -> None:
        self.listener.close()

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


def _ask(face: str, url: str) -> tuple[str, str]:
    """One non-streamed chat through `face`'s real SDK: (the answering node, the text)."""
    if face == "openai":  # the byte relay
        answer = chat(openai_client(url), "m")
        return answer.headers["x-llmchat-node"], answer.parse().choices[0].message.content
    reply = anthropic_client(url).messages.with_raw_response.create(  # the Response path
        model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
    )
    return reply.headers["x-llmchat-node"], reply.parse().content[0].text


@contextlib.contextmanager
def _held_at_a_gone_node(face: str) -> Iterator[Any]:
    """A proxy over "gone" (tier 0) and b (tier 1), one request through `face` held
    unanswered at "gone", whose listener is then closed; yields a namespace."""
    gone = Unanswering()
    try:
        with nodes("b") as (b,):
            routed = RoutedUpstream(
                config(
                    [node_config("gone", gone.url), node_config(b)],
                    {"m": [Tier("x", ("gone",)), Tier("x", ("b",))]},
                )
            )
            with routed_proxy(routed) as (url, sink):
                # The clients' timeout: WAIT, far below the node's 60 s headers timeout.
                answers: list[tuple[str, str]] = []
                first = threading.Thread(target=lambda: answers.append(_ask(face, url)))
                first.start()
                assert gone.received.wait(WAIT)  # accepted by the node, unanswered
                gone.close_listener()  # "SIGTERM": new connections are refused
                yield types.SimpleNamespace(
                    b=b, routed=routed, url=url, sink=sink, first=first, answers=answers
                )
                first.join(WAIT)
                assert not first.is_alive()
                assert answers == [("b", "answer from b")]
                assert routed.nodes["gone"].report()["state"] == "ejected"
                assert routed.nodes["gone"].inflight == 0 and routed.waiting.count("gone") == 0
    finally:
        gone.close()


@pytest.mark.parametrize("face", ["openai", "anthropic"])
def test_a_request_a_gone_node_holds_unanswered_is_retried_when_the_node_refuses(
    face: str,
) -> None:
    with _held_at_a_gone_node(face) as held:
        # Refused at "gone": that ejects it, and the held request moves on too.
        assert _ask(face, held.url) == ("b", "answer from b")
        held.first.join(WAIT)
        events = held.sink.wait(2)
        assert sorted(e["node"] for e in events) == ["b", "b"]
        assert all(e["ok"] for e in events)
        assert held.b.chats == 2  # each served once


def test_a_request_waiting_alone_on_a_gone_node_is_freed_by_the_probe_that_finds_it_down() -> None:
    """No other request goes there (its conversation waits on this one): the health
    probe's refused connection is what frees it."""
    with _held_at_a_gone_node("openai") as held:
        assert held.routed.health.probe_now()["gone"].state == "down"  # refused
        held.first.join(WAIT)
        [event] = held.sink.wait(1)
        assert (event["ok"], event["node"]) == (True, "b")
        assert held.b.chats == 1


def test_waiting_abandons_only_its_node_and_only_while_held() -> None:
    waiting = Waiting()
    aborted: list[str] = []
    with (
        waiting.held("a", lambda: aborted.append("a1")),
        waiting.held("b", lambda: aborted.append("b")),
    ):
        assert waiting.count("a") == 1
        assert waiting.abandon("a") == 1
        assert waiting.abandon("a") == 0  # once
    assert waiting.abandon("b") == 0  # left: no longer waiting
    assert aborted == ["a1"]
