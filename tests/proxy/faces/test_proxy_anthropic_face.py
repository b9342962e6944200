"""The proxy's Anthropic face: /v1/messages bodies in, OpenAI bodies out (answers back:
test_proxy_anthropic_answers.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmchat import wire_json
from llmchat.errors import InvalidArgumentError, InvalidTypeError
from llmchat.proxy.faces.anthropic.translate import messages_request

PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()


def req(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
    }
    body.update(fields)
    return body


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_minimal_request() -> None:
    assert messages_request(req()) == {
        "model": "claude",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 100,
        "stream": False,
    }


def test_scalar_fields() -> None:
    out = messages_request(
        req(
            stream=True,
            temperature=0.3,
            top_p=0.8,
            top_k=20,
            stop_sequences=["\n\nHuman:"],
            metadata={"user_id": "u"},
            service_tier="auto",
        )
    )
    assert out == {
        "model": "claude",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 100,
        "stream": True,
        "temperature": 0.3,
        "top_p": 0.8,
        "top_k": 20,
        "stop": ["\n\nHuman:"],
    }


def test_nulls_and_empty_lists_mean_absent() -> None:
    out = messages_request(
        req(stream=None, temperature=None, stop_sequences=[], tools=[], system=None, thinking=None)
    )
    assert set(out) == {"model", "messages", "max_tokens", "stream"}


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ("be brief", "be brief"),
        (
            [text("one"), {"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}}],
            "one\ntwo",
        ),
        ("", None),
        ([], None),
    ],
)
def test_system(system: Any, expected: str | None) -> None:
    messages = messages_request(req(system=system))["messages"]
    if expected is None:
        assert messages[0]["role"] == "user"
    else:
        assert messages[0] == {"role": "system", "content": expected}


def test_user_blocks_become_parts_and_single_text_a_string() -> None:
    out = messages_request(
        req(
            messages=[
                {"role": "user", "content": [text("only")]},
                {"role": "assistant", "content": "ok"},
                {
                    "role": "user",
                    "content": [
                        text("see"),
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/webp",
                                "data": PNG_B64,
                            },
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    ],
                },
            ]
        )
    )
    assert out["messages"] == [
        {"role": "user", "content": "only"},
        {"role": "assistant", "content": "ok"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                # The client's stated media type wins over sniffing.
                {"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{PNG_B64}"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
    ]


def test_tool_round_trip() -> None:
    out = messages_request(
        req(
            messages=[
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        text("Let me check. "),
                        text("One moment."),
                        {
                            "type": "tool_use",
                            "id": "tu1",
                            "name": "weather",
                            "input": {"z": 1, "a": "b"},
                        },
                        {"type": "tool_use", "id": "tu2", "name": "time", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        text("also this"),
                        {"type": "tool_result", "tool_use_id": "tu1", "content": "sunny"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "tu2",
                            "content": [text("boom"), text("trace")],
                            "is_error": True,
                        },
                    ],
                },
            ]
        )
    )
    assert out["messages"] == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Let me check. One moment.",
            "reasoning_content": "hmm",
            "tool_calls": [
                {
                    "id": "tu1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"a":"b","z":1}'},
                },
                {"id": "tu2", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "tu1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "tu2", "content": "Error: boom\ntrace"},
        {"role": "user", "content": "also this"},
    ]


@pytest.mark.parametrize(
    ("block", "content"),
    [
        ({"type": "tool_result", "tool_use_id": "t"}, ""),
        ({"type": "tool_result", "tool_use_id": "t", "is_error": True}, "Error"),
        ({"type": "tool_result", "tool_use_id": "t", "content": [], "is_error": False}, ""),
    ],
)
def test_tool_result_edge_contents(block: dict[str, Any], content: str) -> None:
    messages = messages_request(req(messages=[{"role": "user", "content": [block]}]))["messages"]
    assert messages == [{"role": "tool", "tool_call_id": "t", "content": content}]


def test_assistant_turn_of_only_thinking_is_dropped() -> None:
    messages = messages_request(
        req(
            messages=[
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]},
            ]
        )
    )["messages"]
    assert messages == [{"role": "user", "content": "q"}]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, {"tool_choice": "auto"}),
        ({"type": "any"}, {"tool_choice": "required"}),
        ({"type": "none"}, {"tool_choice": "none"}),
        (
            {"type": "tool", "name": "f"},
            {"tool_choice": {"type": "function", "function": {"name": "f"}}},
        ),
        (
            {"type": "auto", "disable_parallel_tool_use": True},
            {"tool_choice": "auto", "parallel_tool_calls": False},
        ),
        ({"type": "any", "disable_parallel_tool_use": False}, {"tool_choice": "required"}),
    ],
)
def test_tool_choice(choice: dict[str, Any], expected: dict[str, Any]) -> None:
    out = messages_request(req(tool_choice=choice))
    got = {k: out[k] for k in ("tool_choice", "parallel_tool_calls") if k in out}
    assert got == expected


def test_tools() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    out = messages_request(
        req(
            tools=[
                {
                    "name": "search",
                    "description": "Search it",
                    "input_schema": schema,
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "custom", "name": "bare", "input_schema": {"type": "object"}},
            ]
        )
    )
    assert out["tools"] == [
        {
            "type": "function",
            "function": {"name": "search", "description": "Search it", "parameters": schema},
        },
        {"type": "function", "function": {"name": "bare", "parameters": {"type": "object"}}},
    ]


@pytest.mark.parametrize(
    ("thinking", "effort"),
    [
        ({"type": "enabled", "budget_tokens": 1024}, "low"),
        ({"type": "enabled", "budget_tokens": 4095}, "low"),
        ({"type": "enabled", "budget_tokens": 4096}, "medium"),
        ({"type": "enabled", "budget_tokens": 16383}, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, "high"),
        ({"type": "disabled"}, None),
        ({"type": "adaptive"}, None),
    ],
)
def test_thinking(thinking: dict[str, Any], effort: str | None) -> None:
    assert messages_request(req(thinking=thinking)).get("reasoning_effort") == effort


def test_output_config() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    out = messages_request(
        req(
            thinking={"type": "enabled", "budget_tokens": 2000},
            output_config={"effort": "max", "format": {"type": "json_schema", "schema": schema}},
        )
    )
    assert out["reasoning_effort"] == "high"
    assert out["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema},
    }


def block_msg(*blocks: Any, role: str = "user") -> dict[str, Any]:
    return req(messages=[{"role": role, "content": list(blocks)}])


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ("x", InvalidTypeError, "body"),
        ({"max_tokens": 1, "messages": []}, InvalidArgumentError, "model"),
        (req(model=""), InvalidArgumentError, "model"),
        (req(model=7), InvalidTypeError, "model"),
        (req(max_tokens=None), InvalidArgumentError, "max_tokens"),
        (req(max_tokens=0), InvalidArgumentError, "max_tokens"),
        (req(max_tokens="5"), InvalidTypeError, "max_tokens"),
        (req(max_tokens=True), InvalidTypeError, "max_tokens"),
        (req(stream="yes"), InvalidTypeError, "stream"),
        (req(messages=None), InvalidArgumentError, "messages"),
        (req(messages={}), InvalidTypeError, "messages"),
        (req(messages=[]), InvalidArgumentError, "messages"),
        (req(messages=["hi"]), InvalidTypeError, "messages[0]"),
        (req(messages=[{"content": "x"}]), InvalidArgumentError, "messages[0].role"),
        (
            # Anthropic's own words, which Claude Code matches to retry without the turn.
            req(messages=[{"role": "tool", "content": "x"}]),
            InvalidArgumentError,
            "messages[0].role",
        ),
        (req(messages=[{"role": "user"}]), InvalidArgumentError, "messages[0].content"),
        (req(messages=[{"role": "user", "content": 3}]), InvalidTypeError, "messages[0].content"),
        (
            req(messages=[{"role": "user", "content": []}]),
            InvalidArgumentError,
            "messages[0].content",
        ),
        (block_msg("text"), InvalidTypeError, "messages[0].content[0]"),
        (block_msg({}), InvalidArgumentError, "messages[0].content[0].type"),
        (block_msg({"type": 1}), InvalidTypeError, "messages[0].content[0].type"),
        (
            # Claude Code's own path spelling: it drops the document and retries.
            block_msg(text("a"), {"type": "document"}),
            InvalidArgumentError,
            "messages.0.content.1.document.source",
        ),
        (
            block_msg({"type": "tool_use", "id": "i", "name": "n"}),
            InvalidArgumentError,
            "messages[0].content[0].type",
        ),
        (
            block_msg({"type": "tool_result", "tool_use_id": "t"}, role="assistant"),
            InvalidArgumentError,
            "messages[0].content[0].type",
        ),
        (block_msg({"type": "text"}), InvalidArgumentError, "messages[0].content[0].text"),
        (block_msg({"type": "text", "text": 1}), InvalidTypeError, "messages[0].content[0].text"),
        (block_msg({"type": "image"}), InvalidArgumentError, "messages[0].content[0].source"),
        (
            block_msg({"type": "image", "source": "u"}),
            InvalidTypeError,
            "messages[0].content[0].source",
        ),
        (
            block_msg({"type": "image", "source": {"type": "file", "file_id": "f"}}),
            InvalidArgumentError,
            "messages.0.content.0.image.source.type",
        ),
        (
            block_msg({"type": "image", "source": {"type": "base64", "data": PNG_B64}}),
            InvalidArgumentError,
            "messages[0].content[0].source.media_type",
        ),
        (
            block_msg(
                {"type": "image", "source": {"type": "base64", "media_type": "", "data": PNG_B64}}
            ),
            InvalidArgumentError,
            "messages[0].content[0].source.media_type",
        ),
        (
            block_msg(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "%"},
                }
            ),
            InvalidArgumentError,
            "messages[0].content[0].source.data",
        ),
        (
            block_msg({"type": "image", "source": {"type": "url", "url": ""}}),
            InvalidArgumentError,
            "messages[0].content[0].source.url",
        ),
        (
            block_msg({"type": "tool_use", "name": "n"}, role="assistant"),
            InvalidArgumentError,
            "messages[0].content[0].id",
        ),
        (
            block_msg({"type": "tool_use", "id": "i", "name": ""}, role="assistant"),
            InvalidArgumentError,
            "messages[0].content[0].name",
        ),
        (
            block_msg({"type": "tool_use", "id": "i", "name": "n", "input": [1]}, role="assistant"),
            InvalidTypeError,
            "messages[0].content[0].input",
        ),
        (
            block_msg(
                {"type": "tool_use", "id": "i", "name": "n", "input": {"x": float("inf")}},
                role="assistant",
            ),
            InvalidArgumentError,
            "messages[0].content[0].input",
        ),
        (
            block_msg({"type": "tool_result"}),
            InvalidArgumentError,
            "messages[0].content[0].tool_use_id",
        ),
        (
            block_msg({"type": "tool_result", "tool_use_id": "t", "content": 5}),
            InvalidTypeError,
            "messages[0].content[0].content",
        ),
        (
            block_msg({"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}),
            InvalidTypeError,
            "messages[0].content[0].is_error",
        ),
        (req(system=5), InvalidTypeError, "system"),
        (req(system=[text("a"), "b"]), InvalidTypeError, "system[1]"),
        (req(temperature="hot"), InvalidTypeError, "temperature"),
        (req(top_p=float("nan")), InvalidArgumentError, "top_p"),
        (req(top_k=1.5), InvalidTypeError, "top_k"),
        (req(stop_sequences="END"), InvalidTypeError, "stop_sequences"),
        (req(stop_sequences=["a", None]), InvalidTypeError, "stop_sequences[1]"),
        (req(tools={}), InvalidTypeError, "tools"),
        (req(tools=[1]), InvalidTypeError, "tools[0]"),
        (req(tools=[{"input_schema": {}}]), InvalidArgumentError, "tools[0].name"),
        (req(tools=[{"name": "", "input_schema": {}}]), InvalidArgumentError, "tools[0].name"),
        (req(tools=[{"name": "f"}]), InvalidArgumentError, "tools[0].input_schema"),
        (
            req(tools=[{"name": "f", "input_schema": "s"}]),
            InvalidTypeError,
            "tools[0].input_schema",
        ),
        (
            req(tools=[{"name": "f", "input_schema": {}, "description": 1}]),
            InvalidTypeError,
            "tools[0].description",
        ),
        (req(tool_choice="auto"), InvalidTypeError, "tool_choice"),
        (req(tool_choice={}), InvalidArgumentError, "tool_choice.type"),
        (req(tool_choice={"type": "tool"}), InvalidArgumentError, "tool_choice.name"),
        (req(tool_choice={"type": "tool", "name": ""}), InvalidArgumentError, "tool_choice.name"),
        (
            req(tool_choice={"type": "auto", "disable_parallel_tool_use": 1}),
            InvalidTypeError,
            "tool_choice.disable_parallel_tool_use",
        ),
        (req(thinking=True), InvalidTypeError, "thinking"),
        (req(thinking={"type": "enabled"}), InvalidArgumentError, "thinking.budget_tokens"),
        (
            req(thinking={"type": "enabled", "budget_tokens": 0}),
            InvalidArgumentError,
            "thinking.budget_tokens",
        ),
        (
            req(thinking={"type": "enabled", "budget_tokens": "1"}),
            InvalidTypeError,
            "thinking.budget_tokens",
        ),
        (req(output_config=1), InvalidTypeError, "output_config"),
        (req(output_config={"format": "json"}), InvalidTypeError, "output_config.format"),
        (
            req(output_config={"format": {"type": "json_schema"}}),
            InvalidArgumentError,
            "output_config.format.schema",
        ),
    ],
)
def test_errors_name_the_field(body: Any, error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        messages_request(body)
    assert str(info.value).startswith(f"{field}: ")


@given(
    st.dictionaries(
        st.text(max_size=5), st.integers() | st.text(max_size=5) | st.none(), max_size=5
    ),
    st.text(max_size=20),
    st.integers(min_value=1, max_value=100_000),
)
def test_deterministic_and_none_free(arguments: dict[str, Any], words: str, budget: int) -> None:
    body = req(
        system=[text(words)],
        messages=[
            {"role": "user", "content": [text(words)]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "f", "input": arguments}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "a", "content": words}],
            },
        ],
        thinking={"type": "enabled", "budget_tokens": budget},
    )
    first = messages_request(body)
    second = messages_request(json.loads(json.dumps(body)))
    assert wire_json.encode(first) == wire_json.encode(second)
    call = first["messages"][-2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == arguments
    assert all(value is not None for value in first.values())


def test_accepts_sdk_shaped_request() -> None:
    params = pytest.importorskip("anthropic.types")
    # Typed dicts are plain dicts at runtime; building through them checks the key names.
    body = {
        "model": "claude-x",
        "max_tokens": 64,
        "system": [params.TextBlockParam(type="text", text="sys")],
        "messages": [
            {"role": "user", "content": [params.TextBlockParam(type="text", text="hi")]},
        ],
        "tools": [params.ToolParam(name="f", input_schema={"type": "object"})],
        "tool_choice": params.ToolChoiceAnyParam(type="any"),
    }
    out = messages_request(body)
    assert out["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert out["tool_choice"] == "required"
