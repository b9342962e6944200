"""OpenAIResponses.prepare_chat_request: the exact bytes of POST /responses, and bad input."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmchat import Settings
from llmchat.backends.responses import OpenAIResponses
from llmchat.dialects.responses_request import responses_body
from llmchat.messages import Message
from llmchat.transport.mock import MockResponse, MockTransport

from ..support.chat_frames import WEATHER

URL = "http://127.0.0.1:9/v1"
IMAGE = "data:image/png;base64,iVBORw0KGgo="


def backend(**kw: Any) -> OpenAIResponses:
    return OpenAIResponses(URL, api_key="sk-test", **kw)


def posted(request: Any) -> dict[str, Any]:
    return dict(json.loads(request.data))


def test_system_and_user_text_exact_bytes() -> None:
    request = backend(model="gpt-x").prepare_chat_request(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    )
    assert request.method == "POST" and request.url == f"{URL}/responses"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert request.data == (
        b'{"input":[{"content":[{"text":"Hi","type":"input_text"}],"role":"user",'
        b'"type":"message"}],"instructions":"Be brief.","model":"gpt-x","store":false}'
    )


def test_a_stream_asks_for_it_and_sends_no_stream_options() -> None:
    request = backend().prepare_chat_request([{"role": "user", "content": "Hi"}], stream=True)
    body = posted(request)
    assert body["stream"] is True and "stream_options" not in body
    assert request.headers["Accept-Encoding"] == "identity"


def test_later_system_messages_stay_in_place_and_role() -> None:
    body = posted(
        backend().prepare_chat_request(
            [
                {"role": "user", "content": "a"},
                {"role": "system", "content": "s"},
                {"role": "developer", "content": "d"},
            ]
        )
    )
    assert "instructions" not in body
    assert [(i["role"], i["content"][0]["text"]) for i in body["input"]] == [
        ("user", "a"),
        ("system", "s"),
        ("developer", "d"),
    ]


def test_images_exact_bytes() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": IMAGE}},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.example/a.jpg", "detail": "low"},
                },
            ],
        }
    ]
    body = posted(backend().prepare_chat_request(messages))
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
                {"type": "input_image", "image_url": "https://x.example/a.jpg", "detail": "low"},
            ],
        }
    ]


TOOL_HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
        "reasoning_parts": [
            {
                "dialect": "responses",
                "item": {
                    "type": "reasoning",
                    "id": "rs_1",
                    "status": "completed",
                    "summary": [],
                    "encrypted_content": "gAAA",
                },
            },
            {"dialect": "anthropic", "block": {"type": "thinking", "signature": "s"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]


def test_tool_history_exact_bytes() -> None:
    request = backend().prepare_chat_request(TOOL_HISTORY)
    assert request.data == (
        b'{"input":[{"content":[{"text":"Weather in Paris?","type":"input_text"}],'
        b'"role":"user","type":"message"},'
        b'{"encrypted_content":"gAAA","summary":[],"type":"reasoning"},'
        b'{"content":[{"text":"Checking.","type":"output_text"}],"role":"assistant",'
        b'"type":"message"},'
        b'{"arguments":"{\\"city\\":\\"Paris\\"}","call_id":"call_1","name":"get_weather",'
        b'"type":"function_call"},'
        b'{"call_id":"call_1","output":"sunny","type":"function_call_output"}],"store":false}'
    )


def test_tools_and_tool_choice_exact_bytes() -> None:
    request = backend().prepare_chat_request(
        [{"role": "user", "content": "Hi"}],
        tools=[WEATHER, {"type": "web_search"}],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    body = posted(request)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER["function"]["parameters"],  # type: ignore[index]
            "strict": False,
        },
        {"type": "web_search"},
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    # wire_json sends a flat tool's schema properties in `required` order.
    two = {
        **WEATHER["function"],
        "parameters": {"type": "object", "properties": {"z": {}, "a": {}}, "required": ["z"]},
    }  # type: ignore[dict-item]
    data = (
        backend()
        .prepare_chat_request(
            [{"role": "user", "content": "Hi"}], [{"type": "function", "function": two}]
        )
        .data
    )
    assert b'"properties":{"z":{},"a":{}}' in data


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_words_pass(choice: str) -> None:
    body = posted(
        backend().prepare_chat_request([{"role": "user", "content": "Hi"}], [WEATHER], choice)
    )
    assert body["tool_choice"] == choice


def test_flat_tools_and_own_tool_choice_shapes_are_sent_as_given() -> None:
    flat = {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]}
    body = posted(
        backend().prepare_chat_request([{"role": "user", "content": "Hi"}], [flat], choice)
    )
    assert body["tools"] == [flat] and body["tool_choice"] == choice


def test_settings_exact_bytes() -> None:
    settings = Settings(
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        stop=["\n\n"],
        seed=7,
        top_k=40,
        json_schema={
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["b", "a"],
        },
        json_schema_name="answer",
        json_schema_strict=True,
        reasoning_effort="low",
        parallel_tool_calls=False,
    )
    request = backend(model="gpt-x", settings=settings).prepare_chat_request(
        [{"role": "user", "content": "Hi"}]
    )
    assert request.data == (
        b'{"include":["reasoning.encrypted_content"],"input":[{"content":[{"text":"Hi",'
        b'"type":"input_text"}],"role":"user","type":"message"}],"max_output_tokens":64,'
        b'"model":"gpt-x","parallel_tool_calls":false,"reasoning":{"effort":"low"},'
        b'"store":false,"temperature":0.2,"text":{"format":{"name":"answer","schema":'
        b'{"properties":{"b":{"type":"string"},"a":{"type":"string"}},"required":["b","a"],'
        b'"type":"object"},"strict":true,"type":"json_schema"}},"top_p":0.9}'
    )


def test_extra_body_wins_and_reaches_a_server_that_reads_more() -> None:
    settings = Settings(
        reasoning_effort="none",
        logprobs=True,
        extra_body={"store": True, "stop": ["x"], "reasoning": {"summary": "auto"}},
    )
    body = posted(
        backend(settings=settings).prepare_chat_request([{"role": "user", "content": "Hi"}])
    )
    assert body["store"] is True and body["stop"] == ["x"]
    assert body["reasoning"] == {"effort": "none", "summary": "auto"}
    assert body["include"] == ["message.output_text.logprobs"]  # no encrypted reasoning asked


def test_the_builder_does_not_change_its_inputs() -> None:
    messages = [Message.from_dict(m) for m in TOOL_HISTORY]
    settings = {"max_tokens": 5, "response_format": {"type": "json_object"}}
    tools = [copy.deepcopy(WEATHER)]
    before = (copy.deepcopy(messages), copy.deepcopy(settings), copy.deepcopy(tools))
    body = responses_body(messages, settings, tools, "auto", model="m")
    assert (messages, settings, tools) == before
    assert body["text"] == {"format": {"type": "json_object"}}


def test_the_answer_round_trips_into_the_next_request() -> None:
    reasoning = {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "e"}
    call = {
        "type": "function_call",
        "id": "fc_9",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    answer_body = {
        "id": "resp_9",
        "object": "response",
        "status": "completed",
        "output": [
            reasoning,
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me check."}],
            },
            call,
        ],
    }
    mock = OpenAIResponses(
        "http://mock.invalid/v1",
        api_key="k",
        transport=MockTransport(lambda r: MockResponse.json(answer_body)),
    )
    answer = mock.chat_completion([{"role": "user", "content": "Weather in Paris?"}], [WEATHER])
    assert answer.is_success and answer.finish_reason == "tool_calls"
    conversation = [
        {"role": "user", "content": "Weather in Paris?"},
        answer.to_message(),
        {"role": "tool", "tool_call_id": "call_9", "content": [{"type": "text", "text": "sunny"}]},
    ]
    items = posted(backend().prepare_chat_request(conversation, [WEATHER]))["input"]
    assert [i["type"] for i in items] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert items[1] == {"type": "reasoning", "summary": [], "encrypted_content": "e"}
    assert items[3] == {
        "type": "function_call",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    assert items[4] == {"type": "function_call_output", "call_id": "call_9", "output": "sunny"}


@pytest.mark.parametrize(
    "messages, tools, tool_choice, field",
    [
        ([{"role": "tool", "content": "x"}], None, None, "messages[0].tool_call_id"),
        ([{"role": "function", "name": "f", "content": "x"}], None, None, "messages[0].role"),
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            None,
            None,
            "messages[0].content[0].type",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
            None,
            None,
            "messages[0].content[0].image_url.url",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "image_url", "image_url": {"url": IMAGE}}],
                }
            ],
            None,
            None,
            "messages[0].content[0].type",
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
            None,
            None,
            "messages[0].tool_calls[0].id",
        ),
        (
            [{"role": "user", "content": "x"}],
            [{"type": "function", "function": {}}],
            None,
            "tools[0].function.name",
        ),
        ([{"role": "user", "content": "x"}], ["f"], None, "tools[0]"),
        ([{"role": "user", "content": "x"}], None, "always", "tool_choice"),
        ([{"role": "user", "content": "x"}], None, 3, "tool_choice"),
        ([{"role": "user", "content": "x"}], None, {"function": {}}, "tool_choice"),
    ],
)
def test_bad_input_raises_before_io_naming_the_field(
    messages: Any, tools: Any, tool_choice: Any, field: str
) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        backend().prepare_chat_request(messages, tools, tool_choice)
    assert field in str(info.value)


def test_no_text_completions_and_the_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    from_env = OpenAIResponses(URL)
    assert from_env.api_key == "sk-env" and "sk-env" not in repr(from_env)
    assert OpenAIResponses().api_url == "https://api.openai.com/v1"
    with pytest.raises(ValueError, match="no text completions"):
        from_env.prepare_text_request([{"role": "user", "content": "Hi"}])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env\n")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIResponses(URL)
    assert from_env.clone(model="m2").model == "m2"
