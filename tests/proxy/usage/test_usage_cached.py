"""Usage events carry the cached prompt tokens the upstream reported, for every face.

The upstream is a loopback server answering as llama-server does: ``usage``
with ``prompt_tokens_details.cached_tokens`` (and ``timings.cache_n``, the
same count), in the body or, streamed, in the last event when the request
asked for usage. Each face is driven by its real client (the ``ollama``,
``anthropic`` and ``openai`` SDKs, llmchat's own `Gemini`; the OpenAI face's
chat completions are a byte relay, the Responses face translates), streamed and not, over one
upstream and over a `RoutedUpstream` (whose events also name the node, the
tier and the alias).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.backends.gemini import Gemini
from llmchat.proxy.routing.config import Tier
from llmchat.proxy.routing.upstream import RoutedUpstream
from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer

from ...support.proxy import UsageSink, running_proxy
from ..routing.nodes_support import config, node_config
from ..support import CLIENTS, anthropic_client, ollama_client

PROMPT, CACHED, OUTPUT = 12, 9, 2
TEXT = "cached hello"


def _usage(cached: bool = True) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": PROMPT,
        "completion_tokens": OUTPUT,
        "total_tokens": PROMPT + OUTPUT,
    }
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": CACHED}
    return usage


TIMINGS = {"cache_n": CACHED, "prompt_n": PROMPT - CACHED, "predicted_n": OUTPUT}


def llama_like(request: RecordedRequest, cached: str | None = "both") -> Reply:
    """A chat completion as llama-server answers one whose prompt was mostly cached.

    `cached`: ``both`` (today's llama-server: the usage details and
    ``timings.cache_n``), ``timings`` (an older one: ``cache_n`` only), None (a
    server that keeps no count: neither).
    """
    extra = {"timings": TIMINGS} if cached is not None else {}
    if not request.path.endswith("/chat/completions"):
        return ChatResponder(TEXT, model="x")(request)  # /models, /props, /health (404)
    body = request.json()
    head = {"id": "chatcmpl-1", "created": 0, "model": "x", "system_fingerprint": "b1"}
    if not body.get("stream"):
        message = {"role": "assistant", "content": TEXT}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        whole = {**head, "object": "chat.completion", "choices": [choice]}
        return Reply.json({**whole, "usage": _usage(cached == "both"), **extra})
    chunk = {**head, "object": "chat.completion.chunk"}
    events: list[dict[str, Any]] = [
        {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": TEXT}}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        events.append({**chunk, "choices": [], "usage": _usage(cached == "both"), **extra})
    return Reply.sse(events)


@contextlib.contextmanager
def proxy(routed: bool, script: Any = llama_like) -> Iterator[tuple[str, UsageSink]]:
    """The proxy over a llama-like loopback server: directly, or as node ``a`` of alias ``m``."""
    sink = UsageSink()
    with ScriptedServer(script) as url:
        if routed:
            upstream: Any = RoutedUpstream(
                config([node_config("a", url + "/v1")], {"m": [Tier("x", ("a",))]})
            )
        else:
            upstream = OpenAICommon(url + "/v1")
        try:
            with running_proxy(upstream, usage_log=sink) as proxy_url:
                yield proxy_url, sink
        finally:
            upstream.close()


def _openai(url: str) -> Any:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=10.0)
    CLIENTS.append(client)
    return client


MESSAGES = [{"role": "user", "content": "hello again"}]


Seen = tuple[str, Any]
"""The answer's text, and the cached count the client was shown (None where it is not)."""


def ollama_chat(url: str, stream: bool) -> Seen:
    client = ollama_client(url)
    if not stream:
        answer = client.chat(model="m", messages=MESSAGES)
        assert answer["prompt_eval_count"] == PROMPT
        return str(answer["message"]["content"]), None
    parts = list(client.chat("m", MESSAGES, stream=True))
    return "".join(part["message"]["content"] for part in parts), None


def anthropic_chat(url: str, stream: bool) -> Seen:
    client = anthropic_client(url)
    if not stream:
        answer = client.messages.create(model="m", max_tokens=8, messages=MESSAGES)
        return str(answer.content[0].text), answer.usage.cache_read_input_tokens
    with client.messages.stream(model="m", max_tokens=8, messages=MESSAGES) as events:
        text = "".join(events.text_stream)
        return text, events.get_final_message().usage.cache_read_input_tokens


