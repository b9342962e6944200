"""AnthropicStream's tool calls: OpenAI tool-call fragments rewritten as tool_use blocks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.protocols.anthropic import (
    AnthropicStream,
)

from .anthropic_support import (
    events,
    finish_chunk,
    run,
    text_chunk,
    tool_chunk,
    two_tool_calls,
    types_of,
)

# -- tool calls ------------------------------------------------------------------


def test_two_tool_calls_streamed_in_fragments() -> None:
    stream = AnthropicStream("m")
    parsed = events(run(stream, two_tool_calls()))
    starts = [e for e in parsed if e["type"] == "content_block_start"]
    assert starts == [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "call_a", "name": "get", "input": {}},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "call_b", "name": "put", "input": {}},
        },
    ]
    for index, expected in ((0, '{"city": "Zürich", "n": [1, 2]}'), (1, "{}")):
        parts = [
            e["delta"]["partial_json"]
            for e in parsed
            if e["type"] == "content_block_delta" and e["index"] == index
        ]
        assert all(
            e["delta"]["type"] == "input_json_delta"
            for e in parsed
            if e["type"] == "content_block_delta"
        )
        assert "".join(parts) == expected
        assert all(parts)  # empty fragments are not sent
    # Sequential blocks: block 0 stops before block 1 starts, block 1 before message_delta.
    order = [(e["type"], e.get("index")) for e in parsed]
    assert order.index(("content_block_stop", 0)) < order.index(("content_block_start", 1))
    assert order.index(("content_block_stop", 1)) < order.index(("message_delta", None))
    assert parsed[-2]["delta"]["stop_reason"] == "tool_use"
    assert parsed[-2]["usage"] == {
        "input_tokens": 20,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 9,
    }
    assert not stream.errored


def test_tool_call_without_id_gets_synthetic_id() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("x"))
    parsed = events(stream.delta(tool_chunk({"index": 0, "function": {"name": "f"}})))
    assert parsed[-1]["content_block"]["id"] == "toolu_1"


def test_arguments_before_name_are_buffered() -> None:
    stream = AnthropicStream("m")
    assert stream.delta(tool_chunk({"index": 0, "function": {"arguments": '{"a":'}})) == b""
    parsed = events(stream.delta(tool_chunk({"index": 0, "id": "c", "function": {"name": "f"}})))
    assert types_of(parsed) == ["message_start", "content_block_start", "content_block_delta"]
    assert parsed[2]["delta"] == {"type": "input_json_delta", "partial_json": '{"a":'}
    stream.delta(tool_chunk({"index": 0, "function": {"arguments": "1}"}}))
    assert events(stream.finish())[-2]["delta"]["stop_reason"] == "tool_use"


def test_interleaved_unopened_call_is_buffered_until_it_opens() -> None:
    stream = AnthropicStream("m")
    out = run(
        stream,
        [
            tool_chunk({"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":'}}),
            tool_chunk({"index": 1, "function": {"arguments": '{"y":2}'}}),  # no name yet
            tool_chunk({"index": 0, "function": {"arguments": "1}"}}),
            tool_chunk({"index": 1, "id": "b", "function": {"name": "g"}}),
        ],
    )
    parsed = events(out)
    joined: dict[int, str] = {}
    for e in parsed:
        if e["type"] == "content_block_delta":
            joined[e["index"]] = joined.get(e["index"], "") + e["delta"]["partial_json"]
    assert joined == {0: '{"x":1}', 1: '{"y":2}'}
    assert not stream.errored


def test_arguments_for_closed_block_are_an_error() -> None:
    stream = AnthropicStream("m")
    stream.delta(tool_chunk({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}}))
    stream.delta(tool_chunk({"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}))
    parsed = events(stream.delta(tool_chunk({"index": 0, "function": {"arguments": "}"}})))
    assert parsed[-1]["type"] == "error"
    assert parsed[-1]["error"]["type"] == "api_error"
    assert stream.errored
    assert stream.finish() == b""


def test_empty_arguments_tool_call_sends_no_delta() -> None:
    stream = AnthropicStream("m")
    out = run(stream, [tool_chunk({"index": 0, "id": "a", "function": {"name": "f"}})])
    parsed = events(out)
    assert "content_block_delta" not in types_of(parsed)
    assert parsed[-2]["delta"]["stop_reason"] == "tool_use"
    assert not stream.errored


def test_object_arguments_sent_as_one_json_fragment() -> None:
    stream = AnthropicStream("m")
    frag = {"index": 0, "id": "a", "function": {"name": "f", "arguments": {"q": "x"}}}
    parsed = events(stream.delta(tool_chunk(frag)))
    assert json.loads(parsed[-1]["delta"]["partial_json"]) == {"q": "x"}


@pytest.mark.parametrize(
    "fragments",
    [
        # arguments cut off mid-object
        [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":'}}],
        # arguments that are JSON but not an object
        [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "[1]"}}],
        # a call that never got its name, so never reached the client
        [{"index": 0, "id": "a", "function": {"arguments": "{}"}}],
    ],
)
def test_unfinished_tool_call_at_finish_is_an_error(fragments: list[dict[str, Any]]) -> None:
    stream = AnthropicStream("m")
    stream.delta(tool_chunk(*fragments))
    stream.delta(finish_chunk("tool_calls"))
    parsed = events(stream.finish())
    assert types_of(parsed) == ["error"]
    assert parsed[0]["error"]["type"] == "api_error"
    assert parsed[0]["error"]["message"]
    assert stream.errored
    assert stream.finish() == b""
