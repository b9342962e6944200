"""A key's model policy in every face: a 403 before any node is chosen, in the face's shape."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
import requests

from llmchat.proxy.routing import KeyPolicy, KeyRing
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream

from ..support import anthropic_client, ollama_client
from .nodes_support import WAIT, chat, config, node_config, nodes, openai_client, routed_proxy

ALICE = KeyPolicy("alice", "ALICE_KEY", ("local-coder", "claude-*"))
CI = KeyPolicy("ci", "CI_KEY")
ENV = {"ALICE_KEY": "sk-alice-SECRET", "CI_KEY": "sk-ci-SECRET"}
MESSAGES = [{"role": "user", "content": "hi"}]


def _routed(a: Any) -> RoutedUpstream:
    tiers = {"local-coder": [Tier("x", ("a",))], "big": [Tier("y", ("a",))]}
    return RoutedUpstream(config([node_config(a)], tiers))


def test_a_model_outside_the_key_policy_is_a_403_in_every_face() -> None:
    with nodes("a") as (a,):
        with routed_proxy(_routed(a), keys=KeyRing([ALICE, CI], ENV)) as (url, sink):
            alice = openai_client(url, "sk-alice-SECRET")
            with pytest.raises(openai.PermissionDeniedError) as refused:
                chat(alice, "big")
            assert refused.value.response.headers["x-should-retry"] == "false"
            assert refused.value.response.headers["x-llmchat-node"] == "proxy"
            assert "'alice' may not use model 'big'" in refused.value.message
            with pytest.raises(openai.PermissionDeniedError):
                chat(alice, "big", stream=True)
            with pytest.raises(openai.PermissionDeniedError):
                alice.embeddings.create(model="big", input="hi")
            with pytest.raises(anthropic.PermissionDeniedError) as in_anthropic:
                anthropic_client(url, "sk-alice-SECRET").messages.create(
                    model="big", max_tokens=10, messages=MESSAGES
                )
            assert in_anthropic.value.body["type"] == "error"  # the Anthropic shape
            with pytest.raises(anthropic.PermissionDeniedError):
                anthropic_client(url, "sk-alice-SECRET").messages.create(
                    model="big", max_tokens=10, messages=MESSAGES, stream=True
                )
            with pytest.raises(openai.PermissionDeniedError):
                alice.responses.create(model="big", input="hi")
            ollama = ollama_client(url, headers={"Authorization": "Bearer sk-alice-SECRET"})
            with pytest.raises(Exception) as in_ollama:
                ollama.chat(model="big", messages=MESSAGES)
            assert getattr(in_ollama.value, "status_code", None) == 403
            with pytest.raises(Exception) as in_ollama_embed:
                ollama.embed(model="big", input="hi")
            assert getattr(in_ollama_embed.value, "status_code", None) == 403
            assert a.chats == 0  # refused before any node was chosen
            events = sink.wait(8)
            assert {(e["key_id"], e["error_type"]) for e in events} == {("alice", "forbidden")}
            # What the policy allows, and another key's all-models policy, are served.
            assert chat(alice, "local-coder").headers["x-llmchat-node"] == "a"
            assert chat(openai_client(url, "sk-ci-SECRET"), "big").headers["x-llmchat-node"] == "a"
            assert a.chats == 2


def test_without_keys_nothing_is_refused() -> None:
    with nodes("a") as (a,):
        with routed_proxy(_routed(a)) as (url, _):
            answer = requests.post(
                url + "/v1/chat/completions",
                json={"model": "big", "messages": MESSAGES},
                timeout=WAIT,
            )
            assert answer.status_code == 200


def test_the_model_lists_show_what_the_key_allows() -> None:
    with nodes("a") as (a,):
        tiers = {name: [Tier("x", ("a",))] for name in ("local-coder", "big", "claude-haiku")}
        routed = RoutedUpstream(config([node_config(a)], tiers))
        with routed_proxy(routed, keys=KeyRing([ALICE, CI], ENV)) as (url, _):
            alice = openai_client(url, "sk-alice-SECRET")
            assert [m.id for m in alice.models.list()] == ["local-coder", "claude-haiku"]
            ci = openai_client(url, "sk-ci-SECRET")
            assert [m.id for m in ci.models.list()] == ["local-coder", "big", "claude-haiku"]
            ollama = ollama_client(url, headers={"Authorization": "Bearer sk-alice-SECRET"})
            assert [m.model for m in ollama.list().models] == ["local-coder", "claude-haiku"]
