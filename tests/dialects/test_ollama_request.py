"""Ollama requests: the exact bytes `prepare_*_request` posts, and bad input raising first."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llmchat import Message, Settings
from llmchat.backends.ollama import Ollama
from llmchat.dialects.ollama_request import chat_body, generate_body, prompt_parts, tool_names
from llmchat.response import Response
from llmchat.templates import ChatML
from llmchat.tools import ToolCall

PNG = "iVBORw0KGgo="
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"unit": {"type": "string"}, "city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOL_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_time", "arguments": {"city": "Oslo"}},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
]


def backend(**kwargs: Any) -> Ollama:
    return Ollama(model="llama3.2", **kwargs)


def test_the_default_url_has_no_v1_and_the_paths_are_native() -> None:
    request = Ollama(model="m").prepare_chat_request([{"role": "user", "content": "Hi"}])
    assert request.url == "http://127.0.0.1:11434/api/chat"
    text = Ollama(model="m").prepare_text_request([{"role": "user", "content": "Hi"}])
    assert text.url == "http://127.0.0.1:11434/api/generate"


def test_a_blocking_body_says_stream_false_and_a_stream_true() -> None:
    hi = [{"role": "user", "content": "Hi"}]
    assert backend().prepare_chat_request(hi).data == (
        b'{"messages":[{"content":"Hi","role":"user"}],"model":"llama3.2","stream":false}'
    )
    streamed = backend().prepare_chat_request(hi, stream=True)
    assert streamed.data.endswith(b'"stream":true}')
    assert streamed.headers["Accept-Encoding"] == "identity"


def test_system_images_and_settings_exact_bytes() -> None:
    settings = Settings(
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        seed=7,
        stop="END",
        repetition_penalty=1.1,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        max_context=8192,
        reasoning_effort="none",
        extra_body={"keep_alive": "10m"},
    )
    messages = [
        {"role": "system", "content": "You see images."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is "},
                {"type": "text", "text": "this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
    ]
    data = backend(settings=settings).prepare_chat_request(messages).data
    assert data == (
        b'{"keep_alive":"10m","messages":[{"content":"You see images.","role":"system"},'
        b'{"content":"What is this?","images":["iVBORw0KGgo="],"role":"user"}],'
        b'"model":"llama3.2","options":{"frequency_penalty":0.25,"min_p":0.05,"num_ctx":8192,'
        b'"num_predict":64,"presence_penalty":0.5,"repeat_penalty":1.1,"seed":7,"stop":["END"],'
        b'"temperature":0.2,"top_k":40,"top_p":0.9},"stream":false,"think":false}'
    )


def test_tool_history_tools_and_tool_names_exact_bytes() -> None:
    data = backend().prepare_chat_request(TOOL_HISTORY, tools=TOOLS, tool_choice="auto").data
    assert data == (
        b'{"messages":[{"content":"Be brief.","role":"system"},'
        b'{"content":"Weather in Paris and Oslo?","role":"user"},'
        b'{"content":"","role":"assistant","tool_calls":['
        b'{"function":{"arguments":{"city":"Paris"},"name":"get_weather"},"id":"call_0"},'
        b'{"function":{"arguments":{"city":"Oslo"},"name":"get_time"},"id":"call_1"}]},'
        b'{"content":"12:00","role":"tool","tool_call_id":"call_1","tool_name":"get_time"},'
        b'{"content":"sunny","role":"tool","tool_call_id":"call_0","tool_name":"get_weather"}],'
        b'"model":"llama3.2","stream":false,"tools":[{"function":{'
        b'"description":"Weather for a city","name":"get_weather","parameters":{"properties":{'
        b'"city":{"type":"string"},'
        b'"unit":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}]}'
    )


def test_tool_choice_none_sends_no_tools() -> None:
    body = backend().prepare_chat_request(TOOL_HISTORY[:2], tools=TOOLS, tool_choice="none").body
    assert "tools" not in body


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            Settings(
                json_schema={"type": "object", "properties": {"b": {}, "a": {}}, "required": ["b"]}
            ),
            {"format": {"type": "object", "properties": {"b": {}, "a": {}}, "required": ["b"]}},
        ),
        (Settings(extra_body={"response_format": {"type": "json_object"}}), {"format": "json"}),
        (Settings(reasoning_effort="high"), {"think": "high"}),
        (Settings(reasoning_effort="low"), {"think": "low"}),
        (Settings(reasoning_budget_tokens=0), {"think": False}),
        (Settings(reasoning_budget_tokens=512), {"think": True}),
        (Settings(logprobs=True, top_logprobs=2), {"logprobs": True, "top_logprobs": 2}),
        (Settings(stop=["a", "b"]), {"options": {"stop": ["a", "b"]}}),
        (
            Settings(max_tokens=5, extra_body={"options": {"num_gpu": 0, "num_predict": 9}}),
            {"options": {"num_gpu": 0, "num_predict": 9}},
        ),
        (Settings(logit_bias={"1": 5}, id_slot=1, cache_prompt=True, dry_multiplier=0.5), {}),
    ],
)
def test_settings_land_where_ollama_reads_them(
    settings: Settings, expected: dict[str, Any]
) -> None:
    body = dict(
        backend(settings=settings).prepare_chat_request([{"role": "user", "content": "x"}]).body
    )
    for key in ("model", "messages", "stream"):
        body.pop(key)
    assert body == expected


def test_the_format_schema_goes_out_in_required_order() -> None:
    schema = {"type": "object", "properties": {"z": {}, "a": {}}, "required": ["z", "a"]}
    data = (
        backend(settings=Settings(json_schema=schema))
        .prepare_chat_request([{"role": "user", "content": "x"}])
        .data
    )
    assert b'"format":{"properties":{"z":{},"a":{}},"required":["z","a"],"type":"object"}' in data


def test_reasoning_parts_of_ollama_go_back_as_thinking_and_others_are_dropped() -> None:
    parts = [
        {"dialect": "ollama", "thinking": "I think"},
        {"dialect": "anthropic", "type": "thinking", "thinking": "x", "signature": "s"},
    ]
    messages = [
        {"role": "user", "content": "q"},
        Message("assistant", "a", reasoning_parts=parts),
        {"role": "user", "content": "q2"},
    ]
    body = backend().prepare_chat_request(messages).body
    assert body["messages"][1] == {"role": "assistant", "content": "a", "thinking": "I think"}


def test_an_openai_shaped_turns_reasoning_content_goes_as_thinking() -> None:
    """What the proxy's faces send for thinking a client returned: Ollama's own member."""
    turn = {"role": "assistant", "content": "a", "reasoning_content": "I thought"}
    messages = [{"role": "user", "content": "q"}, turn, {"role": "user", "content": "q2"}]
    body = backend().prepare_chat_request(messages).body
    assert body["messages"][1] == {"role": "assistant", "content": "a", "thinking": "I thought"}
    # Ollama's own reasoning part wins over the OpenAI-shaped copy.
    own = Message.from_dict(
        {**turn, "reasoning_parts": [{"dialect": "ollama", "thinking": "mine"}]}
    )
    body = backend().prepare_chat_request([messages[0], own]).body
    assert body["messages"][1] == {"role": "assistant", "content": "a", "thinking": "mine"}


def test_developer_and_legacy_function_roles() -> None:
    messages = [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "q"},
        {"role": "function", "name": "lookup", "content": "42"},
    ]
    body = backend().prepare_chat_request(messages).body
    assert [m["role"] for m in body["messages"]] == ["system", "user", "tool"]
    assert body["messages"][2]["tool_name"] == "lookup"


def test_tool_names_look_in_the_nearest_assistant_turn() -> None:
    turn = {"role": "assistant", "tool_calls": [{"id": "call_0", "function": {"name": "first"}}]}
    again = {"role": "assistant", "tool_calls": [{"id": "call_0", "function": {"name": "second"}}]}
    messages = [
        Message.from_dict(m)
        for m in [
            turn,
            {"role": "tool", "tool_call_id": "call_0", "content": "1"},
            again,
            {"role": "tool", "tool_call_id": "call_0", "content": "2"},
            {"role": "tool", "tool_call_id": "nope", "content": "3"},
        ]
    ]
    assert tool_names(messages) == {1: "first", 3: "second"}


def test_the_callers_messages_and_settings_are_not_changed() -> None:
    history = copy.deepcopy(TOOL_HISTORY)
    extra = {"options": {"num_gpu": 1}}
    settings = Settings(extra_body=extra)
    backend(settings=settings).prepare_chat_request(history, tools=TOOLS)
    assert history == TOOL_HISTORY and extra == {"options": {"num_gpu": 1}}


# -- the answer round-trips into the next request ----------------------------------


def test_to_message_then_a_tool_result_builds_the_next_request() -> None:
    response = Response()
    response.tool_calls = [ToolCall("get_weather", {"city": "Paris"}, "call_0")]
    response.reasoning_parts = [{"dialect": "ollama", "thinking": "need weather"}]
    turn = response.to_message()
    messages = [
        {"role": "user", "content": "Weather?"},
        turn,
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
    ]
    body = backend().prepare_chat_request(messages, tools=TOOLS).body
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",
        "thinking": "need weather",
        "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}, "id": "call_0"}
        ],
    }
    assert body["messages"][2] == {
        "role": "tool",
        "content": "sunny",
        "tool_name": "get_weather",
        "tool_call_id": "call_0",
    }


# -- text completions --------------------------------------------------------------


def test_generate_without_a_template_sends_system_and_prompt() -> None:
    messages = [
        {"role": "system", "content": "Be terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe"},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}},
            ],
        },
    ]
    request = backend(settings=Settings(max_tokens=3)).prepare_text_request(messages, stream=True)
    assert request.data == (
        b'{"images":["iVBORw0KGgo="],"model":"llama3.2","options":{"num_predict":3},'
        b'"prompt":"Describe","stream":true,"system":"Be terse."}'
    )


def test_generate_with_a_template_sends_the_rendered_prompt_raw() -> None:
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}]
    request = backend(template=ChatML()).prepare_text_request(messages, continuation=True)
    assert request.body == {
        "model": "llama3.2",
        "prompt": ChatML().render(
            [Message("user", "Hi"), Message("assistant", "Hel")], continuation=True
        ),
        "raw": True,
        "stream": False,
    }


def test_generate_without_a_template_refuses_a_conversation_and_continuation() -> None:
    convo = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    with pytest.raises(ValueError, match=r"messages\[0\]\.role.*not .user. here.*template="):
        backend().prepare_text_request(convo)
    with pytest.raises(ValueError, match="continuation"):
        backend().prepare_text_request([{"role": "user", "content": "a"}], continuation=True)
    with pytest.raises(ValueError, match="user message"):
        prompt_parts([Message("system", "s")])


def test_the_pure_builders_alone() -> None:
    assert generate_body("p", {}, "m", False) == {"model": "m", "prompt": "p", "stream": False}
    body = chat_body([Message("user", "x")], {"keep_alive": 0}, None, None, "m", True)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "keep_alive": 0,
        "stream": True,
    }


# -- bad input raises before I/O, naming the field ---------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
                    }
                ]
            },
            r"messages\[0\]\.content\[0\]\.image_url\.url: Ollama takes images inline",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "data:image/png,raw"}}
                        ],
                    }
                ]
            },
            r"messages\[0\]\.content\[0\]\.image_url\.url: a data: URL must be base64",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}
                ]
            },
            r"messages\[0\]\.content\[0\]\.type 'input_audio'",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ]
            },
            r"messages\[0\]\.tool_calls\[0\]\.function\.arguments must be a JSON object",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "1", "function": {"arguments": "{}"}}],
                    }
                ]
            },
            r"messages\[0\]\.tool_calls\[0\]\.function\.name",
        ),
        (
            {"tools": [{"type": "function", "function": {"description": "no name"}}]},
            r"tools\[0\]\.function\.name",
        ),
        ({"tools": [{"type": "web_search"}]}, r"tools\[0\]\.type 'web_search'"),
        ({"tools": {"type": "function"}}, "tools must be a list"),
        (
            {"tools": TOOLS, "tool_choice": "required"},
            "tool_choice 'required': Ollama cannot force",
        ),
        (
            {
                "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            },
            "tool_choice .*cannot force",
        ),
        ({"settings": Settings(reasoning_effort="minimal")}, "reasoning_effort 'minimal'"),
        (
            {"settings": Settings(extra_body={"response_format": {"type": "grammar"}})},
            "response_format.type 'grammar'",
        ),
        (
            {"settings": Settings(extra_body={"options": [1]})},
            "extra_body.options must be a mapping",
        ),
    ],
)
def test_bad_input_raises_naming_the_field(kwargs: dict[str, Any], match: str) -> None:
    messages = kwargs.pop("messages", [{"role": "user", "content": "x"}])
    with pytest.raises((ValueError, TypeError), match=match):
        backend().prepare_chat_request(messages, **kwargs)


def test_a_missing_model_raises_before_io() -> None:
    with pytest.raises(ValueError, match="model: Ollama needs a model name"):
        Ollama().prepare_chat_request([{"role": "user", "content": "x"}])
    with pytest.raises(TypeError, match="messages must be a list"):
        backend().prepare_chat_request(None)  # type: ignore[arg-type]
