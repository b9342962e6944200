"""The Anthropic request: exact bytes of `prepare_chat_request`, and bad input raising first."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat import Settings
from llmchat.backends.anthropic import Anthropic
from llmchat.dialects.anthropic_request import EFFORT_BUDGETS, messages_body, thinking_config
from llmchat.messages import Message

HI = [{"role": "user", "content": "Hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather",
        "parameters": {
            "type": "object",
            "properties": {"unit": {"type": "string"}, "city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            {"type": "image_url", "image_url": {"url": "https://x.example/a.jpg"}},
        ],
    },
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "toolu_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Rome"}},
            },
        ],
        "reasoning_parts": [
            {"dialect": "anthropic", "type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"dialect": "gemini", "thought_signature": "x"},
            {"dialect": "anthropic", "type": "redacted_thinking", "data": "RED"},
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "oops", "is_error": True},
    {"role": "user", "content": "Thanks"},
]


def backend(**kwargs: Any) -> Anthropic:
    kwargs.setdefault("api_key", "k")
    return Anthropic("http://h/v1", model="claude-x", **kwargs)


def test_the_smallest_request_exactly() -> None:
    request = backend().prepare_chat_request(HI)
    assert (request.method, request.url) == ("POST", "http://h/v1/messages")
    assert request.data == (
        b'{"max_tokens":4096,"messages":[{"content":"Hi","role":"user"}],"model":"claude-x"}'
    )
    assert request.headers == {
        "Content-Type": "application/json",
        "User-Agent": request.headers["User-Agent"],
        "x-api-key": "k",
        "anthropic-version": "2023-06-01",
    }


def test_a_full_conversation_exactly() -> None:
    settings = Settings(
        max_tokens=100,
        temperature=0.5,
        top_p=0.9,
        top_k=5,
        stop="END",
        seed=3,
        frequency_penalty=0.1,
        id_slot=1,
        reasoning_effort="low",
        json_schema={
            "type": "object",
            "properties": {"b": {"type": "string"}, "a": {"type": "string"}},
            "required": ["b", "a"],
        },
        parallel_tool_calls=False,
        extra_body={"metadata": {"user_id": "u"}},
    )
    request = backend().prepare_chat_request(
        CONVERSATION, [WEATHER], "required", settings, stream=True
    )
    assert request.data.decode() == (
        '{"max_tokens":100,"messages":['
        '{"content":[{"text":"What is this?","type":"text"},'
        '{"source":{"data":"iVBO","media_type":"image/png","type":"base64"},"type":"image"},'
        '{"source":{"type":"url","url":"https://x.example/a.jpg"},"type":"image"}],"role":"user"},'
        '{"content":[{"signature":"sig","thinking":"hmm","type":"thinking"},'
        '{"data":"RED","type":"redacted_thinking"},{"text":"Let me check.","type":"text"},'
        '{"id":"toolu_1","input":{"city":"Paris"},"name":"get_weather","type":"tool_use"},'
        '{"id":"toolu_2","input":{"city":"Rome"},"name":"get_weather","type":"tool_use"}],'
        '"role":"assistant"},'
        '{"content":[{"content":"18C","tool_use_id":"toolu_1","type":"tool_result"},'
        '{"content":"oops","is_error":true,"tool_use_id":"toolu_2","type":"tool_result"}],'
        '"role":"user"},{"content":"Thanks","role":"user"}],'
        '"metadata":{"user_id":"u"},"model":"claude-x",'
        '"output_format":{"schema":{"properties":{"b":{"type":"string"},"a":{"type":"string"}},'
        '"required":["b","a"],"type":"object"},"type":"json_schema"},'
        '"stop_sequences":["END"],"stream":true,"system":"Be brief.","temperature":0.5,'
        '"thinking":{"budget_tokens":2048,"type":"enabled"},'
        '"tool_choice":{"disable_parallel_tool_use":true,"type":"any"},'
        '"tools":[{"description":"Weather","input_schema":{"properties":{"city":{"type":"string"},'
        '"unit":{"type":"string"}},"required":["city"],"type":"object"},"name":"get_weather"}],'
        '"top_k":5,"top_p":0.9}'
    )
    assert request.headers["Accept-Encoding"] == "identity"


def body(messages: list[dict[str, Any]], settings: dict[str, Any] | None = None, **kw: Any) -> Any:
    return messages_body([Message.from_dict(m) for m in messages], settings or {}, **kw)


def test_system_messages_anywhere_join_the_top_level_system() -> None:
    got = body(
        [
            {"role": "system", "content": "A"},
            {"role": "user", "content": "Hi"},
            {"role": "developer", "content": "B"},
            {"role": "system", "content": ""},
        ]
    )
    assert got["system"] == "A\n\nB"
    assert got["messages"] == [{"role": "user", "content": "Hi"}]


def test_a_system_with_parts_becomes_text_blocks() -> None:
    part = {"type": "text", "text": "B", "cache_control": {"type": "ephemeral"}}
    got = body([{"role": "system", "content": "A"}, {"role": "system", "content": [part]}, *HI])
    assert got["system"] == [{"type": "text", "text": "A"}, part]


def test_no_system_no_member() -> None:
    assert "system" not in body(HI)


def test_consecutive_tool_results_share_one_user_message_and_others_do_not() -> None:
    got = body(
        [
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "2"}]},
            {"role": "assistant", "content": "x"},
            {"role": "tool", "tool_call_id": "c", "content": None},
        ]
    )["messages"]
    assert got == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "b",
                    "content": [{"type": "text", "text": "2"}],
                },
            ],
        },
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}]},
    ]


def test_assistant_with_calls_and_no_text_has_no_empty_text_block() -> None:
    call = {"id": "t", "type": "function", "function": {"name": "f", "arguments": ""}}
    for content in ("", None):
        got = body([{"role": "assistant", "content": content, "tool_calls": [call]}])
        assert got["messages"][0]["content"] == [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}
        ]


def test_other_dialects_parts_are_dropped_and_plain_text_stays_a_string() -> None:
    got = body(
        [{"role": "assistant", "content": "ok", "reasoning_parts": [{"dialect": "gemini", "s": 1}]}]
    )
    assert got["messages"] == [{"role": "assistant", "content": "ok"}]


def test_an_openai_shaped_reasoning_content_is_not_sent() -> None:
    """Anthropic refuses an unknown message member; unsigned text is no thinking block."""
    got = body([{"role": "assistant", "content": "ok", "reasoning_content": "I thought"}])
    assert got["messages"] == [{"role": "assistant", "content": "ok"}]


def test_thinking_parts_alone_go_first_then_the_text() -> None:
    part = {"dialect": "anthropic", "type": "thinking", "thinking": "t", "signature": "s"}
    got = body([{"role": "assistant", "content": "ok", "reasoning_parts": [part]}])
    assert got["messages"][0]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "text", "text": "ok"},
    ]


def test_anthropic_native_blocks_and_tools_pass_as_given() -> None:
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}}
    tool = {
        "name": "calc",
        "input_schema": {"type": "object"},
        "cache_control": {"type": "ephemeral"},
    }
    server = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    got = body(
        [{"role": "user", "content": [doc]}],
        tools=[tool, server],
        tool_choice={"type": "tool", "name": "calc"},
    )
    assert got["messages"][0]["content"] == [doc]
    assert got["tools"] == [tool, server]
    assert got["tool_choice"] == {"type": "tool", "name": "calc"}


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "function": {"name": "f"}}, {"type": "tool", "name": "f"}),
        ({"type": "any"}, {"type": "any"}),
    ],
)
def test_tool_choice(choice: Any, wire: dict[str, Any]) -> None:
    assert body(HI, tools=[WEATHER], tool_choice=choice)["tool_choice"] == wire


def test_parallel_tool_calls_false_without_a_choice_is_auto_without_parallel() -> None:
    got = body(HI, {"parallel_tool_calls": False}, tools=[WEATHER])
    assert got["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert "tool_choice" not in body(HI, {"parallel_tool_calls": False})
    assert body(HI, {"parallel_tool_calls": False}, tools=[WEATHER], tool_choice="none")[
        "tool_choice"
    ] == {"type": "none"}
    assert "tool_choice" not in body(HI, {"parallel_tool_calls": True}, tools=[WEATHER])


def test_a_tool_without_parameters_gets_an_empty_object_schema() -> None:
    got = body(HI, tools=[{"type": "function", "function": {"name": "now", "strict": True}}])
    assert got["tools"] == [
        {"name": "now", "input_schema": {"type": "object", "properties": {}}, "strict": True}
    ]


def test_max_tokens_default_and_thinking_on_top() -> None:
    assert body(HI)["max_tokens"] == 4096
    assert body(HI, default_max_tokens=10)["max_tokens"] == 10
    assert body(HI, {"reasoning_budget_tokens": 2000})["max_tokens"] == 6096
    assert body(HI, {"max_tokens": 50, "reasoning_budget_tokens": 2000})["max_tokens"] == 50


def test_reasoning_settings_as_thinking() -> None:
    assert thinking_config({"reasoning_budget_tokens": 3000}) == {
        "type": "enabled",
        "budget_tokens": 3000,
    }
    assert thinking_config({"reasoning_budget_tokens": 0}) is None
    assert thinking_config({"reasoning_effort": "none"}) is None
    assert thinking_config({}) is None
    for level, budget in EFFORT_BUDGETS.items():
        assert thinking_config({"reasoning_effort": level}) == {
            "type": "enabled",
            "budget_tokens": budget,
        }
    both = {"reasoning_effort": "high", "reasoning_budget_tokens": 1500}
    assert thinking_config(both) == {"type": "enabled", "budget_tokens": 1500}


def test_settings_anthropic_lacks_are_not_sent_but_extra_body_is() -> None:
    settings = Settings(
        seed=1,
        frequency_penalty=0.5,
        presence_penalty=0.5,
        min_p=0.1,
        repetition_penalty=1.1,
        logprobs=True,
        id_slot=0,
        cache_prompt=True,
        extra_body={"seed": 7, "thinking": {"type": "disabled"}},
    )
    sent = json.loads(backend().prepare_chat_request(HI, settings=settings).data)
    assert sent == {
        "model": "claude-x",
        "max_tokens": 4096,
        "messages": HI,
        "seed": 7,
        "thinking": {"type": "disabled"},
    }


def test_auth_bearer_and_a_version_and_no_key() -> None:
    headers = (
        backend(auth="bearer", anthropic_version="2099-01-01").prepare_chat_request(HI).headers
    )
    assert headers["Authorization"] == "Bearer k" and "x-api-key" not in headers
    assert headers["anthropic-version"] == "2099-01-01"
    keyless = Anthropic("http://h/v1", api_key="").prepare_chat_request(HI).headers
    assert "x-api-key" not in keyless and "Authorization" not in keyless


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    assert Anthropic().api_key == "sk-ant-env"
    assert Anthropic().api_url == "https://api.anthropic.com/v1"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env\n")
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        Anthropic()
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert Anthropic().api_key is None


def test_clone_keeps_the_version_and_auth() -> None:
    original = backend(auth="bearer", anthropic_version="v9")
    copy = original.clone(model="other")
    assert (copy.auth, copy.anthropic_version, copy.model, copy.api_key) == (
        "bearer",
        "v9",
        "other",
        "k",
    )
    assert isinstance(copy, Anthropic)


def test_no_text_completions() -> None:
    with pytest.raises(ValueError, match="no text completions"):
        backend().prepare_text_request(HI)


# -- bad input raises before I/O, naming the field -------------------------------------------

TOOL_CALL = {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"messages": None}, "messages must be a list"),
        ({"messages": [{"role": "user", "content": None}]}, r"messages\[0\]\.content is missing"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}
                ]
            },
            r"messages\[0\]\.content\[0\]: a 'input_audio' part",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}],
                    }
                ]
            },
            r"messages\[0\]\.content\[0\]\.image_url\.url",
        ),
        ({"messages": [{"role": "tool", "content": "r"}]}, r"messages\[0\]\.tool_call_id"),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{**TOOL_CALL, "id": ""}]}]},
            r"messages\[0\]\.tool_calls\[0\]\.id",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "t", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ]
            },
            r"messages\[0\]\.tool_calls\[0\]\.function\.arguments",
        ),
        (
            {
                "messages": [
                    {
                        "role": "system",
                        "content": [{"type": "image_url", "image_url": "https://x"}],
                    },
                    *HI,
                ]
            },
            "system takes text blocks only",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": ""}}]},
            r"tools\[0\]\.function\.name",
        ),
        ({"tools": [{"type": "function"}]}, r"tools\[0\] must be an OpenAI function tool"),
        ({"tools": {"name": "x"}}, "tools must be a list"),
        ({"tools": ["x"]}, r"tools\[0\] must be a mapping"),
        ({"tool_choice": "sometimes"}, "tool_choice must be 'auto'"),
        ({"tool_choice": {"type": "function", "function": {}}}, r"tool_choice\.function\.name"),
        ({"tool_choice": {"type": "tool"}}, r"tool_choice\.name"),
        ({"tool_choice": {"type": "whatever"}}, "tool_choice type 'whatever'"),
        ({"tool_choice": 3}, "tool_choice must be a str"),
        ({"settings": Settings(reasoning_budget_tokens=-1)}, "reasoning_budget_tokens"),
        ({"settings": Settings(reasoning_effort="extreme")}, "reasoning_effort 'extreme'"),
        (
            {"settings": Settings(extra_body={"response_format": {"type": "json_object"}})},
            "response_format has no Anthropic equivalent",
        ),
    ],
)
def test_bad_input_raises_naming_the_field(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"messages": HI, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        backend().prepare_chat_request(
            args["messages"], args.get("tools"), args.get("tool_choice"), args.get("settings")
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"auth": "basic"}, "auth must be"),
        ({"anthropic_version": ""}, "anthropic_version"),
        ({"anthropic_version": "2023\r\nX: y"}, "line break"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        backend(**kwargs)


def test_the_builder_does_not_change_its_input() -> None:
    import copy

    messages = [Message.from_dict(m) for m in CONVERSATION]
    tools = [copy.deepcopy(WEATHER)]
    settings = {
        "stop": ["x"],
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
    }
    before = (copy.deepcopy(messages), copy.deepcopy(tools), copy.deepcopy(settings))
    out = messages_body(messages, settings, tools, {"type": "auto"})
    assert (messages, tools, settings) == before
    out["tools"][0]["input_schema"]["type"] = "changed"
    out["messages"][1]["content"][0]["thinking"] = "changed"
    assert (messages, tools, settings) == before


CALL = {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}
SIGNED = {"dialect": "anthropic", "type": "thinking", "thinking": "t", "signature": "s"}
TOOL_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "Go"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "t", "content": "done"},
]


@pytest.mark.parametrize(
    ("last_turn", "kept"),
    [
        ({}, False),  # unsigned calls: Anthropic would refuse the request with thinking on
        ({"reasoning_parts": [SIGNED]}, True),  # its own signed thinking goes first: kept
        ({"reasoning_content": "unsigned text"}, False),  # a face's OpenAI-shaped thinking
        ({"tool_calls": None, "content": "plain"}, True),  # no tool call: nothing required
    ],
)
def test_thinking_is_left_out_when_the_last_tool_turn_has_no_signed_thinking(
    last_turn: dict[str, Any], kept: bool
) -> None:
    messages = [dict(m) for m in TOOL_LOOP]
    messages[1].update(last_turn)
    if last_turn.get("tool_calls", CALL) is None:
        messages = [*messages[:2], {"role": "user", "content": "And?"}]
    got = body(messages, {"reasoning_budget_tokens": 1024})
    assert ("thinking" in got) is kept


def test_only_the_last_assistant_turn_decides() -> None:
    """An unsigned tool turn earlier in the history, then a plain answer: thinking stays."""
    later = [
        *TOOL_LOOP,
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "More"},
    ]
    assert body(later, {"reasoning_budget_tokens": 1024})["thinking"]["budget_tokens"] == 1024
    as_sent = body(TOOL_LOOP, {"thinking": {"type": "enabled", "budget_tokens": 2048}})
    assert "thinking" not in as_sent  # an extra_body `thinking` member is checked too
