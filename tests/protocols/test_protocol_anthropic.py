"""AnthropicStream: an OpenAI chunk stream rewritten as Anthropic Messages API events."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.protocols.anthropic import (
    AnthropicStream,
    error_type_for_status,
    stop_reason_for,
    thinking_signature,
)

HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None

# -- helpers -------------------------------------------------------------------


def events(data: bytes) -> list[dict[str, Any]]:
    """Parse SSE bytes; every event is ``event:`` + ``data:`` and names its own type."""
    if not data:
        return []
    assert data.endswith(b"\n\n")
    parsed = []
    for frame in data[:-2].split(b"\n\n"):
        event_line, data_line = frame.split(b"\n")
        assert event_line.startswith(b"event: ")
        assert data_line.startswith(b"data: ")
        name = event_line[len(b"event: ") :].decode()
        obj = json.loads(data_line[len(b"data: ") :])
        assert obj["type"] == name
        parsed.append(obj)
    return parsed


def types_of(parsed: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in parsed]


def text_chunk(text: str, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}], **extra}


def reasoning_chunk(text: str, key: str = "reasoning_content") -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {key: text}}]}


def tool_chunk(*fragments: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": list(fragments)}}]}


def finish_chunk(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def run(stream: AnthropicStream, chunks: list[dict[str, Any]], **finish: Any) -> bytes:
    out = stream.start()
    for chunk in chunks:
        out += stream.delta(chunk)
    return out + stream.finish(**finish)


def two_tool_calls() -> list[dict[str, Any]]:
    """Two calls streamed in fragments, the second starting after the first ends."""
    return [
        {
            "id": "chatcmpl-7",
            "model": "up",
            "choices": [{"index": 0, "delta": {"role": "assistant"}}],
        },
        tool_chunk({"index": 0, "id": "call_a", "type": "function", "function": {"name": "get"}}),
        tool_chunk({"index": 0, "function": {"arguments": '{"city":'}}),
        tool_chunk({"index": 0, "function": {"arguments": ' "Zürich", "n": [1,'}}),
        tool_chunk({"index": 0, "function": {"arguments": " 2]}"}}),
        tool_chunk({"index": 1, "id": "call_b", "function": {"name": "put", "arguments": ""}}),
        tool_chunk({"index": 1, "function": {"arguments": "{}"}}),
        finish_chunk("tool_calls"),
        usage_chunk(20, 9),
    ]


# -- basics and text -------------------------------------------------------------


def test_basics() -> None:
    stream = AnthropicStream("claude-x")
    assert stream.content_type == "text/event-stream"
    assert stream.start() == b""
    assert not stream.errored
    assert stream.usage() == (None, None, 0)


def test_text_only_stream() -> None:
    stream = AnthropicStream("claude-x")
    first = events(stream.delta(text_chunk("Hel", id="chatcmpl-abc")))
    assert types_of(first) == ["message_start", "content_block_start", "content_block_delta"]
    message = first[0]["message"]
    assert message == {
        "id": "msg_chatcmpl-abc",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
        },
    }
    assert first[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    assert first[2]["delta"] == {"type": "text_delta", "text": "Hel"}
    second = events(stream.delta(text_chunk("lo")))
    assert second == [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}
    ]
    final = events(stream.finish())
    assert types_of(final) == ["content_block_stop", "message_delta", "message_stop"]
    assert final[0] == {"type": "content_block_stop", "index": 0}
    assert final[1] == {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
        },
    }
    assert final[2] == {"type": "message_stop"}
    assert stream.usage() == (None, None, 5)


def test_message_id_random_without_upstream_id() -> None:
    a = events(AnthropicStream("m").delta(text_chunk("x")))[0]["message"]["id"]
    b = events(AnthropicStream("m").delta(text_chunk("x")))[0]["message"]["id"]
    assert a.startswith("msg_") and b.startswith("msg_")
    assert len(a) == len("msg_") + 32
    assert a != b


def test_role_only_usage_only_and_empty_chunks_emit_nothing() -> None:
    stream = AnthropicStream("m")
    assert (
        stream.delta({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}) == b""
    )
    assert stream.delta(text_chunk("")) == b""
    assert stream.delta(reasoning_chunk("")) == b""
    assert stream.delta({"choices": []}) == b""
    assert stream.delta({}) == b""
    assert stream.delta(usage_chunk(7, 3)) == b""
    assert stream.delta(finish_chunk("stop")) == b""
    assert stream.usage() == (7, 3, 0)
    # message_start still goes out at finish, with the usage known by then.
    final = events(stream.finish())
    assert types_of(final) == ["message_start", "message_delta", "message_stop"]
    assert final[0]["message"]["usage"] == {
        "input_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }
    assert final[0]["message"]["id"] == "msg_x"
    assert final[1]["usage"] == {
        "input_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 3,
    }


def test_model_override_from_upstream_chunk() -> None:
    stream = AnthropicStream("requested")
    assert stream.delta({"model": "", "choices": []}) == b""
    parsed = events(stream.delta(text_chunk("a", model="upstream-1")))
    assert parsed[0]["message"]["model"] == "upstream-1"

    stream = AnthropicStream("requested")
    assert events(stream.delta(text_chunk("a")))[0]["message"]["model"] == "requested"


def test_content_bytes_counts_utf8_text_only() -> None:
    stream = AnthropicStream("m")
    stream.delta(reasoning_chunk("思考は数えない"))
    stream.delta(text_chunk("héllo "))
    stream.delta(text_chunk("日本"))
    stream.delta(text_chunk("🙂"))
    stream.finish()
    assert stream.usage()[2] == len("héllo 日本🙂".encode()) == 7 + 6 + 4


def test_non_ascii_written_as_utf8() -> None:
    data = AnthropicStream("m").delta(text_chunk("Grüße"))
    assert "Grüße".encode() in data


# -- thinking --------------------------------------------------------------------


def test_thinking_then_text() -> None:
    stream = AnthropicStream("m")
    out = run(
        stream,
        [
            reasoning_chunk("Let me "),
            reasoning_chunk("think", key="reasoning"),
            text_chunk("Answer"),
        ],
    )
    parsed = events(out)
    assert types_of(parsed) == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",  # the signature
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert parsed[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert parsed[1]["index"] == 0
    assert [p["delta"] for p in parsed[2:5]] == [
        {"type": "thinking_delta", "thinking": "Let me "},
        {"type": "thinking_delta", "thinking": "think"},
        # Opaque and deterministic: the hash of the block's whole thinking.
        {"type": "signature_delta", "signature": thinking_signature("Let me think")},
    ]
    assert parsed[4]["index"] == 0
    assert parsed[5] == {"type": "content_block_stop", "index": 0}
    assert parsed[6]["index"] == 1 and parsed[6]["content_block"]["type"] == "text"
    assert parsed[8] == {"type": "content_block_stop", "index": 1}
    assert stream.usage()[2] == len("Answer")


def test_reasoning_content_preferred_over_reasoning() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"reasoning_content": "rc", "reasoning": "r"}}]}
    parsed = events(AnthropicStream("m").delta(chunk))
    assert parsed[-1]["delta"] == {"type": "thinking_delta", "thinking": "rc"}
    chunk = {"choices": [{"index": 0, "delta": {"reasoning_content": None, "reasoning": "r"}}]}
    parsed = events(AnthropicStream("m").delta(chunk))
    assert parsed[-1]["delta"] == {"type": "thinking_delta", "thinking": "r"}


def test_text_after_tool_opens_new_text_block() -> None:
    stream = AnthropicStream("m")
    out = run(
        stream,
        [
            text_chunk("a"),
            tool_chunk({"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}),
            text_chunk("b"),
        ],
    )
    starts = [e for e in events(out) if e["type"] == "content_block_start"]
    assert [(e["index"], e["content_block"]["type"]) for e in starts] == [
        (0, "text"),
        (1, "tool_use"),
        (2, "text"),
    ]


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


# -- finish ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finish_reason", "with_tool", "expected"),
    [
        ("stop", False, "end_turn"),
        (None, False, "end_turn"),
        ("length", False, "max_tokens"),
        ("tool_calls", True, "tool_use"),
        ("stop", True, "tool_use"),
        (None, True, "tool_use"),
        ("length", True, "max_tokens"),
        ("content_filter", False, "refusal"),
    ],
)
def test_finish_reason_mapping(finish_reason: str | None, with_tool: bool, expected: str) -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("x"))
    if with_tool:
        stream.delta(tool_chunk({"index": 0, "id": "a", "function": {"name": "f"}}))
    if finish_reason is not None:
        stream.delta(finish_chunk(finish_reason))
    assert events(stream.finish())[-2]["delta"]["stop_reason"] == expected
    assert stop_reason_for(finish_reason, with_tool) == expected


def test_stop_reason_for_helper() -> None:
    assert stop_reason_for("tool_calls", False) == "tool_use"
    assert stop_reason_for("length", True) == "max_tokens"
    assert stop_reason_for("stop", False) == "end_turn"
    assert stop_reason_for("stop", True) == "tool_use"
    assert stop_reason_for("weird", True) == "end_turn"


def test_explicit_stop_reason_written_verbatim() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("x"))
    stream.delta(finish_chunk("length"))
    parsed = events(stream.finish(stop_reason="stop_sequence"))
    assert parsed[-2]["delta"]["stop_reason"] == "stop_sequence"


def test_usage_recorded_then_overridden() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("x"))
    stream.delta(usage_chunk(12, 5))
    assert stream.usage() == (12, 5, 1)
    parsed = events(stream.finish(input_tokens=40, output_tokens=9))
    assert parsed[-2]["usage"] == {
        "input_tokens": 40,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 9,
    }
    assert stream.usage() == (40, 9, 1)


def test_usage_recorded_from_usage_only_chunk() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("x"))
    stream.delta(finish_chunk("stop"))
    stream.delta({"choices": [], "usage": {"prompt_tokens": 3.0, "completion_tokens": 2}})
    usage = events(stream.finish())[-2]["usage"]
    assert usage == {
        "input_tokens": 3,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 2,
    }
    assert type(usage["input_tokens"]) is int


def test_input_tokens_known_before_output_go_into_message_start() -> None:
    stream = AnthropicStream("m")
    stream.delta({"choices": [], "usage": {"prompt_tokens": 15}})
    start = events(stream.delta(text_chunk("x")))[0]
    assert start["message"]["usage"] == {
        "input_tokens": 15,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }


def test_finish_is_idempotent_and_ends_the_stream() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("x"))
    assert stream.finish()
    assert stream.finish() == b""
    assert stream.delta(text_chunk("late")) == b""
    assert stream.error_event(500, "late") == b""
    assert not stream.errored


# -- errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (529, "overloaded_error"),
        (502, "api_error"),
        (503, "api_error"),
        (422, "invalid_request_error"),
        (408, "invalid_request_error"),
        (200, "api_error"),
        (0, "api_error"),
        (700, "api_error"),
    ],
)
def test_error_event_types(status: int, kind: str) -> None:
    assert error_type_for_status(status) == kind
    stream = AnthropicStream("m")
    parsed = events(stream.error_event(status, "boom"))
    assert parsed == [{"type": "error", "error": {"type": kind, "message": "boom"}}]
    assert stream.errored


def test_nothing_after_error() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("partial"))
    assert stream.error_event(429, "slow down")
    assert stream.delta(text_chunk("more")) == b""
    assert stream.finish() == b""
    assert stream.error_event(500, "again") == b""
    assert stream.errored


def test_upstream_error_object() -> None:
    stream = AnthropicStream("m")
    parsed = events(stream.delta({"error": {"message": "rate limited", "code": 429}}))
    assert parsed == [
        {"type": "error", "error": {"type": "api_error", "message": "Upstream error: rate limited"}}
    ]
    assert stream.errored
    assert stream.finish() == b""


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": "nonsense-detail"},
        {"choices": ["nonsense-detail"]},
        {"choices": [{"index": 0, "delta": {"tool_calls": "nonsense-detail"}}]},
        "nonsense-detail",
        ["nonsense-detail"],
    ],
)
def test_malformed_chunk_gets_generic_error(chunk: Any) -> None:
    stream = AnthropicStream("m")
    data = stream.delta(chunk)
    parsed = events(data)
    assert types_of(parsed) == ["error"]
    assert parsed[0]["error"]["type"] == "api_error"
    assert b"nonsense" not in data
    assert b"list" not in data and b"Error" not in data
    assert stream.errored


def test_malformed_chunk_after_output_keeps_the_stream_consistent() -> None:
    stream = AnthropicStream("m")
    stream.delta(text_chunk("ok"))
    parsed = events(stream.delta({"choices": 5}))
    assert types_of(parsed) == ["error"]
    assert stream.usage()[2] == 2


# -- hypothesis ------------------------------------------------------------------


@settings(max_examples=75, deadline=None)
@given(st.text(max_size=40), st.data())
def test_any_split_of_text_accumulates_to_the_same_text(text: str, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    stream = AnthropicStream("m")
    out = run(stream, [text_chunk(piece) for piece in pieces])
    parsed = events(out)
    assert not stream.errored
    deltas = [e for e in parsed if e["type"] == "content_block_delta"]
    assert "".join(e["delta"]["text"] for e in deltas) == text
    assert {e["index"] for e in deltas} <= {0}
    assert stream.usage()[2] == len(text.encode())
    assert types_of(parsed)[-2:] == ["message_delta", "message_stop"]
    if HAVE_ANTHROPIC:
        message = sdk_accumulate(out)
        assert "".join(block.text for block in message.content) == text


# -- the real anthropic SDK --------------------------------------------------------


def sdk_accumulate(data: bytes) -> Any:
    """Validate every event against the SDK's schema, then accumulate it as the SDK does."""
    pytest.importorskip("anthropic")
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import Message, RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter = TypeAdapter(RawMessageStreamEvent)
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for raw in events(data):
        event = adapter.validate_python(raw)  # strict: required fields must be present
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    assert snapshot is not None
    # The accumulator builds without validation; the final message must also validate.
    return Message.model_validate(snapshot.model_dump())


