"""`Ollama` against `llmchat proxy`'s Ollama face over the real llama-server.

No Ollama server runs here; the proxy's Ollama face is the real NDJSON
producer in the loop (issue 15: "Ollama against llmchat proxy's Ollama face
over the real llama-server"). The model is random, so nothing pins a string:
blocking and streamed answers are compared with each other and with what the
same request gets from llama-server directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmchat import OpenAICommon, Settings
from llmchat.backends.ollama import Ollama
from llmchat.response import Response

from ..support.proxy import running_proxy
from .conftest import LlamaServer, wait_until
from .test_llamacpp import HELLO, slots_idle

N = 8  # tokens; the model never emits EOS, so a short request ends at its limit
GREEDY = Settings(max_tokens=N, temperature=0, seed=1)
WAIT = 60.0


@pytest.fixture
def server(chatml_server: LlamaServer) -> Iterator[LlamaServer]:
    assert wait_until(lambda: slots_idle(chatml_server), 10), "a slot is still busy"
    yield chatml_server


@pytest.fixture
def ollama(server: LlamaServer) -> Iterator[Ollama]:
    with OpenAICommon(server.url, model="tiny") as upstream, running_proxy(upstream) as url:
        with Ollama(url, model="tiny") as backend:
            yield backend


def _direct(server: LlamaServer) -> Response:
    with OpenAICommon(server.url, model="tiny") as upstream:
        return upstream.chat_completion(HELLO, settings=GREEDY)


def _length_failure(response: Response) -> None:
    """A greedy answer cut at `N` tokens: a length failure, its text and counts kept."""
    assert response.is_done and not response.is_success
    assert (response.error_class, response.err) == ("response", "Hit max tokens")
    assert response.finish_reason == response.provider_finish_reason == "length"
    assert response.msg.strip() and response.completion_tokens == N
    assert response.prompt_tokens and response.prompt_tokens > 0
    assert response.total_tokens == response.prompt_tokens + N


def test_blocking_and_streamed_chat_agree_and_fail_as_length(
    server: LlamaServer, ollama: Ollama
) -> None:
    direct = _direct(server)
    blocking = ollama.chat_completion(HELLO, settings=GREEDY)
    streamed = ollama.chat_completion_stream(HELLO, settings=GREEDY).wait(WAIT)
    for response in (blocking, streamed):
        _length_failure(response)
        assert response.msg == direct.msg  # greedy: the same words as the direct call
        assert response.prompt_tokens == direct.prompt_tokens
        assert response.model == direct.model  # the upstream names its model
    chunks = list(streamed)
    assert len(chunks) >= 2 and "".join(c.content for c in chunks) == streamed.msg
    assert chunks[-1].is_final and chunks[-1].finish_reason == "length"
    # The face reports the upstream's wall time on a blocking answer only.
    assert blocking.timing.server_total_seconds is not None
    assert blocking.timing.server_total_seconds > 0


def test_blocking_and_streamed_generate_agree(server: LlamaServer, ollama: Ollama) -> None:
    """Without a template: the user message as `prompt`, which the face makes one user turn."""
    direct = _direct(server)
    blocking = ollama.text_completion(HELLO, settings=GREEDY)
    streamed = ollama.text_completion_stream(HELLO, settings=GREEDY).wait(WAIT)
    for response in (blocking, streamed):
        _length_failure(response)
        assert response.msg == direct.msg


def test_an_answer_that_stops_is_a_success_with_usage(server: LlamaServer, ollama: Ollama) -> None:
    """A stop sequence hit early ends the answer as `stop`: success, counts present."""
    direct = _direct(server)
    words = direct.msg.split()
    assert len(words) >= 2, direct.msg
    stop = Settings(max_tokens=N, temperature=0, seed=1, stop=[words[1]])
    for response in (
        ollama.chat_completion(HELLO, settings=stop),
        ollama.chat_completion_stream(HELLO, settings=stop).wait(WAIT),
    ):
        assert response.is_success, response.err
        assert response.finish_reason == "stop"
        assert response.completion_tokens is not None and 0 < response.completion_tokens <= N
        assert response.prompt_tokens == direct.prompt_tokens
        assert words[1] not in response.msg


def test_an_empty_conversation_is_a_load_only_failure(ollama: Ollama) -> None:
    for response in (ollama.chat_completion([]), ollama.chat_completion_stream([]).wait(WAIT)):
        assert response.error_class == "response"
        assert response.err is not None and "only loaded the model" in response.err


def test_the_probe_reads_the_context_through_api_show(server: LlamaServer, ollama: Ollama) -> None:
    with OpenAICommon(server.url) as upstream:
        direct = upstream.probe_server_limits()
    assert ollama.probe_server_limits() == {
        "source": "ollama",
        "context_length": direct["context_length"],
    }


def test_cancel_in_prefill_frees_the_slot(server: LlamaServer, ollama: Ollama) -> None:
    long = Settings(max_tokens=1500, temperature=0)
    response = ollama.chat_completion_stream(HELLO, settings=long)
    response.cancel()
    assert response.is_cancelled
    assert wait_until(lambda: slots_idle(server), 20), "the upstream kept generating"