def openai_chat(url: str, stream: bool) -> Seen:
    """The OpenAI face: the upstream's bytes relayed, its usage read as they pass."""
    client = _openai(url)
    if not stream:
        answer = client.chat.completions.create(model="m", messages=MESSAGES)
        details = answer.usage.prompt_tokens_details
        return str(answer.choices[0].message.content), details and details.cached_tokens
    chunks = list(
        client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    details = chunks[-1].usage.prompt_tokens_details
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, details and details.cached_tokens


def responses_chat(url: str, stream: bool) -> Seen:
    """The Responses face (its events say ``openai``): the count in ``input_tokens_details``."""
    client = _openai(url)
    if not stream:
        answer = client.responses.create(model="m", input="hello again")
    else:
        with client.responses.stream(model="m", input="hello again") as events:
            for _ in events:
                pass
            answer = events.get_final_response()
    assert answer.usage is not None
    return str(answer.output_text), answer.usage.input_tokens_details.cached_tokens


def gemini_chat(url: str, stream: bool) -> Seen:
    """The Gemini face, read by llmchat's own Gemini client: the count in
    ``usageMetadata.cachedContentTokenCount``."""
    with Gemini(url + "/v1beta", model="m", api_key="k") as client:
        if stream:
            answer = client.chat_completion_stream(MESSAGES).wait(10.0)
        else:
            answer = client.chat_completion(MESSAGES)
    assert answer.is_success and answer.prompt_tokens == PROMPT, answer.err
    return answer.msg, answer.cached_tokens


FACES: dict[str, Callable[[str, bool], Seen]] = {
    "ollama": ollama_chat,
    "anthropic": anthropic_chat,
    "openai": openai_chat,
    "responses": responses_chat,
    "gemini": gemini_chat,
}


@pytest.mark.parametrize("routed", [False, True], ids=["one-upstream", "routed"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("face", list(FACES))
def test_the_event_reports_the_cached_prompt_tokens(face: str, stream: bool, routed: bool) -> None:
    with proxy(routed) as (url, sink):
        text, shown = FACES[face](url, stream)
        [event] = sink.wait(1)
    assert text == TEXT
    # Every client but Ollama's (its API has no such count) is shown it too.
    assert shown == (None if face == "ollama" else CACHED)
    assert event["ok"] is True and event["stream"] is stream
    assert event["face"] == ("openai" if face == "responses" else face)
    assert (event["input_tokens"], event["cached_tokens"]) == (PROMPT, CACHED)
    assert event["output_tokens"] == OUTPUT
    if routed:
        assert (event["node"], event["tier"], event["alias"]) == ("a", 0, "m")
    else:
        assert (event["node"], event["tier"], event["alias"]) == (None, None, None)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("face", list(FACES))
def test_an_upstream_that_does_not_say_leaves_it_unknown(face: str, stream: bool) -> None:
    """No cache count in the usage: None (not reported), never a made-up 0."""
    with proxy(True, lambda request: llama_like(request, cached=None)) as (url, sink):
        assert FACES[face](url, stream)[0] == TEXT
        [event] = sink.wait(1)
    assert event["ok"] is True and event["input_tokens"] == PROMPT
    assert event["cached_tokens"] is None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("face", list(FACES))
def test_an_older_llama_servers_cache_n_is_read(face: str, stream: bool) -> None:
    """A llama-server from before ``prompt_tokens_details`` says it in ``timings.cache_n``."""
    with proxy(True, lambda request: llama_like(request, cached="timings")) as (url, sink):
        assert FACES[face](url, stream)[0] == TEXT
        [event] = sink.wait(1)
    assert (event["input_tokens"], event["cached_tokens"]) == (PROMPT, CACHED)


def anthropic_like(request: RecordedRequest) -> Reply:
    """A Messages answer as Anthropic gives one whose prompt was mostly read from its cache."""
    if not request.path.endswith("/messages"):
        return Reply.json({"data": [{"id": "x", "type": "model"}], "has_more": False})
    usage = {"input_tokens": PROMPT - CACHED, "cache_read_input_tokens": CACHED}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "x"}
    if not request.json().get("stream"):
        content = [{"type": "text", "text": TEXT}]
        whole = {**message, "content": content, "stop_reason": "end_turn"}
        return Reply.json({**whole, "usage": {**usage, "output_tokens": OUTPUT}})
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    return Reply.sse(
        [
            {"type": "message_start", "message": start},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": TEXT},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": OUTPUT},
            },
            {"type": "message_stop"},
        ]
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("face", ["anthropic", "responses", "gemini"])
def test_a_count_from_another_dialects_node_reaches_the_client(face: str, stream: bool) -> None:
    """An Anthropic node's ``cache_read_input_tokens`` is shown to the translating faces'
    clients in their own words, streamed as whole (not only on the usage event)."""
    sink = UsageSink()
    with ScriptedServer(anthropic_like) as url:
        node = node_config("a", url + "/v1", dialect="anthropic")
        upstream = RoutedUpstream(config([node], {"m": [Tier("x", ("a",))]}))
        try:
            with running_proxy(upstream, usage_log=sink) as proxy_url:
                text, shown = FACES[face](proxy_url, stream)
                [event] = sink.wait(1)
        finally:
            upstream.close()
    assert text == TEXT
    assert shown == CACHED
    assert event["cached_tokens"] == CACHED and event["node"] == "a"
