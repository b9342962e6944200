"""The Python SDKs through one routed proxy (``llmchat proxy --config``) over two dialects.

One proxy, started as a user starts it, routes ``local-coder`` to an
OpenAI-compatible node and ``claude-*`` to an Ollama node; the key ``alice``
may use only those, ``ci`` every model. Each SDK runs on its defaults
(retries included): it lists the models its key allows, chats streamed and
not on both nodes through its own face, and a model outside the policy is the
SDK's 403 error, sent once (``x-should-retry: false`` keeps the SDKs from
retrying). What routing adds is asserted on the answers: ``x-llmchat-node``
names the node that answered, ``x-request-id`` is there.

The OpenAI face's chat route is a byte relay of OpenAI's wire, so an OpenAI
client reaches the Ollama node through the Responses face (what Codex uses);
its chat route answers that alias with a 404 naming the routes that translate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from llmchat.testing import ChatResponder, ScriptedServer

from ..support.agent_upstream import shell_plan
from ..support.proxy_servers import ServedProxy
from .dialect_agents import OllamaAgent
from .routed_proxy import routed_proxy

ALICE, CI = "sk-alice-0123456789", "sk-ci-0123456789"
WAIT = 10.0
HI = [{"role": "user", "content": "hi"}]
GPU_TEXT = "answer from the gpu node"
BOX_TEXT = "answer from the ollama box"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedProxy]:
    gpu = ScriptedServer(ChatResponder(GPU_TEXT, model="qwen3-coder")).start()
    box = ScriptedServer(OllamaAgent([], shell_plan("true"), side_text=BOX_TEXT)).start()
    config: dict[str, Any] = {
        "nodes": [
            {"name": "gpu", "url": gpu.url, "dialect": "openai", "max_conns": 4},
            {"name": "box", "url": box.root, "dialect": "ollama", "api_key_env": "BOX_KEY"},
        ],
        "models": {
            "local-coder": [{"model": "qwen3-coder", "nodes": ["gpu"]}],
            "big": [{"model": "qwen3-coder", "nodes": ["gpu"]}],
            "claude-*": [{"model": "qwen3-coder:30b", "nodes": ["box"]}],
            "claude-haiku": [{"model": "qwen3-coder:30b", "nodes": ["box"]}],
        },
        "keys": [
            {"name": "alice", "key_env": "ALICE_KEY", "models": ["local-coder", "claude-*"]},
            {"name": "ci", "key_env": "CI_KEY"},
        ],
    }
    env = {"ALICE_KEY": ALICE, "CI_KEY": CI, "BOX_KEY": "box-node-secret"}
    try:
        with routed_proxy(config, env, tmp_path_factory.mktemp("routed")) as served:
            yield served
    finally:
        gpu.stop()
        box.stop()


class Sent:
    """An httpx request hook counting what a client really sent (its retries included)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, request: Any) -> None:  # an httpx (or httpx2) Request
        self.paths.append(request.url.path)

    def hooks(self) -> dict[str, Any]:
        return {"request": [self]}


@pytest.fixture
def clients() -> Iterator[contextlib.ExitStack]:
    """Closes every client a test made (an open pool would hold a socket)."""
    with contextlib.ExitStack() as stack:
        yield stack


def _openai(
    stack: contextlib.ExitStack, proxy: ServedProxy, key: str = ALICE, sent: Sent | None = None
) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(event_hooks=(sent or Sent()).hooks())
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=key, timeout=WAIT, http_client=http)
    stack.callback(client.close)
    return client


def _anthropic(
    stack: contextlib.ExitStack, proxy: ServedProxy, key: str = ALICE, sent: Sent | None = None
) -> anthropic.Anthropic:
    http = anthropic.DefaultHttpxClient(event_hooks=(sent or Sent()).hooks())
    client = anthropic.Anthropic(base_url=proxy.url, api_key=key, timeout=WAIT, http_client=http)
    stack.callback(client.close)
    return client


def _ollama(
    stack: contextlib.ExitStack, proxy: ServedProxy, key: str = ALICE, sent: Sent | None = None
) -> Any:
    ollama = pytest.importorskip("ollama")
    headers = {"Authorization": f"Bearer {key}"}
    client = ollama.Client(
        host=proxy.url, timeout=WAIT, headers=headers, event_hooks=(sent or Sent()).hooks()
    )
    stack.callback(client.close)
    return client


def _routed(headers: Any, node: str) -> None:
    assert headers["x-llmchat-node"] == node
    assert headers["x-request-id"]


