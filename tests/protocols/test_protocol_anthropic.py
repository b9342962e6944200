"""AnthropicStream: an OpenAI chunk stream rewritten as Anthropic Messages API events.

Text, thinking, finishes and errors; tool calls are test_protocol_anthropic_tools.py's,
the real SDK's reading test_protocol_anthropic_sdk.py's.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmchat.protocols.anthropic import (
    AnthropicStream,
    error_type_for_status,
    stop_reason_for,
    thinking_signature,
)

from .anthropic_support import (
    events,
    finish_chunk,
    reasoning_chunk,
    run,
    text_chunk,
    tool_chunk,
    types_of,
    usage_chunk,
)

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
