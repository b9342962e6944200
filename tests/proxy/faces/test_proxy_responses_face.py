"""The Responses face's request translation: /v1/responses bodies in, OpenAI chat bodies out."""

from __future__ import annotations

from typing import Any

import pytest

from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.proxy.faces.responses.translate import Unsupported, error_body, responses_request


def req(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **fields}


def test_minimal_request_and_echo() -> None:
    chat, echo = responses_request(req())
    assert chat == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    assert echo["model"] == "m" and echo["tools"] == [] and echo["instructions"] is None


def test_absent_or_false_store_is_not_stored() -> None:
    for fields in ({}, {"store": False}, {"store": None}):
        chat, _ = responses_request(req(**fields))
        assert "store" not in chat


def test_settings_translate() -> None:
    chat, echo = responses_request(
        req(
            max_output_tokens=40.0,
            temperature=0.5,
            top_p=0.9,
            parallel_tool_calls=False,
            reasoning={"effort": "minimal", "summary": "auto"},
            text={"format": {"type": "json_object"}, "verbosity": "low"},
            include=["reasoning.encrypted_content"],
            metadata={"k": "v"},
            truncation="auto",
            user="u",
        )
    )
    assert chat["max_tokens"] == 40 and chat["temperature"] == 0.5 and chat["top_p"] == 0.9
    assert chat["parallel_tool_calls"] is False and chat["reasoning_effort"] == "minimal"
    assert chat["response_format"] == {"type": "json_object"}
    assert not {"include", "metadata", "truncation", "user", "text"} & set(chat)
    assert echo["reasoning"] == {"effort": "minimal", "summary": "auto"}
    assert echo["metadata"] == {"k": "v"} and echo["max_output_tokens"] == 40


def test_json_schema_format() -> None:
    fmt = {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": True}
    chat, echo = responses_request(req(text={"format": fmt}))
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": True},
    }
    assert echo["text"] == {"format": fmt}


def test_images_and_parts() -> None:
    chat, _ = responses_request(
        req(
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "see"},
                        {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
                        {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
                    ],
                }
            ]
        )
    )
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
    ]


def test_calls_join_the_assistant_turn_and_reasoning_goes_with_it() -> None:
    chat, _ = responses_request(
        req(
            input=[
                {"role": "user", "content": "q"},
                {
                    "type": "reasoning",
                    "id": "rs",
                    "summary": [{"type": "summary_text", "text": "t"}],
                },
                {"role": "assistant", "content": [{"type": "output_text", "text": "Let me."}]},
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": ""},
                {"type": "function_call", "call_id": "b", "name": "g", "arguments": '{"x":1}'},
                {
                    "type": "function_call_output",
                    "call_id": "a",
                    "output": [
                        {"type": "input_text", "text": "one "},
                        {"type": "input_text", "text": "two"},
                    ],
                },
                {"type": "function_call_output", "call_id": "b", "output": "3"},
            ]
        )
    )
    assert chat["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me.",
            "reasoning_content": "t",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x":1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "one two"},
        {"role": "tool", "tool_call_id": "b", "content": "3"},
    ]


def test_a_later_system_message_stays_in_place() -> None:
    chat, _ = responses_request(
        req(
            instructions="first",
            input=[
                {"role": "system", "content": "second"},
                {"role": "user", "content": "q"},
                {"role": "developer", "content": "late"},
            ],
        )
    )
    assert chat["messages"] == [
        {"role": "system", "content": "first\n\nsecond"},
        {"role": "user", "content": "q"},
        {"role": "system", "content": "late"},
    ]


def test_tool_choices() -> None:
    tools = [{"type": "function", "name": "f"}, {"type": "function", "name": "g"}]
    chat, _ = responses_request(req(tools=tools, tool_choice="required"))
    assert chat["tool_choice"] == "required" and len(chat["tools"]) == 2
    assert chat["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}
    allowed = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "g"}],
    }
    chat, echo = responses_request(req(tools=tools, tool_choice=allowed))
    assert chat["tool_choice"] == "required"
    assert [t["function"]["name"] for t in chat["tools"]] == ["g"]
    assert echo["tool_choice"] == allowed and len(echo["tools"]) == 2


@pytest.mark.parametrize(
    ("fields", "error", "param"),
    [
        ({"conversation": "c"}, Unsupported, "conversation"),
        ({"store": "yes"}, InvalidTypeError, "store"),
        ({"background": True}, Unsupported, "background"),
        (
            {"tool_choice": {"type": "function", "name": "zz"}},
            InvalidArgumentError,
            "tool_choice.name",
        ),
        ({"tool_choice": "sometimes"}, InvalidArgumentError, "tool_choice"),
        ({"model": ""}, InvalidArgumentError, "model"),
        ({"model": None}, InvalidTypeError, "model"),
        ({"input": None}, InvalidArgumentError, "input"),
        ({"input": []}, InvalidArgumentError, "input"),
        ({"input": 3}, InvalidTypeError, "input"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file"}]}]},
            Unsupported,
            "input[0].content[0].type",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
            Unsupported,
            "input[0].content[0].file_id",
        ),
        ({"input": [{"role": "system", "content": "only"}]}, InvalidArgumentError, "input"),
        (
            {"input": [{"type": "function_call", "call_id": "", "name": "f"}]},
            InvalidArgumentError,
            "input[0].call_id",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "a", "output": 1}]},
            InvalidTypeError,
            "input[0].output",
        ),
        ({"max_output_tokens": 0}, InvalidArgumentError, "max_output_tokens"),
        ({"temperature": float("nan")}, InvalidArgumentError, "temperature"),
        ({"text": {"format": {"type": "yaml"}}}, InvalidArgumentError, "text.format.type"),
        (
            {"text": {"format": {"type": "json_schema", "name": "n"}}},
            InvalidTypeError,
            "text.format.schema",
        ),
        ({"stream": "yes"}, InvalidTypeError, "stream"),
    ],
)
def test_errors_name_the_param(fields: dict[str, Any], error: type[Exception], param: str) -> None:
    with pytest.raises(error) as raised:
        responses_request(req(**fields))
    assert str(raised.value).startswith(param + ": ")
    assert error_body(str(raised.value))["error"]["param"] == param


