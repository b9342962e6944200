"""The Gemini face's request translation, as the upstream receives it over a real socket.

Each test posts a GenerateContentRequest to the real proxy and reads the chat
body the scripted upstream got; a few edge rules are checked on
`generate_request` directly.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Any

import pytest

from llmchat.backends.gemini import Gemini
from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.proxy.faces.gemini.translate import generate_request
from llmchat.testing import Reply, ScriptedServer

from ...support.proxy import running_proxy
from .gemini_support import GENERATE, STREAM, gemini_proxy, last_chat_body, request, user

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "OBJECT",
        "properties": {
            "city": {"type": "STRING", "description": "the city"},
            "days": {"type": "INTEGER", "nullable": True},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
        },
        "required": ["city"],
        "propertyOrdering": ["city", "days", "tags"],
    },
}
SHELL_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string"}},
    "additionalProperties": False,
}


def upstream_body(body: dict[str, Any], path: str = GENERATE) -> dict[str, Any]:
    with gemini_proxy() as (url, upstream, _):
        request(url, "POST", path, body)
        return last_chat_body(upstream)


def test_contents_system_instruction_and_the_model_from_the_path() -> None:
    sent = upstream_body(
        {
            "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Be kind."}]},
            "contents": [user("hi"), {"role": "model", "parts": [{"text": "Hello."}]}, user("?")],
        }
    )
    assert sent["model"] == "gemini-2.5-pro"
    assert sent["stream"] is True  # the proxy always streams from its upstream
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief.\nBe kind."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "?"},
    ]


def test_a_models_prefixed_name_under_v1_and_a_string_system_instruction() -> None:
    body = {"systemInstruction": "sys", "contents": [user("hi")]}
    sent = upstream_body(body, "/v1/models/models/qwen3:8b:generateContent")
    assert sent["model"] == "qwen3:8b"
    assert sent["messages"][0] == {"role": "system", "content": "sys"}


def test_function_calls_and_responses_are_paired_by_synthesized_ids() -> None:
    sent = upstream_body(
        {
            "contents": [
                user("weather in Oslo and Rome, and the time"),
                {
                    "role": "model",
                    "parts": [
                        {"text": "Checking.", "thoughtSignature": "c2ln"},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
                        {"functionCall": {"name": "get_time", "args": {}}},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "get_time", "response": {"output": "noon"}}},
                        {"functionResponse": {"name": "get_weather", "response": {"t": 3}}},
                        {"functionResponse": {"name": "get_weather", "response": {"t": 20}}},
                        {"text": "thanks"},
                    ],
                },
            ]
        }
    )
    messages = sent["messages"]
    assistant = messages[1]
    assert assistant["content"] == "Checking."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1", "call_2"]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert "reasoning_parts" not in assistant  # an OpenAI upstream gets no signatures
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "noon"},
        {"role": "tool", "tool_call_id": "call_0", "content": '{"t":3}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"t":20}'},
        {"role": "user", "content": "thanks"},
    ]


def test_call_ids_sent_by_the_client_are_kept_and_matched() -> None:
    sent = upstream_body(
        {
            "contents": [
                user("go"),
                {"role": "model", "parts": [{"functionCall": {"id": "a1", "name": "f"}}]},
                {
                    "role": "function",
                    "parts": [{"functionResponse": {"id": "a1", "name": "f", "response": {}}}],
                },
            ]
        }
    )
    assert sent["messages"][1]["tool_calls"][0]["id"] == "a1"
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "a1", "content": ""}


def test_a_result_under_the_clients_own_id_pairs_with_the_call_that_had_none() -> None:
    """Gemini CLI names a call the answer gave no id (``<name>-<ms>-<hex>``), keeps the
    model turn as it came, and sends the result under its own id: paired by name."""
    sent = upstream_body(
        {
            "contents": [
                user("go"),
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "f", "args": {"n": 1}}},
                        {"functionCall": {"id": "kept", "name": "f", "args": {"n": 2}}},
                        {"functionCall": {"name": "f", "args": {"n": 3}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"id": "f-1764000000000-9a1b", "name": "f",
                                              "response": {"output": "one"}}},
                        {"functionResponse": {"id": "f-1764000000001-77c0", "name": "f",
                                              "response": {"output": "three"}}},
                        {"functionResponse": {"id": "kept", "name": "f",
                                              "response": {"output": "two"}}},
                    ],
                },
            ]
        }
    )  # fmt: skip
    calls = sent["messages"][1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_0", "kept", "call_2"]
    assert sent["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "one"},
        {"role": "tool", "tool_call_id": "call_2", "content": "three"},
        {"role": "tool", "tool_call_id": "kept", "content": "two"},
    ]


def test_thought_parts_are_not_sent_back_and_a_thoughts_only_turn_is_dropped() -> None:
    sent = upstream_body(
        {
            "contents": [
                user("a"),
                {"role": "model", "parts": [{"text": "hmm", "thought": True}]},
                user("b"),
                {
                    "role": "model",
                    "parts": [{"text": "secret", "thought": True}, {"text": "Answer."}],
                },
                user("c"),
            ]
        }
    )
    assert sent["messages"] == [
        {"role": "user", "content": "a\n\nb"},
        {"role": "assistant", "content": "Answer."},
        {"role": "user", "content": "c"},
    ]


def test_inline_images_become_data_urls() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": PNG}}
    sent = upstream_body({"contents": [{"role": "user", "parts": [{"text": "what?"}, image]}]})
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "what?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


def test_function_declarations_tool_config_and_google_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shell = {"name": "run_shell", "parametersJsonSchema": SHELL_SCHEMA}
    with caplog.at_level(logging.DEBUG, logger="llmchat.proxy"):
        sent = upstream_body(
            {
                "contents": [user("go")],
                "tools": [
                    {"functionDeclarations": [WEATHER, shell]},
                    {"googleSearch": {}},
                    {"codeExecution": {}},
                ],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            }
        )
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "description": "the city"},
                        "days": {"type": ["integer", "null"]},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["city"],
                },
            },
        },
        {"type": "function", "function": {"name": "run_shell", "parameters": SHELL_SCHEMA}},
    ]
    assert sent["tool_choice"] == "auto"
    assert "tools[1].googleSearch dropped (Google's own tool)" in caplog.text
    assert "tools[2].codeExecution dropped (Google's own tool)" in caplog.text


@pytest.mark.parametrize(
    ("config", "choice", "names"),
    [
        ({"mode": "ANY"}, "required", ["get_weather", "run_shell"]),
        ({"mode": "NONE"}, "none", ["get_weather", "run_shell"]),
        (
            {"mode": "ANY", "allowedFunctionNames": ["run_shell"]},
            {"type": "function", "function": {"name": "run_shell"}},
            ["run_shell"],
        ),
    ],
)
def test_function_calling_modes(config: dict[str, Any], choice: Any, names: list[str]) -> None:
    body = {
        "contents": [user("go")],
        "tools": [{"functionDeclarations": [WEATHER, {"name": "run_shell"}]}],
        "toolConfig": {"functionCallingConfig": config},
    }
    request_body = generate_request(body, "m", stream=False).body
    assert request_body["tool_choice"] == choice
    assert [t["function"]["name"] for t in request_body["tools"]] == names


def test_generation_config_over_the_wire() -> None:
    sent = upstream_body(
        {
            "contents": [user("json please")],
            "generationConfig": {
                "temperature": 0.2,
                "topP": 0.9,
                "topK": 40,
                "maxOutputTokens": 256,
                "stopSequences": ["END"],
                "seed": 7,
                "presencePenalty": 0.1,
                "frequencyPenalty": 0.3,
                "candidateCount": 1,
                "responseMimeType": "application/json",
                "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "NUMBER"}}},
                "thinkingConfig": {"thinkingBudget": 0},
                "responseModalities": ["TEXT"],
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "OFF"}],
        },
        STREAM + "?alt=sse",
    )
    assert {
        k: sent[k] for k in sent if k not in ("messages", "model", "stream", "stream_options")
    } == {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "max_tokens": 256,
        "stop": ["END"],
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.3,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "response",
                "schema": {"type": "object", "properties": {"a": {"type": "number"}}},
            },
        },
        "reasoning_effort": "none",
    }


@pytest.mark.parametrize(
    ("config", "effort", "shown"),
    [
        ({"thinkingBudget": 1024, "includeThoughts": True}, "low", True),
        ({"thinkingBudget": 8192}, "medium", False),
        ({"thinkingBudget": 30000, "includeThoughts": True}, "high", True),
        ({"thinkingBudget": -1, "includeThoughts": True}, None, True),
        ({"thinkingBudget": 0, "includeThoughts": True}, "none", False),
        ({"thinkingLevel": "LOW", "includeThoughts": True}, "low", True),
    ],
)
def test_thinking_config(config: dict[str, Any], effort: str | None, shown: bool) -> None:
    body = {"contents": [user("x")], "generationConfig": {"thinkingConfig": config}}
    translated = generate_request(body, "m", stream=True)
    assert translated.body.get("reasoning_effort") == effort
    assert translated.thinking is shown


def test_response_json_schema_is_sent_as_given_and_json_without_a_schema() -> None:
    schema = {"type": "object", "additionalProperties": False}
    config = {"responseMimeType": "application/json", "responseJsonSchema": schema}
    body = generate_request(
        {"contents": [user("x")], "generationConfig": config}, "m", stream=False
    )
    assert body.body["response_format"]["json_schema"]["schema"] == schema
    plain = {"responseMimeType": "application/json"}
    body = generate_request({"contents": [user("x")], "generationConfig": plain}, "m", stream=False)
    assert body.body["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("body", "error", "words"),
    [
        ({"contents": []}, InvalidArgumentError, "contents: must hold at least one Content"),
        ({"contents": "hi"}, InvalidTypeError, "contents: must be a list of Content objects"),
        (
            {"contents": [user("x")], "generationConfig": {"candidateCount": 2}},
            InvalidArgumentError,
            "generationConfig.candidateCount: this proxy answers one candidate, not 2",
        ),
        (
            {"contents": [user("x")], "generationConfig": {"temperature": "hot"}},
            InvalidTypeError,
            "generationConfig.temperature: must be a number, not string",
        ),
        (
            {"contents": [{"role": "robot", "parts": []}]},
            InvalidArgumentError,
            "contents[0].role: Please use a valid role",
        ),
        (
            {"contents": [{"parts": [{"inlineData": {"mimeType": "video/mp4", "data": "AA=="}}]}]},
            InvalidArgumentError,
            "contents[0].parts[0].inlineData.mimeType: video/mp4",
        ),
        (
            {"contents": [user("x")], "tools": [{"functionDeclarations": [{"name": 3}]}]},
            InvalidTypeError,
            "tools[0].functionDeclarations[0].name: must be a string, not number",
        ),
    ],
)
def test_what_cannot_be_served_names_the_field(
    body: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=re.escape(words)):
        generate_request(body, "m", stream=False)


def test_a_result_matching_no_call_is_folded_into_text() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"a": 1}}}]}
        ]
    }
    messages = generate_request(body, "m", stream=False).body["messages"]
    assert messages == [{"role": "user", "content": '[f result]\n{"a":1}'}]


def test_thought_signatures_reach_a_gemini_upstream_unchanged() -> None:
    body = {
        "contents": [
            user("go"),
            {
                "role": "model",
                "parts": [
                    {"text": "Calling.", "thoughtSignature": "dGV4dA=="},
                    {
                        "functionCall": {"name": "f", "args": {"a": 1}},
                        "thoughtSignature": "Y2FsbA==",
                    },
                ],
            },
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"r": 2}}}]},
        ]
    }
    upstream = ScriptedServer(lambda _: Reply.json({"error": {"code": 500}}, status=500)).start()
    try:
        backend = Gemini(api_url=upstream.url, model="g", api_key="upstream-key")
        with backend, running_proxy(backend) as url:
            request(url, "POST", GENERATE, body)
        sent = upstream.requests[0].json()
    finally:
        upstream.stop()
    model_parts = sent["contents"][1]["parts"]
    assert model_parts == [
        {"text": "Calling.", "thoughtSignature": "dGV4dA=="},
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "Y2FsbA=="},
    ]
    assert sent["contents"][2]["parts"] == [
        {"functionResponse": {"name": "f", "response": {"r": 2}}}
    ]
