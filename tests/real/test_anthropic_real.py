"""`Anthropic` against a real llama-server's ``/v1/messages`` (the tiny random-weight model).

What the loopback server cannot prove: that llmchat's Anthropic request is one
the pinned llama-server accepts, that its answers (llama-server's own
deviations included: no ``input`` on a streamed ``tool_use`` start, tool blocks
that interleave, ``end_turn`` for a stop sequence) decode to the Response the
OpenAI path gives, and that a cancel in prefill really frees the slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import Settings
from llmchat.backends.anthropic import Anthropic

from ..support.chat_frames import WEATHER
from .conftest import LlamaServer, _serve, wait_until
from .test_llamacpp import LONG, predicted_tokens, slots_idle

HELLO = [{"role": "user", "content": "Say hello."}]
KEY = "sk-ant-real-test-key"


def anthropic(server: LlamaServer, **kwargs: Any) -> Anthropic:
    kwargs.setdefault("settings", Settings(max_tokens=16, temperature=0))
    kwargs.setdefault("api_key", "")  # never the environment's key
    return Anthropic(server.url, model="tiny", **kwargs)


# -- text, usage, length ----------------------------------------------------------------------


def test_blocking_hits_max_tokens_as_a_length_failure(chatml_server: LlamaServer) -> None:
    response = anthropic(chatml_server).chat_completion(HELLO)
    assert (response.is_success, response.finish_reason, response.err) == (
        False,
        "length",
        "Hit max tokens",
    )
    assert response.provider_finish_reason == "max_tokens"
    assert response.latest.strip() and response.completion_tokens == 16
    assert response.prompt_tokens and response.prompt_tokens > 0
    assert response.total_tokens == response.prompt_tokens + 16
    assert response.id and response.model


def test_blocking_and_streamed_agree(chatml_server: LlamaServer) -> None:
    b = anthropic(chatml_server, settings=Settings(max_tokens=12, temperature=0))
    blocking = b.chat_completion(HELLO)
    streamed = b.chat_completion_stream(HELLO).wait(60)
    assert streamed.is_done
    for field in ("msg", "finish_reason", "provider_finish_reason", "err", "completion_tokens"):
        assert getattr(streamed, field) == getattr(blocking, field), field
    # Counted as OpenAI does (cached tokens inside the prompt), both modes see the same prompt.
    assert streamed.prompt_tokens == blocking.prompt_tokens
    assert [c.content for c in streamed if c.content], "the stream came as chunks"


def test_a_stop_sequence_is_a_success_with_the_text(chatml_server: LlamaServer) -> None:
    """llama-server answers ``end_turn`` (with ``stop_sequence`` set) where Anthropic says
    ``stop_sequence``: both are a stop."""
    probe = anthropic(chatml_server).chat_completion(HELLO)
    words = probe.latest.split()
    assert len(words) >= 3, probe.latest
    settings = Settings(max_tokens=16, temperature=0, stop=[words[2]])
    for stream in (False, True):
        b = anthropic(chatml_server, settings=settings)
        response = b.chat_completion_stream(HELLO).wait(60) if stream else b.chat_completion(HELLO)
        assert response.is_success, response.err
        assert response.finish_reason == "stop"
        assert response.provider_finish_reason in ("end_turn", "stop_sequence")
        assert words[2] not in response.msg and response.msg.split() == words[:2]


def test_system_and_cached_tokens(chatml_server: LlamaServer) -> None:
    b = anthropic(chatml_server, settings=Settings(max_tokens=4, temperature=0))
    conversation = [{"role": "system", "content": "Be brief."}, *HELLO]
    first = b.chat_completion(conversation)
    second = b.chat_completion(conversation)
    assert first.prompt_tokens == second.prompt_tokens  # the cache does not change the count
    assert second.cached_tokens and second.cached_tokens > 0


def test_probe_through_the_anthropic_backend(chatml_server: LlamaServer) -> None:
    assert anthropic(chatml_server).probe_server_limits() == {
        "source": "llama.cpp",
        "context_length": 1024,
        "slots": 2,
    }


# -- cancellation frees the slot ------------------------------------------------------------------


def test_cancel_in_prefill_frees_the_slot(chatml_server: LlamaServer) -> None:
    assert wait_until(lambda: slots_idle(chatml_server), 10)
    b = anthropic(chatml_server, settings=Settings(max_tokens=LONG, temperature=0))
    before = predicted_tokens(chatml_server)
    response = b.chat_completion_stream([{"role": "user", "content": "word " * 900}])
    cancelled = threading.Event()

    def cancel() -> None:
        response.cancel()
        cancelled.set()

    threading.Thread(target=cancel).start()
    assert cancelled.wait(5) and response.is_cancelled and response.error_class is None
    assert wait_until(lambda: slots_idle(chatml_server), 5), "the slot kept working"
    generated = predicted_tokens(chatml_server) - before
    assert generated < 100, f"the server generated {generated} tokens after the cancel"


def test_cancel_mid_stream_frees_the_slot(chatml_server: LlamaServer) -> None:
    assert wait_until(lambda: slots_idle(chatml_server), 10)
    b = anthropic(chatml_server, settings=Settings(max_tokens=LONG, temperature=0))
    before = predicted_tokens(chatml_server)
    response = b.chat_completion_stream(HELLO)
    assert next(c for c in response if c.content)
    response.cancel()
    assert response.is_cancelled and response.msg
    assert wait_until(lambda: slots_idle(chatml_server), 5), "the slot kept generating"
    generated = predicted_tokens(chatml_server) - before
    assert generated < 100, f"the server generated {generated} tokens after the cancel"


# -- the key: x-api-key and bearer ----------------------------------------------------------------


@pytest.fixture(scope="module")
def keyed_server(
    binary: str, model: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    args = ["--chat-template", "chatml", "--api-key", KEY]
    yield from _serve(binary, model, args, tmp_path_factory, "keyed")


@pytest.mark.parametrize("auth", ["x-api-key", "bearer"])
def test_the_key_is_accepted_both_ways(keyed_server: LlamaServer, auth: str) -> None:
    b = anthropic(keyed_server, api_key=KEY, auth=auth, settings=Settings(max_tokens=2))
    response = b.chat_completion(HELLO)
    assert response.finish_reason == "length", response.err
    wrong = anthropic(keyed_server, api_key="sk-wrong", auth=auth).chat_completion(HELLO)
    assert (wrong.error_class, wrong.error_status, wrong.err) == ("http", 401, "Invalid API Key")
    assert KEY not in repr(wrong) and KEY not in repr(b)


# -- tool_use on /v1/messages ----------------------------------------------------------------------

ASK = [{"role": "user", "content": "Weather in Paris?"}]


def test_tool_use_blocks_land_whole_blocking_and_streamed(tools_server: LlamaServer) -> None:
    """The Command R+ template's grammar forces the call (see tests/real/test_tools_real.py).

    llama-server's ``/v1/messages`` drops ``disable_parallel_tool_use`` (and has no
    other way to say it), so the model runs on into a second call and the answer
    ends at ``max_tokens``: a length failure. The streamed tool blocks interleave
    (block 1 starts before block 0 stops) and have no ``input`` at their start;
    the first call must still land whole, the same in both modes.
    """
    b = anthropic(tools_server, settings=Settings(max_tokens=64, temperature=0))
    blocking = b.chat_completion(ASK, tools=[WEATHER], tool_choice="required")
    streamed = b.chat_completion_stream(ASK, tools=[WEATHER], tool_choice="required").wait(60)
    for response in (blocking, streamed):
        assert response.is_done and response.provider_finish_reason == "max_tokens", response.err
        assert (response.finish_reason, response.err) == ("length", "Hit max tokens")
        first = response.tool_calls[0]
        assert first.name == "get_weather" and first.id
        assert not first.arguments_undecodable and "city" in first.arguments
        assert response.completion_tokens == 64
    assert streamed.tool_calls[0].arguments == blocking.tool_calls[0].arguments
    assert [c.name for c in streamed.tool_calls] == [c.name for c in blocking.tool_calls]
    chunks = [c for c in streamed if c.tool_calls]
    assert sum(len(c.tool_calls or ()) for c in chunks) == len(streamed.tool_calls)
