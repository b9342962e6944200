"""The proxy's /v1/responses face and OpenAI relays, end to end with the real `openai` client.

The proxy runs under its threaded WSGI server on loopback; the upstream is
llmchat's scripted loopback server answering chat completions, so what the
client reads went through a real socket on both sides.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.protocols.responses import BAD_TOOL_CALL
from llmchat.testing import ChatResponder, Drop, Reply, ScriptedServer, Write

from ...support.chat_frames import chunk as _chunk
from ...support.chat_frames import usage_chunk
from ...support.proxy import UsageSink, running_proxy
from ...support.responses import WEATHER_TOOL, check_numbering

openai = pytest.importorskip("openai")

TEXT = "Hello from the loopback server, in pieces."
WAIT = 10.0
TOOL = {**WEATHER_TOOL, "strict": True}


def _usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return usage_chunk(prompt, completion, cached=cached, reasoning=reasoning)


def _call(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _reasoning_then_text() -> Reply:
    return Reply.sse(
        [
            _chunk({"role": "assistant", "content": None}),
            _chunk({"reasoning_content": "The user greets. "}),
            _chunk({"reasoning_content": "Greet back."}),
            _chunk({"content": "Hi "}),
            _chunk({"content": "there."}),
            _chunk({}, "stop"),
            _usage(11, 9, cached=4, reasoning=5),
        ]
    )


def _tool_calls(second_arguments: str = '{"city": "Bergen"}') -> Reply:
    return Reply.sse(
        [
            _chunk({"role": "assistant", "content": None}),
            _chunk({"content": "Checking."}),
            _chunk({"tool_calls": [_call(0, "call_a", "get_weather", '{"city"')]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "Oslo"}'}}]}),
            _chunk({"tool_calls": [_call(1, "call_b", "get_weather", second_arguments)]}),
            _chunk({}, "tool_calls"),
            _usage(20, 12),
        ]
    )


def _cut_after_text() -> Reply:
    frame = b"data: " + json.dumps(_chunk({"content": "partial "})).encode() + b"\n\n"
    return Reply(
        200, {"Content-Type": "text/event-stream"}, framing="close", steps=[Write(frame), Drop()]
    )


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder(TEXT, chunk_size=6)).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sink() -> UsageSink:
    return UsageSink()


@pytest.fixture
def client(upstream: ScriptedServer, sink: UsageSink) -> Iterator[Any]:
    with OpenAICommon(upstream.url) as backend, running_proxy(backend, usage_log=sink) as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as made:
            yield made


def _last_chat_request(upstream: ScriptedServer) -> dict[str, Any]:
    chats = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
    return json.loads(chats[-1].body)


# -- streaming ------------------------------------------------------------------------


def test_create_stream_text_events_in_order(client, upstream, sink):
    events = list(client.responses.create(model="m", input="hi there", stream=True))
    check_numbering(events)
    kinds = [e.type for e in events]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * len(deltas),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "".join(deltas) == TEXT and len(deltas) > 1
    final = events[-1].response
    assert final.status == "completed" and final.output_text == TEXT
    assert final.id == events[0].response.id and final.id.startswith("resp_")
    assert final.store is False and final.model == "m"
    assert final.usage.output_tokens == len(deltas) and final.usage.input_tokens == 2
    assert final.usage.total_tokens == final.usage.input_tokens + final.usage.output_tokens
    chat = _last_chat_request(upstream)
    assert chat["messages"] == [{"role": "user", "content": "hi there"}] and chat["stream"]
    [event] = sink.wait(1)
    assert event["face"] == "openai" and event["route"] == "/v1/responses"
    assert event["ok"] is True and event["stream"] is True
    assert event["content_bytes"] == len(TEXT.encode())


def test_stream_helper_accumulates_the_final_response(client):
    with client.responses.stream(model="m", input="hi", instructions="be brief") as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(texts) == TEXT
    assert final.output_text == TEXT and final.status == "completed"
    assert final.instructions == "be brief"


def test_reasoning_item_before_the_message(client, upstream):
    upstream.set_script(_reasoning_then_text())
    with client.responses.stream(model="m", input="hi", reasoning={"effort": "high"}) as stream:
        events = list(stream)
        final = stream.get_final_response()
    check_numbering(events)
    reasoning_deltas = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
    assert reasoning_deltas == ["The user greets. ", "Greet back."]
    [done] = [e for e in events if e.type == "response.reasoning_text.done"]
    assert done.text == "The user greets. Greet back." and done.output_index == 0
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == "The user greets. Greet back."
    assert final.output_text == "Hi there."
    usage = final.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 9, 20)
    assert usage.input_tokens_details.cached_tokens == 4
    assert usage.output_tokens_details.reasoning_tokens == 5
    assert _last_chat_request(upstream)["reasoning_effort"] == "high"


def test_function_calls_stream_as_items(client, upstream):
    upstream.set_script(_tool_calls())
    with client.responses.stream(model="m", input="weather?", tools=[TOOL]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    check_numbering(events)
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "get_weather", {"city": "Bergen"}),
    ]
    assert calls[0].parsed_arguments == {"city": "Oslo"}  # the SDK parsed the strict tool's
    assert final.output[0].type == "message" and final.output_text == "Checking."
    argument_deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert {e.output_index for e in argument_deltas} == {1, 2}
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [e.arguments for e in done] == ['{"city": "Oslo"}', '{"city": "Bergen"}']
    chat = _last_chat_request(upstream)
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": TOOL["parameters"],
                "strict": True,
            },
        }
    ]


def test_undecodable_tool_arguments_fail_the_stream(client, upstream, sink):
    upstream.set_script(_tool_calls(second_arguments='{"city": '))
    events = list(client.responses.create(model="m", input="weather?", tools=[TOOL], stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.message == BAD_TOOL_CALL
    done_calls = [
        e.item
        for e in events
        if e.type == "response.output_item.done" and e.item.type == "function_call"
    ]
    # The readable first call was finished; the broken one never is.
    assert [c.call_id for c in done_calls] == ["call_a"]
    assert not any(e.type == "response.completed" for e in events)
    [event] = sink.wait(1)
    assert event["ok"] is False


def test_stream_helper_raises_without_completion_on_failure(client, upstream):
    upstream.set_script(_tool_calls(second_arguments="not json"))
    with client.responses.stream(model="m", input="weather?", tools=[TOOL]) as stream:
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()


def test_max_output_tokens_ends_incomplete(client, upstream):
    upstream.set_script(ChatResponder(TEXT, chunk_size=6, finish_reason="length"))
    events = list(client.responses.create(model="m", input="hi", max_output_tokens=7, stream=True))
    check_numbering(events)
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.output[0].status == "incomplete"
    assert last.response.output_text == TEXT and last.response.max_output_tokens == 7
    assert _last_chat_request(upstream)["max_tokens"] == 7


def test_upstream_cut_mid_stream_fails_with_a_generic_message(client, upstream, sink):
    upstream.set_script(_cut_after_text())
    events = list(client.responses.create(model="m", input="hi", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.error.code == "server_error"
    assert "127.0.0.1" not in last.response.error.message  # nothing of the upstream's
    # Nothing lost: the partial text is in the failed response's output.
    assert last.response.output[0].content[0].text == "partial "
    assert last.response.output[0].status == "incomplete"
    [event] = sink.wait(1)
    assert event["ok"] is False


def test_upstream_error_before_output_is_an_http_error(client, upstream):
    upstream.set_script(Reply.error(500, "secret upstream detail"))
    with pytest.raises(openai.APIStatusError) as raised:
        client.responses.create(model="m", input="hi", stream=True)
    assert raised.value.status_code == 502
    assert "secret upstream detail" not in json.dumps(raised.value.body)


# -- non-streaming --------------------------------------------------------------------


def test_create_returns_the_whole_response(client, upstream):
    upstream.set_script(_reasoning_then_text())
    response = client.responses.create(model="m", input="hi")
    assert response.object == "response" and response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output_text == "Hi there."
    assert response.usage.input_tokens == 11 and response.usage.output_tokens == 9
    assert response.usage.input_tokens_details.cached_tokens == 4
    assert response.usage.output_tokens_details.reasoning_tokens == 5


def test_create_function_calls(client, upstream):
    upstream.set_script(_tool_calls())
    response = client.responses.create(model="m", input="weather?", tools=[TOOL])
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, json.loads(c.arguments)) for c in calls] == [
        ("call_a", {"city": "Oslo"}),
        ("call_b", {"city": "Bergen"}),
    ]


def test_create_incomplete_at_max_output_tokens(client, upstream):
    upstream.set_script(ChatResponder(TEXT, finish_reason="length"))
    response = client.responses.create(model="m", input="hi", max_output_tokens=7)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == TEXT


def test_create_with_undecodable_arguments_is_a_502(client, upstream):
    upstream.set_script(_tool_calls(second_arguments="[1, 2"))
    with pytest.raises(openai.APIStatusError) as raised:
        client.responses.create(model="m", input="weather?", tools=[TOOL])
    assert raised.value.status_code == 502
    assert raised.value.body["message"] == BAD_TOOL_CALL


def test_history_with_calls_and_outputs_reaches_the_upstream(client, upstream):
    client.responses.create(
        model="m",
        instructions="You are terse.",
        input=[
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": [{"type": "input_text", "text": "weather in Oslo?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": []},
            {
                "type": "function_call",
                "call_id": "call_a",
                "name": "get_weather",
                "arguments": '{"city":"Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Sunny."}],
            },
            {"role": "user", "content": "thanks"},
        ],
        tools=[TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        text={"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
        temperature=0.2,
        top_p=0.9,
        parallel_tool_calls=False,
        store=False,
    )
    chat = _last_chat_request(upstream)
    assert chat["messages"] == [
        {"role": "system", "content": "You are terse.\n\nUse tools."},
        {"role": "user", "content": "weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "thanks"},
    ]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "w", "schema": {"type": "object"}},
    }
    assert (chat["temperature"], chat["top_p"], chat["parallel_tool_calls"]) == (0.2, 0.9, False)


# -- refusals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "param", "code", "message"),
    [
        (
            {"previous_response_id": "resp_1"},
            "previous_response_id",
            "previous_response_not_found",
            "Previous response with id 'resp_1' not found.",
        ),
        (
            {"input": [{"type": "item_reference", "id": "msg_x"}]},
            "input[0].id",
            "invalid_value",
            "Item with id 'msg_x' not found.",
        ),
        ({"background": True}, "background", "unsupported_parameter", "background:"),
        ({"temperature": "hot"}, "temperature", "invalid_value", "temperature:"),
        (
            {"input": [{"role": "robot", "content": "x"}]},
            "input[0].role",
            "invalid_value",
            "input[0].role:",
        ),
    ],
)
def test_refusals_are_openai_400s_before_any_upstream_io(
    client, upstream, fields, param, code, message
):
    body: dict[str, Any] = {"model": "m", "input": "hi", **fields}
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(**body)
    error = raised.value.body
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param and error["code"] == code
    assert error["message"].startswith(message)
    assert not upstream.requests


# -- relays ---------------------------------------------------------------------------


def test_embeddings_relay_byte_for_byte(upstream, sink):
    answer = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0]}],
        "model": "embedder",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    raw = json.dumps(answer, indent=1).encode()  # odd spacing: it must come back as is
    upstream.set_script(Reply(200, {"Content-Type": "application/json"}, raw))
    backend = OpenAICommon(upstream.url, api_key="upstream-key")
    with backend, running_proxy(backend, usage_log=sink) as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as client:
            result = client.embeddings.create(model="embedder", input="three words here")
            relayed = client.embeddings.with_raw_response.create(model="embedder", input="x")
    assert result.data[0].embedding == [0.25, -0.5, 1.0]
    assert relayed.http_response.content == raw
    record = upstream.requests[0]
    assert (record.method, record.path) == ("POST", "/v1/embeddings")
    sent = json.loads(record.body)
    assert (sent["model"], sent["input"]) == ("embedder", "three words here")
    assert record.headers["Authorization"] == "Bearer upstream-key"
    events = sink.wait(2)
    assert all(e["route"] == "/v1/embeddings" and e["model"] == "embedder" for e in events)


def test_models_relay_through_the_openai_client(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["loopback"]


# -- llmchat's own Responses client reads the face ------------------------------------


def test_llmchat_responses_backend_round_trips_tool_calls(client, upstream):
    from llmchat.backends.responses import OpenAIResponses

    upstream.set_script(_tool_calls())
    base = str(client.base_url).rstrip("/")
    tools = [{"type": "function", "function": {k: TOOL[k] for k in ("name", "parameters")}}]
    with OpenAIResponses(base, api_key="unused", model="m") as backend:
        first = backend.chat_completion_stream([{"role": "user", "content": "q"}], tools=tools)
        first.wait(WAIT)
        assert first.is_success, first.err
        assert [(c.id, c.arguments) for c in first.tool_calls] == [
            ("call_a", {"city": "Oslo"}),
            ("call_b", {"city": "Bergen"}),
        ]
        upstream.set_script(ChatResponder(TEXT))
        history = [
            {"role": "user", "content": "q"},
            first.to_message(),
            {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        ]
        second = backend.chat_completion(history, tools=tools)
    assert second.is_success and second.msg == TEXT
    messages = _last_chat_request(upstream)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_a", "call_b"]
    assert messages[1]["content"] == "Checking."
