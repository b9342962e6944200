"""The usage event's cached prompt tokens are a real llama-server's own count.

A request sent twice, the same bytes: llama-server keeps the first one's KV
cache in its slot and serves the second's prompt from it, and says so
(``usage.prompt_tokens_details.cached_tokens``, equal to ``timings.cache_n``).
Through the proxy, over one upstream and routed, the event of the second
request carries that count: what the client itself was shown.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream

from ..proxy.routing.nodes_support import config, node_config
from ..support.proxy import UsageSink, running_proxy
from .conftest import LlamaServer, wait_until
from .test_llamacpp import slots_idle

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

WAIT = 30.0


@contextlib.contextmanager
def _proxy(server: LlamaServer, routed: bool) -> Iterator[tuple[str, UsageSink]]:
    assert wait_until(lambda: slots_idle(server), 10), "a slot is still busy"
    upstream: Any
    if routed:
        nodes = [node_config("gpu-a", server.url)]
        upstream = RoutedUpstream(config(nodes, {"tiny": [Tier("tiny", ("gpu-a",))]}))
    else:
        upstream = OpenAICommon(server.url, model="tiny")
    sink = UsageSink()
    try:
        with running_proxy(upstream, usage_log=sink) as url:
            yield url, sink
    finally:
        upstream.close()


def _prompt() -> list[dict[str, str]]:
    """A prompt no earlier request shares beyond the template's first tokens."""
    words = " ".join(uuid.uuid4().hex[i : i + 4] for i in range(0, 32, 4))
    return [{"role": "user", "content": f"Remember these words, in order: {words}"}]


def _ask_openai(url: str, messages: list[dict[str, str]]) -> int | None:
    """Through the OpenAI face (a byte relay): the cached count the client was shown."""
    with openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=WAIT) as client:
        answer = client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=4, temperature=0
        )
    details = answer.usage.prompt_tokens_details
    return None if details is None else details.cached_tokens


def _ask_anthropic(url: str, messages: list[dict[str, str]]) -> int | None:
    """Through the Anthropic face (translated): ``cache_read_input_tokens``."""
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=WAIT) as client:
        answer = client.messages.create(model="tiny", max_tokens=4, messages=messages)
    cached: int | None = answer.usage.cache_read_input_tokens
    return cached


@pytest.mark.parametrize("routed", [False, True], ids=["one-upstream", "routed"])
@pytest.mark.parametrize("face", ["openai", "anthropic"])
def test_a_second_identical_request_reports_its_cache_hits(
    chatml_server: LlamaServer, face: str, routed: bool
) -> None:
    ask = _ask_openai if face == "openai" else _ask_anthropic
    messages = _prompt()
    with _proxy(chatml_server, routed) as (url, sink):
        first_shown = ask(url, messages)
        second_shown = ask(url, messages)
        first, second = sink.wait(2)
    assert first["ok"] and second["ok"]
    assert first["input_tokens"] == second["input_tokens"] > 0
    # The first request's own words were never seen: at most the template's head was cached.
    assert (
        first["cached_tokens"] is not None and first["cached_tokens"] < first["input_tokens"] // 2
    )
    # The second is served from the first's cache: all but the token the server recomputes.
    assert second["input_tokens"] // 2 < second["cached_tokens"] < second["input_tokens"]
    assert (first["cached_tokens"], second["cached_tokens"]) == (first_shown, second_shown)
    if routed:
        assert second["node"] == "gpu-a" and second["alias"] == "tiny"