def full_stream() -> list[dict[str, Any]]:
    return [
        {
            "id": "chatcmpl-9",
            "model": "up-model",
            "choices": [{"index": 0, "delta": {"role": "assistant"}}],
        },
        reasoning_chunk("Weather "),
        reasoning_chunk("needed."),
        text_chunk("Checking "),
        text_chunk("now."),
        *two_tool_calls()[1:],
    ]


def test_sdk_accumulates_thinking_text_and_tool_use() -> None:
    stream = AnthropicStream("claude-x")
    message = sdk_accumulate(run(stream, full_stream()))
    assert message.id == "msg_chatcmpl-9"
    assert message.model == "up-model"
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    thinking, text, first, second = message.content
    assert thinking.thinking == "Weather needed."
    assert thinking.signature == thinking_signature("Weather needed.")
    assert text.text == "Checking now."
    assert (first.id, first.name, first.input) == (
        "call_a",
        "get",
        {"city": "Zürich", "n": [1, 2]},
    )
    assert (second.id, second.name, second.input) == ("call_b", "put", {})
    assert message.stop_reason == "tool_use"
    assert message.stop_sequence is None
    assert message.usage.input_tokens == 20
    assert message.usage.output_tokens == 9


def test_sdk_accumulates_text_only_with_usage_overrides() -> None:
    stream = AnthropicStream("claude-x")
    out = run(stream, [text_chunk("Hi "), text_chunk("there")], input_tokens=4, output_tokens=2)
    message = sdk_accumulate(out)
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hi there"
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (4, 2)


def test_sdk_accumulates_empty_answer() -> None:
    message = sdk_accumulate(run(AnthropicStream("m"), [finish_chunk("length")]))
    assert message.content == []
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 0


def test_sdk_client_reads_the_stream_over_http() -> None:
    anthropic = pytest.importorskip("anthropic")
    httpx2 = pytest.importorskip("httpx2")  # this SDK version is built on httpx2
    body = run(AnthropicStream("claude-x"), full_stream())

    def handler(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://translator.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )
    with client.messages.stream(
        model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert text == "Checking now."
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[2].input == {"city": "Zürich", "n": [1, 2]}
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 20


def test_sdk_client_raises_on_error_event() -> None:
    anthropic = pytest.importorskip("anthropic")
    httpx2 = pytest.importorskip("httpx2")
    translator = AnthropicStream("claude-x")
    body = translator.delta(text_chunk("partial")) + translator.error_event(529, "busy")

    def handler(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://translator.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )
    with pytest.raises(anthropic.APIStatusError) as info:
        with client.messages.stream(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            stream.get_final_message()
    assert "overloaded_error" in str(info.value)
    assert "busy" in str(info.value)
