"""The proxy's /v1/responses face and OpenAI relays over a real llama.cpp `llama-server`.

Driven by the real `openai` client. The model is random, so text is compared
with what the same request gets from llama-server directly; token counts are
the server's own.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon, Settings

from ..support.proxy import UsageSink, running_proxy
from ..support.responses import WEATHER_TOOL, check_numbering
from .conftest import LlamaServer, wait_until
from .test_llamacpp import HELLO, slots_idle
from .tiny_model import MODEL_PARAMS

openai = pytest.importorskip("openai")

N = 8  # tokens; the model never emits EOS, so every short request ends at its limit
WAIT = 30.0
TOOL = WEATHER_TOOL


def _upstream(server: LlamaServer) -> OpenAICommon:
    return OpenAICommon(server.url, model="tiny")


@pytest.fixture
def server(chatml_server: LlamaServer) -> Iterator[LlamaServer]:
    assert wait_until(lambda: slots_idle(chatml_server), 10), "a slot is still busy"
    yield chatml_server


@contextlib.contextmanager
def _proxied(server: LlamaServer, sink: UsageSink | None = None) -> Iterator[Any]:
    with _upstream(server) as upstream, running_proxy(upstream, usage_log=sink) as url:
        with openai.OpenAI(
            base_url=url + "/v1", api_key="unused", max_retries=0, timeout=WAIT
        ) as client:
            yield client


@pytest.fixture
def sink() -> UsageSink:
    return UsageSink()


@pytest.fixture
def client(server: LlamaServer, sink: UsageSink) -> Iterator[Any]:
    with _proxied(server, sink) as made:
        yield made


@pytest.mark.parametrize("stream", [True, False])
def test_ends_incomplete_at_max_output_tokens_with_the_servers_text_and_counts(
    server, client, sink, stream
):
    direct = _upstream(server).chat_completion(
        HELLO, settings=Settings(max_tokens=N, temperature=0)
    )
    assert direct.finish_reason == "length" and direct.msg.strip()
    kwargs: dict[str, Any] = dict(
        model="tiny", input=HELLO[0]["content"], max_output_tokens=N, temperature=0
    )
    if stream:
        events = list(client.responses.create(stream=True, **kwargs))
        check_numbering(events)
        assert events[-1].type == "response.incomplete"
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        response = events[-1].response
        assert deltas == response.output_text
    else:
        response = client.responses.create(**kwargs)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == direct.msg
    assert response.usage.output_tokens == N
    assert response.usage.input_tokens == direct.prompt_tokens
    [event] = sink.wait(1)
    assert (event["route"], event["stream"], event["ok"]) == ("/v1/responses", stream, True)
    assert (event["input_tokens"], event["output_tokens"]) == (direct.prompt_tokens, N)


def test_required_tool_call_completes_through_the_stream_helper(tools_server: LlamaServer):
    """`tool_choice: required` with `parallel_tool_calls: false` makes the server's grammar
    write exactly one call (see conftest's TOOLS_TEMPLATE), so the response completes."""
    kwargs: dict[str, Any] = dict(
        model="tiny",
        input="Weather in Paris?",
        tools=[TOOL],
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=64,
        temperature=0,
    )
    with _proxied(tools_server) as client:
        created = client.responses.create(**kwargs)
        with client.responses.stream(**kwargs) as stream:
            events = list(stream)
            streamed = stream.get_final_response()
    check_numbering(events)
    assert [e.type for e in events].count("response.function_call_arguments.done") == 1
    calls = []
    for response in (created, streamed):
        assert response.status == "completed"
        [call] = [item for item in response.output if item.type == "function_call"]
        assert call.name == "get_weather" and call.call_id
        calls.append(json.loads(call.arguments))
    assert "city" in calls[0] and calls[0] == calls[1]


def test_reasoning_item_from_a_reasoning_server(reasoning_server: LlamaServer):
    direct = _upstream(reasoning_server).chat_completion(
        HELLO, settings=Settings(max_tokens=24, temperature=0)
    )
    assert direct.reasoning_text  # the whole budget goes to thinking (test_llamacpp)
    kwargs: dict[str, Any] = dict(
        model="tiny", input=HELLO[0]["content"], max_output_tokens=24, temperature=0
    )
    with _proxied(reasoning_server) as client:
        events = list(client.responses.create(stream=True, **kwargs))
        created = client.responses.create(**kwargs)
    check_numbering(events)
    final = events[-1].response
    for response in (final, created):
        # No text came, so no message item: the one reasoning item was cut short.
        assert [(i.type, i.status) for i in response.output] == [("reasoning", "incomplete")]
        assert response.output[0].content[0].text == direct.reasoning_text
        assert response.incomplete_details.reason == "max_output_tokens"
    deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert deltas == direct.reasoning_text


def test_embeddings_through_the_proxy(embedding_server: LlamaServer):
    direct = requests.post(
        embedding_server.url + "/embeddings",
        json={"model": "tiny", "input": "hello world", "encoding_format": "float"},
        timeout=WAIT,
    )
    assert direct.status_code == 200, direct.text
    with _proxied(embedding_server) as client:
        result = client.embeddings.create(
            model="tiny", input="hello world", encoding_format="float"
        )
    [vector] = result.data
    assert len(vector.embedding) == MODEL_PARAMS["embedding_length"]
    assert vector.embedding == direct.json()["data"][0]["embedding"]
    assert result.usage.prompt_tokens == direct.json()["usage"]["prompt_tokens"]


def test_models_list_relays_the_servers_models(server, client):
    served = [m["id"] for m in server.get("/v1/models")["data"]]
    assert served and [m.id for m in client.models.list().data] == served