def test_error_body_shape() -> None:
    assert error_body("store: no", code="unsupported_parameter") == {
        "error": {
            "message": "store: no",
            "type": "invalid_request_error",
            "param": "store",
            "code": "unsupported_parameter",
        }
    }
    assert error_body("The request body is not valid JSON")["error"]["param"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "m\ud800", "input": "hi"}, "model"),
        ({"model": "m", "input": "hi", "metadata": {"k": "\ud800"}}, "metadata"),
    ],
)
def test_an_echoed_field_utf8_cannot_carry_is_refused_by_name(body: dict[str, Any], field: str):
    # Every event repeats the echo: refused here, before the upstream, not mid-stream.
    with pytest.raises(InvalidArgumentError, match=rf"^{field}: a string holds a lone surrogate"):
        responses_request(body)


# -- the liberal rule's folds ---------------------------------------------------------

NAMESPACED = [
    {
        "type": "namespace",
        "name": "crm",
        "description": "",
        "tools": [{"type": "function", "name": "send"}, {"type": "custom", "name": "note"}],
    },
    {
        "type": "namespace",
        "name": "mail",
        "description": "",
        "tools": [{"type": "function", "name": "send"}, {"type": "function", "name": "send"}],
    },
    {"type": "file_search", "vector_store_ids": ["v"]},
]


def test_namespaces_flatten_with_names_unique_and_mapped_back() -> None:
    chat, echo = responses_request(req(tools=NAMESPACED))
    names = [t["function"]["name"] for t in chat["tools"]]
    assert names == ["crm__send", "note", "mail__send", "mail__send_2"]
    calls = echo["_calls"]
    assert (calls["crm__send"].name, calls["crm__send"].namespace) == ("send", "crm")
    assert (calls["note"].kind, calls["note"].namespace) == ("custom", "crm")
    assert [t["type"] for t in echo["tools"]] == ["namespace", "namespace"]  # file_search dropped


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ({"type": "function", "name": "send", "namespace": "mail"}, "mail__send"),
        ({"type": "function", "name": "send"}, "crm__send"),
        ({"type": "custom", "name": "note"}, "note"),
    ],
)
def test_a_chosen_tool_is_named_as_the_upstream_knows_it(choice: dict[str, Any], sent: str):
    chat, _ = responses_request(req(tools=NAMESPACED, tool_choice=choice))
    assert chat["tool_choice"] == {"type": "function", "function": {"name": sent}}


def test_hosted_tool_choices_and_allowed_entries_are_dropped() -> None:
    chat, _ = responses_request(req(tools=NAMESPACED, tool_choice={"type": "file_search"}))
    assert "tool_choice" not in chat and len(chat["tools"]) == 4
    allowed = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "custom", "name": "note"}, {"type": "web_search"}],
    }
    chat, _ = responses_request(req(tools=NAMESPACED, tool_choice=allowed))
    assert [t["function"]["name"] for t in chat["tools"]] == ["note"]


def test_additional_tools_merge_and_are_no_message() -> None:
    extra = {"type": "additional_tools", "role": "developer", "tools": NAMESPACED[:1]}
    chat, echo = responses_request(
        req(
            tools=[{"type": "function", "name": "top"}],
            input=[extra, {"role": "user", "content": "q"}],
        )
    )
    assert [t["function"]["name"] for t in chat["tools"]] == ["top", "send", "note"]
    assert chat["messages"] == [{"role": "user", "content": "q"}]
    assert [t["name"] for t in echo["tools"]] == ["top"]


def test_an_unknown_effort_is_dropped_not_refused() -> None:
    chat, echo = responses_request(req(reasoning={"effort": "max", "summary": "auto"}))
    assert "reasoning_effort" not in chat
    assert echo["reasoning"] == {"effort": None, "summary": "auto"} and echo["_summary"] is True


def test_the_memo_forgets_the_oldest_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmchat.proxy.faces.responses import memo as responses_memo

    monkeypatch.setattr(responses_memo, "_MAX_ITEMS", 2)
    items = [{"id": f"msg_memo_{n}", "type": "message"} for n in range(3)]
    responses_memo.remember(items)
    assert responses_memo.recall("msg_memo_0") is None
    assert responses_memo.recall("msg_memo_2") == items[2]
