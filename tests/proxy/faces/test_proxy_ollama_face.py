"""The proxy's Ollama face: Ollama request bodies in, OpenAI bodies out, and back."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat import wire_json
from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.proxy import image_urls as images
from llmchat.proxy.faces.ollama import translate as ollama_face
from llmchat.proxy.faces.ollama.translate import (
    chat_body,
    chat_request,
    error_body,
    generate_body,
    generate_request,
    ps_body,
    tags_body,
    version_body,
)
from llmchat.tools import ToolCall

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 8
GIF = b"GIF89a" + b"\x00" * 8
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 "
PNG_B64 = base64.b64encode(PNG).decode()
JPEG_B64 = base64.b64encode(JPEG).decode()


def user(content: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": content, **extra}


def chat(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [user()]}
    body.update(fields)
    return body


def assert_no_none(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            assert item is not None
            assert_no_none(item)
    elif isinstance(value, list):
        for item in value:
            assert_no_none(item)


# -- images ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (b"GIF87a" + b"\x00" * 4, "image/gif"),
        (WEBP, "image/webp"),
        (b"RIFF\x10\x00\x00\x00WAVEfmt ", None),
        (b"BM" + b"\x00" * 10, None),
        (b"", None),
    ],
)
def test_sniff_media_type(data: bytes, media_type: str | None) -> None:
    assert images.sniff_media_type(data) == media_type


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (b"plain text, not an image", images.UNKNOWN_MEDIA_TYPE),
    ],
)
def test_data_url_sniffs(data: bytes, media_type: str) -> None:
    encoded = base64.b64encode(data).decode()
    assert images.data_url(encoded, field="f") == f"data:{media_type};base64,{encoded}"


@given(st.binary(min_size=1, max_size=64))
def test_data_url_round_trips_any_bytes(data: bytes) -> None:
    encoded = base64.b64encode(data).decode()
    url = images.data_url(encoded, field="f")
    head, payload = url.split(",", 1)
    assert base64.b64decode(payload) == data
    assert head == f"data:{images.sniff_media_type(data) or images.UNKNOWN_MEDIA_TYPE};base64"


@given(st.sampled_from([PNG, JPEG, GIF, WEBP]), st.binary(max_size=32))
def test_sniffing_reads_only_the_signature(head: bytes, tail: bytes) -> None:
    assert images.sniff_media_type(head + tail) == images.sniff_media_type(head)


def test_data_url_strips_line_wrapping_and_keeps_given_media_type() -> None:
    wrapped = PNG_B64[:8] + "\n" + PNG_B64[8:]
    assert images.data_url(wrapped, field="f") == f"data:image/png;base64,{PNG_B64}"
    given_type = images.data_url(PNG_B64, field="f", media_type="image/jpeg")
    assert given_type == f"data:image/jpeg;base64,{PNG_B64}"


def test_data_url_passes_an_existing_data_url() -> None:
    url = f"data:image/png;base64,{PNG_B64}"
    assert images.data_url(url, field="f") == url


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        ("", InvalidArgumentError, "empty"),
        ("not base64!", InvalidArgumentError, "not valid base64"),
        ("abc", InvalidArgumentError, "not valid base64"),
        ("data:image/png;base64,%%%", InvalidArgumentError, "not valid base64"),
        (b"bytes", InvalidTypeError, "base64 string"),
        (None, InvalidTypeError, "base64 string"),
    ],
)
def test_data_url_errors_name_the_field(value: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=r"^messages\[3\]\.images\[1\]: ") as info:
        images.data_url(value, field="messages[3].images[1]")
    assert text in str(info.value)


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


# -- generate_request -----------------------------------------------------


def test_generate_request() -> None:
    out = generate_request(
        {
            "model": "m",
            "prompt": "describe",
            "system": "you see",
            "images": [PNG_B64],
            "options": {"num_predict": 5},
            "format": "json",
            "think": "low",
            "context": [1, 2, 3],
            "template": "{{ .Prompt }}",
            "raw": False,
            "suffix": "",
            "keep_alive": 0,
        }
    )
    assert out == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "you see"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "describe"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                ],
            },
        ],
        "stream": True,
        "response_format": {"type": "json_object"},
        "max_tokens": 5,
        "reasoning_effort": "low",
    }


def test_generate_request_without_prompt_or_system() -> None:
    assert generate_request({"model": "m", "stream": False, "system": ""}) == {
        "model": "m",
        "messages": [{"role": "user", "content": ""}],
        "stream": False,
    }


@pytest.mark.parametrize(
    ("fields", "error", "field"),
    [
        ({"suffix": "}"}, InvalidArgumentError, "suffix"),
        ({"suffix": 1}, InvalidTypeError, "suffix"),
        ({"raw": True}, InvalidArgumentError, "raw"),
        ({"raw": "no"}, InvalidTypeError, "raw"),
        ({"width": 512}, InvalidArgumentError, "width"),
        ({"height": 512}, InvalidArgumentError, "height"),
        ({"steps": 4}, InvalidArgumentError, "steps"),
        ({"prompt": ["a"]}, InvalidTypeError, "prompt"),
        ({"system": 1}, InvalidTypeError, "system"),
        ({"images": "x"}, InvalidTypeError, "images"),
        ({"images": ["%%"]}, InvalidArgumentError, "images[0]"),
        ({"options": {"min_p": "x"}}, InvalidTypeError, "options.min_p"),
        ({"model": None}, InvalidArgumentError, "model"),
    ],
)
def test_generate_request_errors_name_the_field(
    fields: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as info:
        generate_request({"model": "m", "prompt": "p", **fields})
    assert str(info.value).startswith(f"{field}: ")


# -- what the real ollama client sends ------------------------------------


def get_weather(city: str, days: int) -> str:
    """Get the weather forecast.

    Args:
      city: The city name
      days: How many days ahead

    Returns:
      str: the forecast
    """
    return city * days


def test_accepts_what_the_ollama_client_posts_for_chat() -> None:
    types = pytest.importorskip("ollama._types")
    client = pytest.importorskip("ollama._client")
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "look", "images": [PNG]},
        {
            "role": "assistant",
            "content": "",
            "thinking": "let me call",
            "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}}
            ],
        },
        {"role": "tool", "content": "rain", "tool_name": "get_weather"},
    ]
    # The same construction ollama.Client.chat performs before posting.
    posted = types.ChatRequest(
        model="qwen3",
        messages=list(client._copy_messages(messages)),
        tools=list(client._copy_tools([get_weather])),
        stream=False,
        think="medium",
        format="json",
        options=types.Options(temperature=0.1, num_predict=-1, num_ctx=4096, stop=["x"]),
    ).model_dump(exclude_none=True)
    posted = json.loads(json.dumps(posted))  # exactly what travels on the wire
    # Nothing null is sent, empty content is dropped, stream is explicit.
    assert_no_none(posted)
    assert "content" not in posted["messages"][2]
    assert posted["stream"] is False

    out = chat_request(posted)
    assert out["stream"] is False
    assert out["messages"] == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_2_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo","days":2}'},
                }
            ],
            "reasoning_content": "let me call",
        },
        {"role": "tool", "content": "rain", "tool_call_id": "call_2_0"},
    ]
    assert out["tools"][0]["type"] == "function"
    assert out["tools"][0]["function"]["name"] == "get_weather"
    assert out["tools"][0]["function"]["parameters"]["required"] == ["city", "days"]
    assert out["temperature"] == 0.1
    assert out["stop"] == ["x"]
    assert "max_tokens" not in out
    assert out["reasoning_effort"] == "medium"
    assert out["response_format"] == {"type": "json_object"}


def test_ollama_client_sends_empty_tools_list_which_means_none() -> None:
    types = pytest.importorskip("ollama._types")
    client = pytest.importorskip("ollama._client")
    posted = types.ChatRequest(
        model="m",
        messages=list(client._copy_messages([user()])),
        tools=list(client._copy_tools(None)),
    ).model_dump(exclude_none=True)
    assert posted["tools"] == []
    assert "tools" not in chat_request(posted)


def test_accepts_what_the_ollama_client_posts_for_generate() -> None:
    types = pytest.importorskip("ollama._types")
    client = pytest.importorskip("ollama._client")
    posted = types.GenerateRequest(
        model="m",
        prompt="p",
        system="s",
        stream=True,
        images=list(client._copy_images([JPEG])),
        format={"type": "object"},
        options={"seed": 3},
    ).model_dump(exclude_none=True)
    out = generate_request(json.loads(json.dumps(posted)))
    assert out["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;")
    assert out["seed"] == 3
    assert out["response_format"]["json_schema"]["schema"] == {"type": "object"}


# -- responses ------------------------------------------------------------


CALLS = [ToolCall(name="get_weather", arguments={"city": "Oslo"}, id="c1"), ToolCall(name="t")]


@pytest.mark.parametrize("thinking", [None, "", "deep thought"])
@pytest.mark.parametrize("calls", [[], CALLS])
def test_chat_body(thinking: str | None, calls: list[ToolCall]) -> None:
    out = chat_body(
        model="m",
        text="hello",
        thinking=thinking,
        tool_calls=calls,
        done_reason="stop",
        input_tokens=None,
        output_tokens=4,
        created_at="2024-01-01T00:00:00Z",
    )
    message: dict[str, Any] = {"role": "assistant", "content": "hello"}
    if thinking:
        message["thinking"] = thinking
    if calls:
        # Current Ollama's shape: the upstream's id when it gave one, and the index.
        message["tool_calls"] = [
            {
                "id": "c1",
                "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Oslo"}},
            },
            {"function": {"index": 1, "name": "t", "arguments": {}}},
        ]
    assert out == {
        "model": "m",
        "created_at": "2024-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 0,
        "eval_count": 4,
    }
    types = pytest.importorskip("ollama._types")
    parsed = types.ChatResponse.model_validate(json.loads(json.dumps(out)))
    assert parsed.message.content == "hello"
    assert parsed.done is True
    assert parsed.eval_count == 4
    assert len(parsed.message.tool_calls or []) == len(calls)


def test_generate_body_and_duration() -> None:
    out = generate_body(
        model="m",
        text="t",
        thinking="th",
        done_reason="length",
        input_tokens=3,
        output_tokens=None,
        total_duration_ns=123,
        created_at="2024-01-01T00:00:00.000001Z",
    )
    assert out == {
        "model": "m",
        "created_at": "2024-01-01T00:00:00.000001Z",
        "response": "t",
        "thinking": "th",
        "done": True,
        "done_reason": "length",
        "total_duration": 123,
        "prompt_eval_count": 3,
        "eval_count": 0,
    }
    types = pytest.importorskip("ollama._types")
    parsed = types.GenerateResponse.model_validate(json.loads(json.dumps(out)))
    assert (parsed.response, parsed.thinking, parsed.total_duration) == ("t", "th", 123)


def test_error_and_version_bodies() -> None:
    assert error_body("model not found") == {"error": "model not found"}
    assert version_body() == {"version": ollama_face.OLLAMA_VERSION}
    major, minor, patch = (int(part) for part in ollama_face.OLLAMA_VERSION.split("."))
    assert (major, minor) >= (0, 9)  # new enough for think, tools and structured outputs
    assert patch >= 0


@pytest.mark.parametrize("models", [[], ["a"], ["llama3:8b", "qwen3:latest"]])
def test_tags_and_ps_bodies_validate(models: list[str]) -> None:
    tags = tags_body(models)
    ps = ps_body(models)
    assert [m["name"] for m in tags["models"]] == models
    assert [m["model"] for m in ps["models"]] == models
    assert tags_body(models) == tags  # deterministic: no clock involved
    types = pytest.importorskip("ollama._types")
    listed = types.ListResponse.model_validate(json.loads(json.dumps(tags)))
    assert [m.model for m in listed.models] == models
    running = types.ProcessResponse.model_validate(json.loads(json.dumps(ps)))
    assert [m.name for m in running.models] == models
    for model in running.models:
        assert model.expires_at is not None and model.expires_at.year == 9999
