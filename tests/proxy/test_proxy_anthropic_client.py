"""The proxy's Anthropic face end to end, with the real `anthropic` client over a real WSGI
server: messages blocking and streamed, tools, errors, thinking blocks, count_tokens.
"""

from __future__ import annotations

import pytest

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, Reply

from ..support.proxy import UsageSink, running_proxy
from .support import (
    TEXT,
    TOOLS_ANTHROPIC,
    anthropic_client,
    cut_stream,
    last_chat_request,
    reasoning_stream,
    tool_stream,
)

ollama = pytest.importorskip("ollama")
anthropic = pytest.importorskip("anthropic")


# -- Anthropic face ---------------------------------------------------------------


def test_anthropic_create_blocking(backend):
    sink = UsageSink()
    with running_proxy(backend, usage_log=sink) as url:
        message = anthropic_client(url).messages.create(
            model="claude-x",
            max_tokens=64,
            system="be brief",
            messages=[{"role": "user", "content": "say hi"}],
        )
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == TEXT
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 4 and message.usage.output_tokens > 0
    [event] = sink.wait(1)
    assert event["face"] == "anthropic" and event["ok"] and event["stream"] is False


def test_anthropic_stream_final_message(backend, upstream_server):
    with running_proxy(backend) as url:
        with anthropic_client(url).messages.stream(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "say hi"}]
        ) as stream:
            texts = list(stream.text_stream)
            message = stream.get_final_message()
    assert "".join(texts) == TEXT
    assert message.content[0].text == TEXT
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0
    sent = last_chat_request(upstream_server)
    assert sent["max_tokens"] == 64


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_tool_use(upstream_server, stream):
    upstream_server.set_script([tool_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = anthropic_client(url)
        kwargs = dict(
            model="claude-x",
            max_tokens=64,
            tools=TOOLS_ANTHROPIC,
            messages=[{"role": "user", "content": "weather in Oslo?"}],
        )
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kwargs)
    uses = [(b.type, b.id, b.name, b.input) for b in message.content]
    assert uses == [
        ("tool_use", "call_a", "get_weather", {"city": "Oslo"}),
        ("tool_use", "call_b", "get_time", {"tz": "CET"}),
    ]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 7)
    sent = last_chat_request(upstream_server)
    assert sent["tools"][0]["function"]["parameters"]["required"] == ["city"]


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_length_is_max_tokens(upstream_server, stream):
    upstream_server.set_script(ChatResponder(TEXT, finish_reason="length"))
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = anthropic_client(url)
        kwargs = dict(model="c", max_tokens=3, messages=[{"role": "user", "content": "hi"}])
        if stream:
            with client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = client.messages.create(**kwargs)
    assert message.stop_reason == "max_tokens"
    assert message.content[0].text == TEXT


def test_anthropic_stream_cut_off_raises(upstream_server):
    upstream_server.set_script([cut_stream()])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with pytest.raises(anthropic.APIError) as info:
            with anthropic_client(url).messages.stream(
                model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            ) as s:
                s.get_final_message()
    assert "The upstream server's answer was unusable" in str(info.value)


def test_anthropic_upstream_rate_limit_keeps_its_status(upstream_server):
    upstream_server.set_script([Reply.error(429, "slow down", headers={"Retry-After": "3"})])
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with pytest.raises(anthropic.RateLimitError) as info:
            anthropic_client(url).messages.create(
                model="c", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
            )
    assert info.value.body["error"]["type"] == "rate_limit_error"
    message = info.value.body["error"]["message"]
    assert message == "The upstream server is rate limiting requests (HTTP 429)"


def test_anthropic_bad_request_is_invalid_request_error(backend):
    with running_proxy(backend) as url:
        with pytest.raises(anthropic.BadRequestError) as info:
            anthropic_client(url).messages.create(
                model="c",
                max_tokens=8,
                messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}],
            )
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "messages.0.content.0.document" in info.value.body["error"]["message"]


@pytest.mark.parametrize("enabled", [True, False])
def test_anthropic_thinking_blocks_only_when_enabled(upstream_server, enabled):
    upstream_server.set_script([reasoning_stream()])
    extra = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if enabled else {}
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        with anthropic_client(url).messages.stream(
            model="c", max_tokens=2048, messages=[{"role": "user", "content": "hi"}], **extra
        ) as s:
            message = s.get_final_message()
    kinds = [block.type for block in message.content]
    if enabled:
        assert kinds == ["thinking", "text"]
        assert message.content[0].thinking == "Let me think. "
    else:
        assert kinds == ["text"]
    assert message.content[-1].text == "Answer."


# -- Anthropic count_tokens ------------------------------------------------------


def _tokenizing(request):
    """llama-server's /tokenize (one token per word) beside the chat routes."""
    if request.path == "/tokenize":
        return Reply.json({"tokens": list(range(len(request.json()["content"].split())))})
    return ChatResponder(TEXT)(request)


def test_anthropic_count_tokens_uses_the_upstream_tokenizer(upstream_server):
    upstream_server.set_script(_tokenizing)
    with OpenAICommon(upstream_server.url) as b, running_proxy(b) as url:
        client = anthropic_client(url)
        short = client.messages.count_tokens(
            model="c", messages=[{"role": "user", "content": "one two three"}]
        )
        longer = client.messages.count_tokens(
            model="c",
            system="be brief",
            messages=[{"role": "user", "content": "one two three four five"}],
        )
    # No template on the backend: each message is its words plus ROLE_OVERHEAD (4).
    assert short.input_tokens == 3 + 4
    assert longer.input_tokens == (2 + 4) + (5 + 4)
    assert not [r for r in upstream_server.requests if r.path.endswith("/chat/completions")]


def test_anthropic_count_tokens_without_a_tokenizer_is_not_found(backend):
    with running_proxy(backend) as url:
        with pytest.raises(anthropic.NotFoundError) as info:
            anthropic_client(url).messages.count_tokens(
                model="c", messages=[{"role": "user", "content": "hi"}]
            )
    assert "tokenizer" in info.value.body["error"]["message"]
