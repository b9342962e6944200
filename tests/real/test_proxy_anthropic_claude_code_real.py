"""The Anthropic face over a real llama-server, as Claude Code uses it, through the real SDK.

What only a real server shows: that ``count_tokens`` equals the
``input_tokens`` the same request then reports (chat template and tools
rendered by the server itself), that a prompt over the slot's context comes
back as ``prompt is too long`` with that same count, that a generation
stopped by the context window is ``model_context_window_exceeded``, and that
the server's reasoning arrives as a signed thinking block through the stream
helpers, pings or not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon, Settings
from llmchat.protocols.anthropic import thinking_signature

from ..support.proxy import running_proxy
from .conftest import LlamaServer, wait_until
from .test_llamacpp import HELLO, LONG, slots_idle
from .test_proxy_real import GREEDY, TOOLS, _anthropic, _close_clients

__all__ = ["_close_clients"]  # imported to run here too: it closes the clients a test made

anthropic = pytest.importorskip("anthropic")

CONTEXT = 1024  # tokens per slot (conftest's servers)
CONVERSATION = [
    {"role": "user", "content": "Say hello."},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": [{"type": "text", "text": "Tell me a joke about cats."}]},
]
HELLO_BLOCK = [{"type": "text", "text": "Say hello."}]
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.77; cch=1f2e;"},
    {"type": "text", "text": "You are a test bot.", "cache_control": {"type": "ephemeral"}},
]


def _idle(server: LlamaServer) -> LlamaServer:
    assert wait_until(lambda: slots_idle(server), 10), "a slot is still busy"
    return server


@pytest.fixture
def chatml(chatml_server: LlamaServer) -> Iterator[str]:
    with (
        OpenAICommon(_idle(chatml_server).url, model="tiny") as upstream,
        running_proxy(upstream, drop_billing_header=True, ping_interval=0.001) as url,
    ):
        yield url


@pytest.mark.parametrize(
    "fields",
    [
        {"messages": HELLO},
        {"messages": CONVERSATION, "system": SYSTEM},
    ],
    ids=["one turn", "system blocks and history"],
)
def test_count_tokens_is_the_prompt_the_server_then_counts(chatml, fields):
    client = _anthropic(chatml)
    counted = client.messages.count_tokens(model="tiny", **fields)
    message = client.messages.create(model="tiny", max_tokens=1, extra_body=GREEDY, **fields)
    usage = message.usage
    # Anthropic's input_tokens leaves out the prompt tokens the server had cached.
    assert counted.input_tokens == usage.input_tokens + usage.cache_read_input_tokens > 0


def test_a_repeated_prompt_is_read_from_the_cache(chatml):
    """llama-server keeps the slot's prompt: the second time it is a cache read, as Claude
    Code counts one, and the parts add up to the whole prompt."""
    client = _anthropic(chatml)
    fields: dict[str, Any] = dict(model="tiny", messages=CONVERSATION, system=SYSTEM)
    counted = client.messages.count_tokens(**fields).input_tokens
    for _ in range(2):
        usage = client.messages.create(max_tokens=1, extra_body=GREEDY, **fields).usage
    assert usage.cache_read_input_tokens > 0 and usage.cache_creation_input_tokens == 0
    assert usage.input_tokens + usage.cache_read_input_tokens == counted


def test_claude_code_history_through_a_strict_template(strict_server: LlamaServer):
    """Mistral Nemo's template raises unless user and assistant alternate after one system
    turn: Claude Code's mid-conversation system turns, thinking and tool results must fold
    into that shape."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "<reminder>"}, *HELLO_BLOCK]},
        {"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /w"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Say hello back.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "EmwK"},
                {"type": "text", "text": "Hello!"},
            ],
        },
        {"role": "system", "content": "The date changed."},
        {"role": "user", "content": "Again."},
    ]
    with (
        OpenAICommon(_idle(strict_server).url, model="tiny") as upstream,
        running_proxy(upstream) as url,
    ):
        message = _anthropic(url).messages.create(
            model="tiny",
            max_tokens=4,
            system=SYSTEM,
            messages=history,
            thinking={"type": "adaptive", "display": "omitted"},
            output_config={"effort": "medium"},
            extra_body={**GREEDY, "context_management": {"edits": []}},
        )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 4


def test_count_tokens_renders_tools_as_the_server_does(tools_server: LlamaServer):
    with (
        OpenAICommon(_idle(tools_server).url, model="tiny") as upstream,
        running_proxy(upstream) as url,
    ):
        client = _anthropic(url)
        fields: dict[str, Any] = dict(
            model="tiny",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=TOOLS,
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
        )
        counted = client.messages.count_tokens(**fields)
        without = client.messages.count_tokens(model="tiny", messages=fields["messages"])
        message = client.messages.create(max_tokens=1, extra_body=GREEDY, **fields)
    usage = message.usage
    assert counted.input_tokens == usage.input_tokens + usage.cache_read_input_tokens
    assert counted.input_tokens > without.input_tokens  # the tool definitions are counted


def test_a_prompt_over_the_context_is_prompt_is_too_long(chatml):
    messages = [{"role": "user", "content": "hello " * 1500}]
    client = _anthropic(chatml)
    counted = client.messages.count_tokens(model="tiny", messages=messages)
    assert counted.input_tokens > CONTEXT
    for stream in (False, True):
        # Streamed, the refusal may come after the first ping (this proxy pings every
        # millisecond): then it is an error event, with the same body, not a 400.
        with pytest.raises(anthropic.APIStatusError) as info:
            if stream:
                with client.messages.stream(model="tiny", max_tokens=8, messages=messages) as s:
                    s.get_final_message()
            else:
                client.messages.create(model="tiny", max_tokens=8, messages=messages)
        assert stream or info.value.status_code == 400
        assert info.value.body["error"] == {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {counted.input_tokens} tokens > {CONTEXT} maximum",
        }


def test_a_generation_stopped_by_the_context_window(chatml):
    """The random model never ends on its own: asked for more than the slot holds, it stops
    at the context, short of max_tokens."""
    message = _anthropic(chatml).messages.create(
        model="tiny", max_tokens=LONG, messages=HELLO, extra_body=GREEDY
    )
    assert message.stop_reason == "model_context_window_exceeded"
    assert message.usage.output_tokens < LONG
    assert message.usage.input_tokens + message.usage.output_tokens <= CONTEXT


def test_stream_helpers_with_thinking_over_pings(reasoning_server: LlamaServer):
    """The QwQ template opens a think block, and the random model never closes it: every
    token is reasoning, so the answer is one signed thinking block, as direct says."""
    settings = Settings(max_tokens=24, temperature=0)
    with OpenAICommon(_idle(reasoning_server).url, model="tiny") as direct:
        reference = direct.chat_completion(HELLO, settings=settings)
    assert reference.reasoning_text
    with (
        OpenAICommon(reasoning_server.url, model="tiny") as upstream,
        running_proxy(upstream, ping_interval=0.001) as url,
    ):
        client = _anthropic(url)
        kwargs: dict[str, Any] = dict(
            model="tiny",
            max_tokens=24,
            messages=HELLO,
            thinking={"type": "enabled", "budget_tokens": 1024},
            extra_body=GREEDY,
        )
        with client.messages.stream(**kwargs) as stream:
            kinds = [event.type for event in stream]
            streamed = stream.get_final_message()
        created = client.messages.create(**kwargs)
    assert kinds.count("message_start") == 1
    for message in (streamed, created):
        block = message.content[0]
        assert block.type == "thinking" and block.thinking == reference.reasoning_text
        assert block.signature == thinking_signature(reference.reasoning_text)
        assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 24
