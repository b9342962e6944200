"""The Gemini request: exact bytes of `prepare_chat_request`, URLs, headers, bad input."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from llmchat import Settings
from llmchat.backends.gemini import Gemini
from llmchat.dialects.gemini_request import build_request
from llmchat.messages import Message

HI = [{"role": "user", "content": "Hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"unit": {"type": "string"}, "city": {"type": "string"}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def backend(**kwargs: Any) -> Gemini:
    return Gemini(api_key="k", model="gemini-2.5-flash", **kwargs)


def test_plain_request_bytes_url_and_headers() -> None:
    request = backend().prepare_chat_request(HI)
    assert request.method == "POST"
    assert request.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert request.data == b'{"contents":[{"parts":[{"text":"Hi"}],"role":"user"}]}'
    assert request.headers["x-goog-api-key"] == "k"
    assert "Authorization" not in request.headers
    assert "k" not in request.url


def test_stream_url_asks_for_sse_and_the_body_is_the_same() -> None:
    blocking = backend().prepare_chat_request(HI)
    stream = backend().prepare_chat_request(HI, stream=True)
    assert stream.url.endswith("/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert stream.data == blocking.data
    assert stream.headers["Accept-Encoding"] == "identity"


@pytest.mark.parametrize(
    ("api_url", "model", "url"),
    [
        ("http://h/v1beta/", "models/x", "http://h/v1beta/models/x:generateContent"),
        ("http://h/v1beta?k=1", "x", "http://h/v1beta/models/x:generateContent?k=1"),
        ("http://h/v1", "tunedModels/t", "http://h/v1/tunedModels/t:generateContent"),
    ],
)
def test_model_resource_and_url_join(api_url: str, model: str, url: str) -> None:
    assert Gemini(api_url, api_key="k", model=model).prepare_chat_request(HI).url == url


def test_stream_url_with_a_base_query_keeps_both() -> None:
    request = Gemini("http://h/v1beta?k=1", model="x").prepare_chat_request(HI, stream=True)
    assert request.url == "http://h/v1beta/models/x:streamGenerateContent?k=1&alt=sse"


def test_missing_model_raises_naming_model_before_io() -> None:
    with pytest.raises(ValueError, match="model"):
        Gemini(api_key="k").chat_completion(HI)
    with pytest.raises(ValueError, match="model"):
        Gemini(api_key="k", model="a b").prepare_chat_request(HI)


def test_system_images_and_settings_exact_bytes() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/blob"}},
            ],
        },
    ]
    settings = Settings(
        temperature=0.5,
        top_p=0.9,
        top_k=40,
        max_tokens=256,
        stop=["END"],
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        json_schema={
            "type": "object",
            "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
            "required": ["b", "a"],
        },
        reasoning_budget_tokens=1024,
    )
    request = backend().prepare_chat_request(messages, settings=settings)
    assert json.loads(request.data) == {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "What is in these?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                    {
                        "fileData": {
                            "mimeType": "image/jpeg",
                            "fileUri": "https://example.com/cat.jpg",
                        }
                    },
                    {"fileData": {"fileUri": "https://example.com/blob"}},
                ],
            }
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "temperature": 0.5,
            "topP": 0.9,
            "topK": 40,
            "maxOutputTokens": 256,
            "seed": 7,
            "presencePenalty": 0.1,
            "frequencyPenalty": 0.2,
            "stopSequences": ["END"],
            "responseMimeType": "application/json",
            "responseJsonSchema": {
                "type": "object",
                "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
                "required": ["b", "a"],
            },
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
        },
    }
    # The schema's properties go in `required` order (wire_json knows the position).
    assert b'"properties":{"b":{"type":"string"},"a":{"type":"integer"}}' in request.data


def test_tool_history_tools_and_tool_choice_exact_bytes() -> None:
    messages = [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "gemini-call-0",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris","unit":"C"}'},
                },
                {
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Rome","unit":"C"}'},
                },
            ],
            "reasoning_parts": [
                {
                    "dialect": "gemini",
                    "thoughtSignature": "SIG",
                    "on": "functionCall",
                    "id": "gemini-call-0",
                },
                {"dialect": "anthropic", "type": "thinking", "thinking": "x", "signature": "A"},
            ],
        },
        {"role": "tool", "tool_call_id": "gemini-call-0", "content": '{"temp": 21}'},
        {"role": "tool", "tool_call_id": "call_x", "content": "sunny, 25"},
        {"role": "user", "content": "Thanks"},
    ]
    request = backend().prepare_chat_request(
        messages, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "weather"}}
    )
    assert request.data == (
        b'{"contents":['
        b'{"parts":[{"text":"Weather in Paris and Rome?"}],"role":"user"},'
        b'{"parts":[{"text":"Checking."},'
        b'{"functionCall":{"args":{"city":"Paris","unit":"C"},"name":"weather"},"thoughtSignature":"SIG"},'
        b'{"functionCall":{"args":{"city":"Rome","unit":"C"},"name":"weather"}}],"role":"model"},'
        b'{"parts":[{"functionResponse":{"name":"weather","response":{"temp":21}}},'
        b'{"functionResponse":{"name":"weather","response":{"result":"sunny, 25"}}},'
        b'{"text":"Thanks"}],"role":"user"}],'
        b'"toolConfig":{"functionCallingConfig":{"allowedFunctionNames":["weather"],"mode":"ANY"}},'
        b'"tools":[{"functionDeclarations":[{"description":"Weather for a city","name":"weather",'
        b'"parametersJsonSchema":{"additionalProperties":false,'
        b'"properties":{"city":{"type":"string"},"unit":{"type":"string"}},'
        b'"required":["city","unit"],"type":"object"}}]}]}'
    )


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"functionCallingConfig": {"mode": "VALIDATED"}}, {"mode": "VALIDATED"}),
    ],
)
def test_tool_choice(choice: Any, config: dict[str, Any]) -> None:
    body = backend().prepare_chat_request(HI, tools=[WEATHER], tool_choice=choice).body
    assert body["toolConfig"] == {"functionCallingConfig": config}


def test_gemini_own_tools_pass_through() -> None:
    body = backend().prepare_chat_request(HI, tools=[WEATHER, {"googleSearch": {}}]).body
    assert body["tools"][1] == {"googleSearch": {}}
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "weather"


@pytest.mark.parametrize(
    ("settings", "thinking"),
    [
        (Settings(reasoning_effort="low"), {"thinkingLevel": "low", "includeThoughts": True}),
        (Settings(reasoning_effort="none"), {"thinkingBudget": 0}),
        (Settings(reasoning_budget_tokens=0), {"thinkingBudget": 0}),
        (Settings(reasoning_budget_tokens=-1), {"thinkingBudget": -1, "includeThoughts": True}),
        (
            Settings(reasoning_budget_tokens=64, reasoning_effort="high"),
            {"thinkingBudget": 64, "includeThoughts": True},
        ),
    ],
)
def test_thinking_config(settings: Settings, thinking: dict[str, Any]) -> None:
    body = backend().prepare_chat_request(HI, settings=settings).body
    assert body["generationConfig"]["thinkingConfig"] == thinking


def test_extra_body_merges_and_llama_only_samplers_are_not_sent() -> None:
    settings = Settings(
        temperature=0.1,
        min_p=0.05,
        repetition_penalty=1.1,
        cache_prompt=True,
        extra_body={
            "safetySettings": [
                {"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}
            ],
            "generationConfig": {"candidateCount": 1, "temperature": 0.3},
        },
    )
    body = backend().prepare_chat_request(HI, settings=settings).body
    assert body["generationConfig"] == {"temperature": 0.3, "candidateCount": 1}
    assert body["safetySettings"][0]["threshold"] == "BLOCK_NONE"
    assert not {"min_p", "repetition_penalty", "cache_prompt", "model"} & set(body)


def test_json_object_response_format() -> None:
    body = build_request([Message("user", "x")], {"response_format": {"type": "json_object"}})
    assert body["generationConfig"] == {"responseMimeType": "application/json"}


@pytest.mark.parametrize(
    ("messages", "tools", "tool_choice", "field"),
    [
        ([{"role": "system", "content": "only"}], None, None, "messages"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}],
            None,
            None,
            r"messages\[0\]\.content\[0\]\.image_url\.url",
        ),
        (
            [{"role": "user", "content": [{"type": "video", "video": {}}]}],
            None,
            None,
            r"messages\[0\]\.content\[0\]\.type",
        ),
        (
            [*HI, {"role": "tool", "tool_call_id": "nope", "content": "x"}],
            None,
            None,
            r"messages\[1\]\.tool_call_id",
        ),
        (
            [
                *HI,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}],
                },
            ],
            None,
            None,
            r"messages\[1\]\.tool_calls\[0\]\.function\.arguments",
        ),
        (
            HI,
            [{"type": "function", "function": {"description": "no name"}}],
            None,
            r"tools\[0\]\.function\.name",
        ),
        (HI, "weather", None, "tools"),
        (HI, None, "sometimes", "tool_choice"),
        (HI, None, {"type": "function"}, "tool_choice"),
    ],
)
def test_bad_input_raises_naming_the_field(
    messages: Any, tools: Any, tool_choice: Any, field: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=field):
        backend().prepare_chat_request(messages, tools=tools, tool_choice=tool_choice)


def test_a_tool_result_may_name_its_function_itself() -> None:
    messages = [*HI, {"role": "tool", "tool_call_id": "x", "name": "f", "content": "[1, 2]"}]
    body = backend().prepare_chat_request(messages).body
    assert body["contents"][0]["parts"][1] == {
        "functionResponse": {"name": "f", "response": {"result": "[1, 2]"}}
    }


def test_text_signatures_go_back_on_the_text_part() -> None:
    messages = [
        *HI,
        {
            "role": "assistant",
            "content": "Hello",
            "reasoning_parts": [
                {"dialect": "gemini", "thoughtSignature": "T1", "on": "text"},
                {"dialect": "gemini", "thoughtSignature": "T2", "on": "thought"},
            ],
        },
        {"role": "user", "content": "Again"},
    ]
    body = backend().prepare_chat_request(messages).body
    assert body["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": "Hello", "thoughtSignature": "T1"},
            {"text": "", "thoughtSignature": "T2"},
        ],
    }


def _calls(*ids: str, signed: str | None = None) -> dict[str, Any]:
    """An assistant turn calling `f` once per id; `signed`: Gemini's signature on the first."""
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    turn: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
    if signed is not None:
        turn["reasoning_parts"] = [
            {"dialect": "gemini", "thoughtSignature": signed, "on": "functionCall", "id": ids[0]}
        ]
    return turn