def test_each_sdk_lists_only_what_its_key_allows(
    clients: contextlib.ExitStack, proxy: ServedProxy
) -> None:
    allowed = ["local-coder", "claude-haiku"]  # a glob names no model; alice may not use "big"
    assert [m.id for m in _openai(clients, proxy).models.list()] == allowed
    assert [m.id for m in _openai(clients, proxy, CI).models.list()] == [
        "local-coder",
        "big",
        "claude-haiku",
    ]
    page = _anthropic(clients, proxy).models.list()
    assert [(m.id, m.display_name, m.type) for m in page] == [(n, n, "model") for n in allowed]
    assert page.has_more is False and (page.first_id, page.last_id) == tuple(allowed)
    assert [m.model for m in _ollama(clients, proxy).list().models] == allowed


def test_openai_chats_on_the_openai_node_and_responds_from_the_ollama_node(
    clients: contextlib.ExitStack, proxy: ServedProxy
) -> None:
    client = _openai(clients, proxy)
    whole = client.chat.completions.with_raw_response.create(model="local-coder", messages=HI)
    _routed(whole.headers, "gpu")
    assert whole.parse().choices[0].message.content == GPU_TEXT
    with client.chat.completions.with_streaming_response.create(
        model="local-coder", messages=HI, stream=True
    ) as streamed:
        _routed(streamed.headers, "gpu")
        text = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
    assert text == GPU_TEXT
    # The chat route relays OpenAI's wire as it is: for the Ollama node's alias, a 404
    # pointing at the translating routes, sent once (no retry, no wait).
    sent = Sent()
    with pytest.raises(openai.NotFoundError) as relayed:
        _openai(clients, proxy, sent=sent).chat.completions.create(
            model="claude-sonnet-4-5", messages=HI
        )
    assert "/v1/responses" in relayed.value.message and sent.paths == ["/v1/chat/completions"]
    answer = client.responses.with_raw_response.create(model="claude-sonnet-4-5", input="hi")
    _routed(answer.headers, "box")
    assert answer.parse().output_text == BOX_TEXT
    with client.responses.with_streaming_response.create(
        model="claude-sonnet-4-5", input="hi", stream=True
    ) as streamed:
        _routed(streamed.headers, "box")
        deltas = [e.delta for e in streamed.parse() if e.type == "response.output_text.delta"]
    assert "".join(deltas) == BOX_TEXT


@pytest.mark.parametrize(
    ("model", "node", "text"),
    [
        ("claude-sonnet-4-5", "box", BOX_TEXT),
        ("local-coder", "gpu", GPU_TEXT),
    ],
)
def test_anthropic_chats_on_both_nodes(
    clients: contextlib.ExitStack, proxy: ServedProxy, model: str, node: str, text: str
) -> None:
    client = _anthropic(clients, proxy)
    whole = client.messages.with_raw_response.create(model=model, max_tokens=50, messages=HI)
    _routed(whole.headers, node)
    assert whole.parse().content[0].text == text
    with client.messages.stream(model=model, max_tokens=50, messages=HI) as streamed:
        assert streamed.response.headers["x-llmchat-node"] == node
        assert "".join(streamed.text_stream) == text


def test_ollama_chats_on_both_nodes(clients: contextlib.ExitStack, proxy: ServedProxy) -> None:
    client = _ollama(clients, proxy)
    for model, text in (("claude-haiku", BOX_TEXT), ("local-coder", GPU_TEXT)):
        assert client.chat(model=model, messages=HI).message.content == text
        parts = client.chat(model=model, messages=HI, stream=True)
        assert "".join(part.message.content for part in parts) == text


def test_a_model_outside_the_policy_is_each_sdks_403_sent_once(
    clients: contextlib.ExitStack, proxy: ServedProxy
) -> None:
    sent = Sent()  # every SDK retries by default (2 more tries); a 403 must not be retried
    with pytest.raises(openai.PermissionDeniedError) as in_openai:
        _openai(clients, proxy, sent=sent).chat.completions.create(model="big", messages=HI)
    _routed(in_openai.value.response.headers, "proxy")
    with pytest.raises(openai.PermissionDeniedError):
        _openai(clients, proxy, sent=sent).responses.create(model="big", input="hi")
    with pytest.raises(anthropic.PermissionDeniedError) as in_anthropic:
        _anthropic(clients, proxy, sent=sent).messages.create(
            model="big", max_tokens=5, messages=HI
        )
    _routed(in_anthropic.value.response.headers, "proxy")
    ollama = pytest.importorskip("ollama")
    with pytest.raises(ollama.ResponseError) as in_ollama:
        _ollama(clients, proxy, sent=sent).chat(model="big", messages=HI)
    assert in_ollama.value.status_code == 403
    assert sent.paths == ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/api/chat"]
    refused = proxy.usage.wait(4, route=None)
    refused = [e for e in refused if e.get("error_type") == "forbidden"]
    assert {(e["key_id"], e["status"]) for e in refused} == {("alice", 403)}
