"""OpenAIResponses against the pinned llama-server's ``/v1/responses`` (tiny random model).

What the loopback server cannot prove: that the real server accepts the bodies
llmchat builds (``instructions``, input items, ``store: false``), that its answers
decode blocking and streamed to the same Response, that its ``completed`` at the
output limit is read as ``length``, and that a cancel in prefill frees the slot.
"""

from __future__ import annotations

import threading
from typing import Any

from llmchat import Settings
from llmchat.backends.responses import OpenAIResponses

from ..support.chat_frames import WEATHER
from .conftest import LlamaServer, wait_until

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
LONG = 1500  # tokens; the model never emits EOS, so a generation this long is still running


def backend(server: LlamaServer, **kwargs: Any) -> OpenAIResponses:
    kwargs.setdefault("settings", Settings(max_tokens=8, temperature=0))
    return OpenAIResponses(server.url, api_key=None, model="tiny", **kwargs)


def slots_idle(server: LlamaServer) -> bool:
    return not any(slot.get("is_processing") for slot in server.get("/slots"))


def predicted_tokens(server: LlamaServer) -> float:
    return server.metrics().get("llamacpp:tokens_predicted_total", 0.0)


def test_the_output_limit_is_a_length_failure_in_both_modes(chatml_server: LlamaServer) -> None:
    b = backend(chatml_server)
    for response in (b.chat_completion(HELLO), b.chat_completion_stream(HELLO).wait(60)):
        assert (response.is_success, response.error_class, response.err) == (
            False,
            "response",
            "Hit max tokens",
        )
        assert (response.finish_reason, response.provider_finish_reason) == ("length", "completed")
        assert response.completion_tokens == 8 and response.latest.strip()
        assert response.finish_reason_evidence == {
            "rule": "output_tokens_at_limit",
            "output_tokens": 8,
            "max_output_tokens": 8,
        }


def test_text_and_usage_with_a_stop_the_server_reads_from_extra_body(
    chatml_server: LlamaServer,
) -> None:
    words = backend(chatml_server).chat_completion(HELLO).latest.split()
    assert len(words) >= 3, words
    stop = Settings(max_tokens=32, temperature=0, extra_body={"stop": [words[2]]})
    response = backend(chatml_server, settings=stop).chat_completion(HELLO)
    assert response.is_success, response.err
    assert response.msg.split() == words[:2]
    assert (response.finish_reason, response.provider_finish_reason) == ("stop", "completed")
    assert response.prompt_tokens and response.completion_tokens
    assert response.total_tokens == response.prompt_tokens + response.completion_tokens
    assert response.cached_tokens is not None and response.model and response.id
    assert response.id.startswith("resp_")


def test_blocking_and_streamed_calls_agree(chatml_server: LlamaServer) -> None:
    b = backend(chatml_server, settings=Settings(max_tokens=12, temperature=0))
    blocking = b.chat_completion(HELLO)
    streamed = b.chat_completion_stream(HELLO).wait(60)
    chunks = list(streamed)

    def view(r: Any) -> tuple[Any, ...]:
        return (
            r.latest,
            r.reasoning_text,
            r.tool_calls,
            r.finish_reason,
            r.provider_finish_reason,
            r.err,
            r.prompt_tokens,
            r.completion_tokens,
            r.total_tokens,
            r.model,
        )

    assert view(streamed) == view(blocking) and blocking.latest
    assert "".join(c.content for c in chunks) == streamed.latest and len(chunks) > 2


def test_cancel_in_prefill_frees_the_slot(chatml_server: LlamaServer) -> None:
    assert wait_until(lambda: slots_idle(chatml_server), 10)
    b = backend(chatml_server, settings=Settings(max_tokens=LONG, temperature=0))
    before = predicted_tokens(chatml_server)
    response = b.chat_completion_stream([{"role": "user", "content": "word " * 900}])
    cancelled = threading.Event()

    def cancel() -> None:
        response.cancel()
        cancelled.set()

    threading.Thread(target=cancel).start()
    assert cancelled.wait(5) and response.is_cancelled and response.err == "Cancelled by user"
    assert wait_until(lambda: slots_idle(chatml_server), 5), "the slot kept working"
    generated = predicted_tokens(chatml_server) - before
    assert generated < 100, f"the server generated {generated} tokens after the cancel"


def test_cancel_mid_stream_frees_the_slot(chatml_server: LlamaServer) -> None:
    assert wait_until(lambda: slots_idle(chatml_server), 10)
    b = backend(chatml_server, settings=Settings(max_tokens=LONG, temperature=0))
    before = predicted_tokens(chatml_server)
    response = b.chat_completion_stream(HELLO)
    assert next(iter(response)).content
    response.cancel()
    assert response.is_cancelled
    assert wait_until(lambda: slots_idle(chatml_server), 5), "the slot kept generating"
    generated = predicted_tokens(chatml_server) - before
    assert generated < 100, f"the server generated {generated} tokens after the cancel"


def test_the_answer_goes_back_as_history(chatml_server: LlamaServer) -> None:
    """`to_message()` of an answer builds a next request the real server takes."""
    b = backend(chatml_server)
    first = b.chat_completion(HELLO)
    conversation = [
        *HELLO,
        first.to_message(),
        {"role": "user", "content": "And again."},
    ]
    again = b.chat_completion(conversation)
    assert again.error_class in (None, "response") and again.err in (None, "Hit max tokens")
    assert again.latest.strip()


def test_a_real_tool_call_blocking_and_streamed(tools_server: LlamaServer) -> None:
    """Under the Command R+ template the grammar makes the model write one call (conftest)."""
    settings = Settings(max_tokens=96, temperature=0, parallel_tool_calls=False)
    b = backend(tools_server, settings=settings)
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    blocking = b.chat_completion(ask, tools=[WEATHER], tool_choice="required")
    streamed = b.chat_completion_stream(ask, tools=[WEATHER], tool_choice="required").wait(60)
    for response in (blocking, streamed):
        assert response.error_class is None, response.err
        assert (response.finish_reason, response.provider_finish_reason) == (
            "tool_calls",
            "completed",
        )
        [call] = response.tool_calls
        assert call.name == "get_weather" and call.id.startswith("call_")
        assert not call.arguments_undecodable and "city" in call.arguments
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in blocking.tool_calls
    ]
    assert streamed.completion_tokens == blocking.completion_tokens