@pytest.mark.parametrize(
    ("turn", "signatures"),
    [
        # Another model's (or a face's) calls: the first is signed with Google's sentinel,
        # the one value Gemini 3 takes for a call it did not make (else a 400).
        (_calls("a"), ["skip_thought_signature_validator"]),
        (_calls("a", "b"), ["skip_thought_signature_validator", None]),
        # Gemini's own signature goes back as it came; nothing is added beside it.
        (_calls("a", "b", signed="REAL"), ["REAL", None]),
    ],
)
def test_an_unsigned_function_call_gets_googles_sentinel(
    turn: dict[str, Any], signatures: list[str | None]
) -> None:
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in turn["tool_calls"]
    ]
    body = backend().prepare_chat_request([*HI, turn, *results]).body
    parts = body["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts] == signatures
    assert all("functionCall" in p for p in parts)


def test_the_builder_does_not_change_its_inputs() -> None:
    messages = [Message("user", "x")]
    settings: dict[str, Any] = {"temperature": 1.0, "extra": {"a": [1]}}
    tools = [copy.deepcopy(WEATHER)]
    before = copy.deepcopy((settings, tools))
    body = build_request(messages, settings, tools, "auto")
    body["extra"]["a"].append(2)
    body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["type"] = "changed"
    assert (settings, tools) == before


def test_no_text_completions() -> None:
    with pytest.raises(ValueError, match="no text completions"):
        backend().prepare_text_request(HI)
