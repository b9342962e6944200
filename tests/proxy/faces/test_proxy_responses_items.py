"""What the Responses face sends for folded tools and reasoning, read by the ``openai`` SDK.

Calls of a ``namespace`` tool go back with their own name and namespace, a
``custom`` tool's call as a ``custom_tool_call`` item with its raw input;
reasoning as summary parts when asked, and in ``encrypted_content`` when
included; items the proxy sent resolve when referenced; a failed stream keeps
the usage reported before it failed. Every event is parsed by the SDK's own
pydantic types (an unknown event type would come back untyped).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, Drop, Reply, ScriptedServer, Write

from ...support.chat_frames import chunk, usage_chunk
from ...support.proxy import running_proxy
from ...support.responses import check_numbering

openai = pytest.importorskip("openai")
from openai.types.responses import (  # noqa: E402
    ResponseCustomToolCall,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseFunctionToolCall,
    ResponseReasoningItem,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryPartDoneEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningSummaryTextDoneEvent,
)

EXEC = "const r = await tools.exec_command({cmd: 'ls'});\ntext(r.output);"
THOUGHT = "The user wants a listing."
NAMESPACES = [
    {
        "type": "namespace",
        "name": "functions",
        "description": "",
        "tools": [
            {"type": "custom", "name": "exec", "description": "Run JavaScript."},
            {"type": "function", "name": "send", "parameters": {"type": "object"}},
        ],
    },
    {
        "type": "namespace",
        "name": "mail",
        "description": "",
        "tools": [{"type": "function", "name": "send", "parameters": {"type": "object"}}],
    },
    {
        "type": "namespace",
        "name": "clock",
        "description": "",
        "tools": [{"type": "function", "name": "sleep", "parameters": {"type": "object"}}],
    },
]


def _calling(name: str, arguments: str, reasoning: str | None = None) -> Reply:
    call = {"index": 0, "id": "call_1", "type": "function"}
    frames = [chunk({"role": "assistant", "content": None})]
    if reasoning:
        frames.append(chunk({"reasoning_content": reasoning}))
    frames += [
        chunk({"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        chunk({}, "tool_calls"),
        usage_chunk(30, 10),
    ]
    return Reply.sse(frames)


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder("ok")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(upstream: ScriptedServer) -> Iterator[Any]:
    with OpenAICommon(upstream.url) as backend, running_proxy(backend) as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as made:
            yield made


def _chat(upstream: ScriptedServer) -> dict[str, Any]:
    record = [r for r in upstream.requests if r.path.endswith("/chat/completions")][-1]
    body: dict[str, Any] = json.loads(record.body)
    return body


def _create(client: Any, **fields: Any) -> Any:
    return client.responses.create(**{"model": "m", "input": "go", "tools": NAMESPACES, **fields})


@pytest.mark.parametrize(
    ("upstream_name", "name", "namespace"),
    [
        ("sleep", "sleep", "clock"),
        ("functions__send", "send", "functions"),
        ("mail__send", "send", "mail"),
    ],
)
def test_a_namespaced_call_goes_back_with_its_namespace(
    client, upstream, upstream_name, name, namespace
):
    upstream.set_script(_calling(upstream_name, '{"a": 1}'))
    events = list(_create(client, stream=True))
    check_numbering(events)
    assert "functions__send" in [t["function"]["name"] for t in _chat(upstream)["tools"]]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert isinstance(done[0], ResponseFunctionToolCall)
    assert (done[0].name, done[0].namespace, done[0].arguments) == (name, namespace, '{"a": 1}')
    assert events[-1].type == "response.completed"
    assert events[-1].response.output[0].namespace == namespace


def test_a_custom_tool_call_streams_as_a_custom_tool_call_item(client, upstream):
    upstream.set_script(_calling("exec", json.dumps({"input": EXEC})))
    events = list(_create(client, stream=True))
    check_numbering(events)
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" not in kinds
    [added] = [e.item for e in events if e.type == "response.output_item.added"]
    assert isinstance(added, ResponseCustomToolCall) and added.input == ""
    [delta] = [e for e in events if isinstance(e, ResponseCustomToolCallInputDeltaEvent)]
    [done] = [e for e in events if isinstance(e, ResponseCustomToolCallInputDoneEvent)]
    assert delta.delta == done.input == EXEC
    [item] = [e.item for e in events if e.type == "response.output_item.done"]
    assert isinstance(item, ResponseCustomToolCall)
    assert (item.name, item.namespace, item.input, item.call_id) == (
        "exec",
        "functions",
        EXEC,
        "call_1",
    )
    assert kinds[-1] == "response.completed"


def test_a_custom_tool_call_whole(client, upstream):
    upstream.set_script(_calling("exec", json.dumps({"input": EXEC})))
    result = _create(client)
    [item] = result.output
    assert isinstance(item, ResponseCustomToolCall)
    assert (item.name, item.namespace, item.input) == ("exec", "functions", EXEC)


def test_a_custom_tool_call_without_its_input_fails(client, upstream):
    upstream.set_script(_calling("exec", '{"code": 1}'))
    events = list(_create(client, stream=True))
    assert events[-1].type == "response.failed"
    assert not [e for e in events if e.type == "response.output_item.done"]
    with pytest.raises(openai.APIStatusError) as raised:
        _create(client)
    assert raised.value.status_code == 502


def test_reasoning_as_summary_parts_when_asked(client, upstream):
    upstream.set_script(_calling("sleep", "{}", reasoning=THOUGHT))
    events = list(_create(client, stream=True, reasoning={"summary": "auto"}))
    check_numbering(events)
    summary = [
        e
        for e in events
        if isinstance(
            e,
            (
                ResponseReasoningSummaryPartAddedEvent,
                ResponseReasoningSummaryTextDeltaEvent,
                ResponseReasoningSummaryTextDoneEvent,
                ResponseReasoningSummaryPartDoneEvent,
            ),
        )
    ]
    assert [e.type.removeprefix("response.reasoning_summary_") for e in summary] == [
        "part.added",
        "text.delta",
        "text.done",
        "part.done",
    ]
    assert all(e.summary_index == 0 for e in summary)
    assert summary[1].delta == summary[2].text == summary[3].part.text == THOUGHT
    item = events[-1].response.output[0]
    assert isinstance(item, ResponseReasoningItem)
    assert [p.text for p in item.summary] == [THOUGHT]
    assert [p.text for p in item.content or []] == [THOUGHT]

    upstream.set_script(_calling("sleep", "{}", reasoning=THOUGHT))
    whole = _create(client, reasoning={"summary": "detailed"})
    assert [p.text for p in whole.output[0].summary] == [THOUGHT]


def test_no_summary_unless_asked(client, upstream):
    upstream.set_script(_calling("sleep", "{}", reasoning=THOUGHT))
    events = list(_create(client, stream=True))
    assert not [e for e in events if "summary" in e.type]
    assert events[-1].response.output[0].summary == []


def test_included_encrypted_content_brings_the_reasoning_back(client, upstream):
    upstream.set_script(_calling("sleep", "{}", reasoning=THOUGHT))
    first = _create(client, include=["reasoning.encrypted_content"], store=False)
    reasoning, call = first.output
    assert reasoning.encrypted_content
    upstream.set_script(ChatResponder("slept"))
    replay = [
        # what Codex sends back: the reasoning by its encrypted content alone
        {"type": "reasoning", "summary": [], "encrypted_content": reasoning.encrypted_content},
        {"type": "function_call", "call_id": call.call_id, "name": "sleep", "arguments": "{}",
         "namespace": "clock"},
        {"type": "function_call_output", "call_id": call.call_id, "output": "done"},
    ]  # fmt: skip
    _create(client, input=[{"role": "user", "content": "go"}, *replay])
    messages = _chat(upstream)["messages"]
    assert messages[1]["reasoning_content"] == THOUGHT
    assert messages[1]["tool_calls"][0]["function"]["name"] == "sleep"


def test_references_to_items_the_proxy_sent_resolve(client, upstream):
    upstream.set_script(_calling("mail__send", '{"to": "x"}', reasoning=THOUGHT))
    first = _create(client, stream=True)
    output = [e for e in first][-1].response.output
    upstream.set_script(ChatResponder("sent"))
    references = [{"type": "item_reference", "id": item.id} for item in output]
    call_id = output[1].call_id
    follow = [{"type": "function_call_output", "call_id": call_id, "output": "ok"}]
    _create(client, input=[{"role": "user", "content": "go"}, *references, *follow])
    messages = _chat(upstream)["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": THOUGHT,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "mail__send", "arguments": '{"to": "x"}'},
            }
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def test_a_failed_stream_carries_the_usage_seen_so_far(client, upstream):
    # vLLM's continuous usage stats: counts ride on each chunk, before the cut.
    frame = chunk({"content": "partial "}, usage={"prompt_tokens": 17, "completion_tokens": 2})
    data = b"data: " + json.dumps(frame).encode() + b"\n\n"
    upstream.set_script(
        Reply(
            200, {"Content-Type": "text/event-stream"}, framing="close", steps=[Write(data), Drop()]
        )
    )
    events = list(client.responses.create(model="m", input="hi", stream=True))
    failed = events[-1]
    assert failed.type == "response.failed"
    assert (failed.response.usage.input_tokens, failed.response.usage.output_tokens) == (17, 2)
