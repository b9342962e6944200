"""The Ollama face's chat_request: /api/chat bodies in, OpenAI chat bodies out, every field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat import wire_json
from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.proxy.faces.ollama.translate import (
    chat_request,
)

from .ollama_support import JPEG_B64, PNG_B64, assert_no_none, chat, user

# -- chat_request ---------------------------------------------------------


def test_minimal_chat_request_defaults_to_streaming() -> None:
    assert chat_request({"model": "llama3", "messages": [user("hello")]}) == {
        "model": "llama3",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
    }


@pytest.mark.parametrize(("stream", "expected"), [(None, True), (True, True), (False, False)])
def test_stream_flag(stream: bool | None, expected: bool) -> None:
    assert chat_request(chat(stream=stream))["stream"] is expected


def test_nulls_mean_absent() -> None:
    body = chat(
        tools=None,
        format=None,
        options=None,
        think=None,
        keep_alive=None,
        stream=None,
        messages=[
            {"role": "system", "content": None, "images": None},
            {"role": "user", "content": "q", "images": None, "tool_calls": None},
        ],
    )
    out = chat_request(body)
    assert out == {
        "model": "m",
        "messages": [{"role": "system", "content": ""}, {"role": "user", "content": "q"}],
        "stream": True,
    }


def test_every_role_and_missing_content() -> None:
    out = chat_request(
        chat(
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "q"},
                {"role": "assistant"},
                {"role": "user", "content": "again"},
            ]
        )
    )
    assert [m["role"] for m in out["messages"]] == ["system", "user", "assistant", "user"]
    assert out["messages"][2] == {"role": "assistant", "content": ""}


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("json", {"type": "json_object"}),
        (
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "response",
                    "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
                },
            },
        ),
    ],
)
def test_format(fmt: Any, expected: dict[str, Any]) -> None:
    assert chat_request(chat(format=fmt))["response_format"] == expected


@pytest.mark.parametrize("fmt", ["", None])
def test_empty_format_sends_nothing(fmt: Any) -> None:
    assert "response_format" not in chat_request(chat(format=fmt))


def test_options_are_mapped_and_runner_options_ignored() -> None:
    options = {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "seed": 7,
        "stop": ["\n\n", "END"],
        "num_predict": 128,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "typical_p": 0.95,
        "num_ctx": 8192,
        "num_gpu": 99,
        "mirostat": 2,
        "mirostat_tau": 5.0,
        "penalize_newline": True,
        "some_future_option": "x",
    }
    out = chat_request(chat(options=options))
    sampling = {k: v for k, v in out.items() if k not in ("model", "messages", "stream")}
    assert sampling == {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "seed": 7,
        "stop": ["\n\n", "END"],
        "max_tokens": 128,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.25,
        "typical_p": 0.95,
    }


@pytest.mark.parametrize("num_predict", [-1, -2, 0])
def test_unlimited_num_predict_sends_no_max_tokens(num_predict: int) -> None:
    assert "max_tokens" not in chat_request(chat(options={"num_predict": num_predict}))


@pytest.mark.parametrize(
    ("stop", "expected"), [("END", "END"), ([], None), ("", None), (["a"], ["a"])]
)
def test_stop_forms(stop: Any, expected: Any) -> None:
    assert chat_request(chat(options={"stop": stop})).get("stop") == expected


def test_integral_floats_are_accepted_for_integer_options() -> None:
    out = chat_request(chat(options={"top_k": 40.0, "num_predict": 10.0}))
    assert out["top_k"] == 40
    assert out["max_tokens"] == 10
    assert isinstance(out["max_tokens"], int)


@pytest.mark.parametrize(
    ("think", "expected"),
    [(True, None), (False, None), ("low", "low"), ("medium", "medium"), ("high", "high")],
)
def test_think(think: Any, expected: str | None) -> None:
    assert chat_request(chat(think=think)).get("reasoning_effort") == expected


def test_keep_alive_and_logprobs_are_ignored() -> None:
    out = chat_request(chat(keep_alive="5m", logprobs=True, top_logprobs=3))
    assert set(out) == {"model", "messages", "stream"}


def test_tools_pass_through_and_empty_tools_send_nothing() -> None:
    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
    }
    assert chat_request(chat(tools=[tool]))["tools"] == [tool]
    assert "tools" not in chat_request(chat(tools=[]))


def test_images_become_parts() -> None:
    out = chat_request(chat(messages=[user("what is this?", images=[PNG_B64, JPEG_B64])]))
    assert out["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG_B64}"}},
            ],
        }
    ]


def test_image_without_text_has_no_text_part() -> None:
    out = chat_request(chat(messages=[{"role": "user", "images": [PNG_B64]}]))
    assert out["messages"][0]["content"] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    ]


def test_empty_image_list_keeps_plain_content() -> None:
    assert chat_request(chat(messages=[user("x", images=[])]))["messages"][0]["content"] == "x"


def test_assistant_thinking_goes_back_as_reasoning_content() -> None:
    out = chat_request(
        chat(messages=[user(), {"role": "assistant", "content": "a", "thinking": "hmm"}])
    )
    assert out["messages"][1] == {"role": "assistant", "content": "a", "reasoning_content": "hmm"}


def test_tool_calls_get_ids_and_string_arguments() -> None:
    messages = [
        user("weather?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "weather", "arguments": {"city": "Paris", "units": "c"}}},
                {"id": "given", "function": {"name": "time", "arguments": {}}},
                {"function": {"name": "noargs"}},
            ],
        },
    ]
    out = chat_request(chat(messages=messages))
    assert out["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1_0",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Paris","units":"c"}'},
            },
            {"id": "given", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            {
                "id": "call_1_2",
                "type": "function",
                "function": {"name": "noargs", "arguments": "{}"},
            },
        ],
    }


def test_string_arguments_holding_an_object_are_accepted() -> None:
    messages = [
        user(),
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "f", "arguments": '{"b":1, "a":2}'}}],
        },
    ]
    call = chat_request(chat(messages=messages))["messages"][1]["tool_calls"][0]
    assert call["function"]["arguments"] == '{"a":2,"b":1}'


def test_tool_messages_answer_by_name_then_oldest() -> None:
    messages = [
        user(),
        {
            "role": "assistant",
            "tool_calls": [
                {"function": {"name": "a", "arguments": {}}},
                {"function": {"name": "b", "arguments": {}}},
                {"function": {"name": "a", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": "B", "tool_name": "b"},
        {"role": "tool", "content": "A1", "tool_name": "a"},
        {"role": "tool", "content": "?", "tool_name": "unknown"},
        {"role": "tool", "content": "orphan"},
    ]
    out = chat_request(chat(messages=messages))["messages"]
    assert out[2] == {"role": "tool", "content": "B", "tool_call_id": "call_1_1"}
    assert out[3] == {"role": "tool", "content": "A1", "tool_call_id": "call_1_0"}
    assert out[4]["tool_call_id"] == "call_1_2"
    assert out[5] == {"role": "tool", "content": "orphan", "tool_call_id": "call_5"}


def test_tool_message_matches_across_turns_and_explicit_id_wins() -> None:
    messages = [
        user(),
        {"role": "assistant", "tool_calls": [{"id": "x1", "function": {"name": "f"}}]},
        {"role": "assistant", "tool_calls": [{"id": "x2", "function": {"name": "f"}}]},
        {"role": "tool", "content": "2", "tool_call_id": "x2"},
        {"role": "tool", "content": "1", "tool_name": "f"},
    ]
    out = chat_request(chat(messages=messages))["messages"]
    assert out[3]["tool_call_id"] == "x2"
    assert out[4]["tool_call_id"] == "x1"


def test_output_never_holds_none() -> None:
    out = chat_request(
        chat(
            messages=[
                {"role": "system"},
                user("x", images=[PNG_B64]),
                {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
                {"role": "tool"},
            ],
            options={"temperature": None, "stop": None, "num_predict": None},
            format="json",
            think="high",
        )
    )
    assert_no_none(out)


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ([], InvalidTypeError, "body"),
        ({"messages": []}, InvalidArgumentError, "model"),
        (chat(model=""), InvalidArgumentError, "model"),
        (chat(model=3), InvalidTypeError, "model"),
        (chat(stream="yes"), InvalidTypeError, "stream"),
        (chat(messages={"role": "user"}), InvalidTypeError, "messages"),
        (chat(messages=["hi"]), InvalidTypeError, "messages[0]"),
        (chat(messages=[user(), {"content": "x"}]), InvalidArgumentError, "messages[1].role"),
        (chat(messages=[user(), user(["a"])]), InvalidTypeError, "messages[1].content"),
        (chat(messages=[user(images="abc")]), InvalidTypeError, "messages[0].images"),
        (
            chat(messages=[user(images=[PNG_B64, "@@"])]),
            InvalidArgumentError,
            "messages[0].images[1]",
        ),
        (
            chat(messages=[{"role": "assistant", "tool_calls": {}}]),
            InvalidTypeError,
            "messages[0].tool_calls",
        ),
        (
            chat(messages=[{"role": "assistant", "tool_calls": [{}]}]),
            InvalidArgumentError,
            "messages[0].tool_calls[0].function",
        ),
        (
            chat(messages=[{"role": "assistant", "tool_calls": [{"function": {}}]}]),
            InvalidArgumentError,
            "messages[0].tool_calls[0].function.name",
        ),
        (
            chat(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}]),
            InvalidArgumentError,
            "messages[0].tool_calls[0].function.name",
        ),
        (
            chat(
                messages=[
                    {"role": "assistant", "tool_calls": [{"id": 5, "function": {"name": "f"}}]}
                ]
            ),
            InvalidTypeError,
            "messages[0].tool_calls[0].id",
        ),
        (
            chat(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "f", "arguments": [1]}}],
                    }
                ]
            ),
            InvalidTypeError,
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            chat(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}],
                    }
                ]
            ),
            InvalidArgumentError,
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            chat(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "f", "arguments": "[]"}}],
                    }
                ]
            ),
            InvalidArgumentError,
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            chat(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"function": {"name": "f", "arguments": {"x": float("nan")}}}
                        ],
                    }
                ]
            ),
            InvalidArgumentError,
            "messages[0].tool_calls[0].function.arguments",
        ),
        (
            chat(messages=[{"role": "tool", "tool_name": 1}]),
            InvalidTypeError,
            "messages[0].tool_name",
        ),
        (
            chat(messages=[{"role": "tool", "tool_call_id": 1}]),
            InvalidTypeError,
            "messages[0].tool_call_id",
        ),
        (chat(tools={}), InvalidTypeError, "tools"),
        (chat(tools=["f"]), InvalidTypeError, "tools[0]"),
        (chat(options=[]), InvalidTypeError, "options"),
        (chat(options={"temperature": "hot"}), InvalidTypeError, "options.temperature"),
        (chat(options={"temperature": True}), InvalidTypeError, "options.temperature"),
        (chat(options={"top_p": float("inf")}), InvalidArgumentError, "options.top_p"),
        (chat(options={"repeat_penalty": "1"}), InvalidTypeError, "options.repeat_penalty"),
        (chat(options={"num_predict": "10"}), InvalidTypeError, "options.num_predict"),
        (chat(options={"num_predict": 1.5}), InvalidTypeError, "options.num_predict"),
        (chat(options={"seed": True}), InvalidTypeError, "options.seed"),
        (chat(options={"top_k": 0.5}), InvalidTypeError, "options.top_k"),
        (chat(options={"stop": 5}), InvalidTypeError, "options.stop"),
        (chat(options={"stop": ["a", 5]}), InvalidTypeError, "options.stop[1]"),
    ],
)
def test_chat_request_errors_name_the_field(body: Any, error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        chat_request(body)
    assert str(info.value).startswith(f"{field}: ")


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    st.text(max_size=20),
    st.sampled_from([None, True, False, "low", "high"]),
)
def test_chat_request_is_deterministic(arguments: Any, text: str, think: Any) -> None:
    body = chat(
        messages=[
            user(text, images=[PNG_B64]),
            {
                "role": "assistant",
                "tool_calls": [{"function": {"name": "f", "arguments": {"v": arguments}}}],
            },
            {"role": "tool", "content": text, "tool_name": "f"},
        ],
        options={"temperature": 0.5, "stop": [text]},
        think=think,
        format={"type": "object"},
    )
    first = chat_request(body)
    second = chat_request(json.loads(json.dumps(body)))
    assert wire_json.encode(first) == wire_json.encode(second)
    decoded = json.loads(first["messages"][1]["tool_calls"][0]["function"]["arguments"])
    assert decoded == {"v": arguments}
    assert_no_none({k: v for k, v in first.items() if k != "messages"})
