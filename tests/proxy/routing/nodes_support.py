"""Loopback nodes for the routing tests: scripted servers, a config over them, the proxy."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from llmchat.proxy.routing.config import NodeConfig, RoutingConfig, RoutingOptions, Tier
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer

from ...support.proxy import UsageSink, running_proxy

WAIT = 10.0


class Node:
    """One loopback node: a `ChatResponder` answering `text`, counting what it saw.

    `gate`, when set, holds every reply until it is set (`entered` says a request
    arrived); `concurrent`/`peak` count requests inside the responder at once.
    """

    def __init__(self, name: str, text: str | None = None, **options: Any) -> None:
        self.name = name
        self.responder = ChatResponder(text or f"answer from {name}", model=name, **options)
        self.lock = threading.Lock()
        self.concurrent = 0
        self.peak = 0
        self.chats = 0
        self.gate: threading.Event | None = None
        self.hold = 0.0
        self.entered = threading.Semaphore(0)
        self.override: Callable[[RecordedRequest], Reply | None] | None = None
        self.server = ScriptedServer(self._answer).start()

    @property
    def url(self) -> str:
        return self.server.url

    def _answer(self, request: RecordedRequest) -> Reply:
        chat = request.path.endswith("/chat/completions")
        with self.lock:
            if chat:
                self.chats += 1
            self.concurrent += 1
            self.peak = max(self.peak, self.concurrent)
        try:
            if chat:
                self.entered.release()
                if self.gate is not None:
                    self.gate.wait(WAIT)
                elif self.hold:
                    threading.Event().wait(self.hold)
                if self.override is not None:
                    reply = self.override(request)
                    if reply is not None:
                        return reply
            return self.responder(request)
        finally:
            with self.lock:
                self.concurrent -= 1

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [r.json() for r in self.server.requests if r.path.endswith("/chat/completions")]

    def stop(self) -> None:
        if self.gate is not None:
            self.gate.set()
        self.server.stop()


def closed_port_url() -> str:
    """A loopback URL nothing listens on (a connection there is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def config(
    nodes: Sequence[NodeConfig],
    models: dict[str, Sequence[Tier]],
    *,
    wait_ms: int = 2000,
    affinity: str = "none",
) -> RoutingConfig:
    return RoutingConfig(
        nodes=tuple(nodes),
        models={name: tuple(tiers) for name, tiers in models.items()},
        routing=RoutingOptions(wait_timeout_ms=wait_ms, affinity=affinity),
        source="test.yaml",
    )


def node_config(node: Node | str, url: str | None = None, **options: Any) -> NodeConfig:
    if isinstance(node, Node):
        return NodeConfig(node.name, url or node.url, **options)
    assert url is not None
    return NodeConfig(node, url, **options)


@contextlib.contextmanager
def nodes(*names: str, **options: Any) -> Iterator[list[Node]]:
    made = [Node(name, **options) for name in names]
    try:
        yield made
    finally:
        for node in made:
            node.stop()


@contextlib.contextmanager
def routed_proxy(routed: RoutedUpstream, **options: Any) -> Iterator[tuple[str, UsageSink]]:
    sink = UsageSink()
    try:
        with running_proxy(routed, usage_log=sink, **options) as url:
            yield url, sink
    finally:
        routed.close()


def openai_client(url: str, key: str = "client-key") -> Any:
    import openai

    from ..support import CLIENTS

    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=WAIT)
    CLIENTS.append(client)
    return client


def chat(client: Any, model: str, text: str = "hi", **options: Any) -> Any:
    """One non-streamed chat through the OpenAI SDK, raw: `.headers`, `.parse()`."""
    return client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": text}], **options
    )


def hold(node: Node, client: Any, model: str) -> threading.Thread:
    """A chat for `model` that `node` holds (its `gate`) until the test sets it; once inside."""
    node.gate = threading.Event()
    held = threading.Thread(target=chat, args=(client, model))
    held.start()
    assert node.entered.acquire(timeout=WAIT)
    return held
