"""The proxy's Ollama face: Ollama request bodies in, OpenAI bodies out, and back.

Images, generate_request, what the real ollama client sends, and the answers;
chat_request has test_proxy_ollama_chat_request.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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

from .ollama_support import GIF, JPEG, PNG, PNG_B64, WEBP, assert_no_none, user

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
