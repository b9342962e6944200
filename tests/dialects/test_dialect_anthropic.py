"""The Anthropic Messages decoder, event by event, and its usage reader (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from llmchat.dialects.anthropic import STOP_REASONS, AnthropicMessages, usage_fields
from llmchat.dialects.base import Delta
from llmchat.pipeline.accumulate import Accumulator
from llmchat.tools import ToolCall


def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, d: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str | None, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": usage,
    }


MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {
            "input_tokens": 10,
            "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 2,
            "output_tokens": 1,
        },
    },
}


def as_delta(value: str | Delta) -> Delta:
    return Delta(text=value) if isinstance(value, str) else value


# -- event by event -----------------------------------------------------------------------


def test_message_start_gives_id_and_model_and_is_not_answer() -> None:
    out = as_delta(AnthropicMessages().decode(MESSAGE_START))
    assert (out.id, out.model, out.choice, out.end) == ("msg_1", "claude-x", False, False)


def test_text_deltas_are_plain_strings() -> None:
    d = AnthropicMessages()
    assert d.decode(start(0, {"type": "text", "text": ""})) == ""
    assert d.decode(delta(0, {"type": "text_delta", "text": "Hel"})) == "Hel"
    assert d.decode(stop(0)) == ""


def test_a_text_block_starting_with_text_keeps_it() -> None:
    assert AnthropicMessages().decode(start(0, {"type": "text", "text": "Hi"})) == "Hi"


def test_thinking_and_signature_become_reasoning_and_one_part_at_the_stop() -> None:
    d = AnthropicMessages()
    d.decode(start(0, {"type": "thinking", "thinking": "", "signature": ""}))
    first = as_delta(d.decode(delta(0, {"type": "thinking_delta", "thinking": "Let me "})))
    assert (first.thinking, first.choice) == ("Let me ", True)
    assert d.decode(delta(0, {"type": "thinking_delta", "thinking": ""})) == ""
    d.decode(delta(0, {"type": "thinking_delta", "thinking": "think."}))
    assert d.decode(delta(0, {"type": "signature_delta", "signature": "c2ln"})) == ""
    out = as_delta(d.decode(stop(0)))
    assert out.parts == [
        {
            "dialect": "anthropic",
            "type": "thinking",
            "thinking": "Let me think.",
            "signature": "c2ln",
        }
    ]


def test_redacted_thinking_is_kept_as_a_part() -> None:
    d = AnthropicMessages()
    d.decode(start(3, {"type": "redacted_thinking", "data": "EqkE"}))
    out = as_delta(d.decode(stop(3)))
    assert out.parts == [{"dialect": "anthropic", "type": "redacted_thinking", "data": "EqkE"}]
    assert out.thinking == ""


def test_tool_use_lands_whole_at_its_block_stop() -> None:
    d = AnthropicMessages()
    d.decode(start(1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}))
    for piece in ("", '{"locati', 'on": "P', "ar", 'is"}'):
        assert d.decode(delta(1, {"type": "input_json_delta", "partial_json": piece})) == ""
    out = as_delta(d.decode(stop(1)))
    assert out.calls == [ToolCall("get_weather", {"location": "Paris"}, "toolu_1")]


def test_tool_use_without_deltas_takes_the_start_input() -> None:
    d = AnthropicMessages()
    d.decode(start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}))
    assert as_delta(d.decode(stop(0))).calls == [ToolCall("f", {"a": 1}, "t")]


def test_interleaved_tool_blocks_are_kept_apart_by_index() -> None:
    """llama-server opens block 1 before it closes block 0."""
    d = AnthropicMessages()
    d.decode(start(0, {"type": "tool_use", "id": "a", "name": "f"}))
    d.decode(delta(0, {"type": "input_json_delta", "partial_json": '{"x":'}))
    d.decode(start(1, {"type": "tool_use", "id": "b", "name": "g"}))
    d.decode(delta(0, {"type": "input_json_delta", "partial_json": "1}"}))
    d.decode(delta(1, {"type": "input_json_delta", "partial_json": "{}"}))
    assert as_delta(d.decode(stop(0))).calls == [ToolCall("f", {"x": 1}, "a")]
    assert as_delta(d.decode(stop(1))).calls == [ToolCall("g", {}, "b")]


def test_undecodable_tool_input_is_kept_and_flagged() -> None:
    d = AnthropicMessages()
    d.decode(start(0, {"type": "tool_use", "id": "t", "name": "f"}))
    d.decode(delta(0, {"type": "input_json_delta", "partial_json": '{"a":'}))
    (call,) = as_delta(d.decode(stop(0))).calls or []
    assert (call.arguments, call.arguments_json, call.arguments_undecodable) == ({}, '{"a":', True)


def test_a_tool_block_never_stopped_is_a_failure_not_a_call() -> None:
    d = AnthropicMessages()
    d.decode(start(0, {"type": "tool_use", "id": "t", "name": "f"}))
    out = as_delta(d.decode(message_delta("tool_use", output_tokens=3)))
    assert out.calls is None and out.finish_reason == "tool_calls"
    assert out.error is not None and "never ended" in out.error


def test_citations_accumulate_and_each_delta_carries_all_so_far() -> None:
    d = AnthropicMessages()
    d.decode(start(0, {"type": "text", "text": "", "citations": []}))
    one = {"type": "web_search_result_location", "url": "https://a.example", "cited_text": "a"}
    two = {"type": "char_location", "cited_text": "b", "document_index": 0}
    assert as_delta(d.decode(delta(0, {"type": "citations_delta", "citation": one}))).citations == [
        one
    ]
    out = as_delta(d.decode(delta(0, {"type": "citations_delta", "citation": two})))
    assert (out.citations, out.choice) == ([one, two], True)


@pytest.mark.parametrize(("wire", "mapped"), sorted(STOP_REASONS.items()))
def test_every_stop_reason_is_mapped_and_kept_verbatim(wire: str, mapped: str) -> None:
    out = as_delta(AnthropicMessages().decode(message_delta(wire, output_tokens=1)))
    assert (out.finish_reason, out.provider_reason, out.choice) == (mapped, wire, True)


def test_the_issue_s_mapping() -> None:
    assert dict(STOP_REASONS) == {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "max_tokens": "length",
        "tool_use": "tool_calls",
        "refusal": "content_filter",
        "model_context_window_exceeded": "length",
    }


@pytest.mark.parametrize("wire", ["pause_turn", "something_new"])
def test_other_stop_reasons_pass_through_unmapped(wire: str) -> None:
    out = as_delta(AnthropicMessages().decode(message_delta(wire)))
    assert (out.finish_reason, out.provider_reason) == (wire, wire)


def test_message_delta_without_a_stop_reason_is_only_usage() -> None:
    out = as_delta(AnthropicMessages().decode(message_delta(None, output_tokens=4)))
    assert (out.finish_reason, out.choice) == (None, False)


def test_message_stop_is_the_end() -> None:
    out = as_delta(AnthropicMessages().decode({"type": "message_stop"}))
    assert (out.end, out.choice, out.finish_reason) == (True, False, None)


def test_error_event_fails_with_the_provider_message_and_ends() -> None:
    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    out = as_delta(AnthropicMessages().decode(event))
    assert (out.error, out.end) == ("Overloaded", True)
    bare = as_delta(AnthropicMessages().decode({"type": "error"}))
    assert bare.error == "The provider sent an error event"


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "ping"},
        {"type": "future_event", "x": 1},
        {},
        start(5, {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}}),
        delta(5, {"type": "input_json_delta", "partial_json": '{"q"'}),
        stop(5),
        start(6, {"type": "web_search_tool_result", "content": []}),
        delta(9, {"type": "future_delta"}),
        delta(9, {"type": "signature_delta", "signature": "x"}),
        {"type": "content_block_delta", "index": 0, "delta": "junk"},
        {"type": "content_block_start", "index": 0, "content_block": None},
        {"type": "message_start", "message": None},
    ],
)
def test_unknown_and_server_tool_events_add_nothing(payload: dict[str, Any]) -> None:
    out = as_delta(AnthropicMessages().decode(payload))
    assert out == Delta() or out == Delta(text="")


# -- a whole message ----------------------------------------------------------------------


def test_a_blocking_message_reads_every_block() -> None:
    body = {
        "id": "msg_2",
        "type": "message",
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "RED"},
            {
                "type": "text",
                "text": "A",
                "citations": [{"type": "char_location", "cited_text": "c"}],
            },
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
            {"type": "text", "text": "B"},
            {"type": "tool_use", "id": "t", "name": "f", "input": {"k": "v"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    out = as_delta(AnthropicMessages().decode(body, whole=True))
    assert (out.text, out.thinking, out.whole, out.choice) == ("AB", "hmm", True, True)
    assert out.calls == [ToolCall("f", {"k": "v"}, "t")]
    assert out.parts == [
        {"dialect": "anthropic", "type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"dialect": "anthropic", "type": "redacted_thinking", "data": "RED"},
    ]
    assert out.citations == [{"type": "char_location", "cited_text": "c"}]
    assert (out.finish_reason, out.provider_reason) == ("tool_calls", "tool_use")


def test_a_whole_error_body_is_an_error() -> None:
    body = {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert as_delta(AnthropicMessages().decode(body, whole=True)).error == "boom"


# -- usage ----------------------------------------------------------------------------------


def test_usage_of_message_start_counts_every_input_token_and_not_the_placeholder_output() -> None:
    assert usage_fields(MESSAGE_START) == {
        "model": "claude-x",
        "usage": MESSAGE_START["message"]["usage"],  # type: ignore[index]
        "prompt_tokens": 17,
        "cached_tokens": 5,
        "cache_write_tokens": 2,  # cache_creation_input_tokens: part of the 17
    }


def test_usage_of_message_delta() -> None:
    event = message_delta("end_turn", output_tokens=9)
    event["usage"]["output_tokens_details"] = {"thinking_tokens": 4}
    assert usage_fields(event) == {
        "usage": event["usage"],
        "completion_tokens": 9,
        "reasoning_tokens": 4,
    }


def test_usage_of_a_body_and_zero_is_kept() -> None:
    body = {"model": "m", "usage": {"input_tokens": 0, "output_tokens": 0}}
    assert usage_fields(body) == {
        "model": "m",
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }


def test_events_without_usage_report_nothing() -> None:
    assert usage_fields(delta(0, {"type": "text_delta", "text": "x"})) == {}
    assert usage_fields({"type": "message_start"}) == {}
    assert usage_fields({"usage": "junk"}) == {}


def test_the_dialect_s_class_facts() -> None:
    assert (AnthropicMessages.name, AnthropicMessages.framing) == ("anthropic", "sse")
    assert AnthropicMessages.done_marker is None and AnthropicMessages.derives_total


# -- through the accumulator -----------------------------------------------------------------


def test_a_stream_through_the_accumulator() -> None:
    acc = Accumulator(AnthropicMessages())
    chunks = []
    for payload in (
        MESSAGE_START,
        start(0, {"type": "thinking", "thinking": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "t"}),
        delta(0, {"type": "signature_delta", "signature": "s"}),
        stop(0),
        start(1, {"type": "text", "text": ""}),
        delta(1, {"type": "text_delta", "text": "Hi"}),
        stop(1),
        start(2, {"type": "tool_use", "id": "c", "name": "f", "input": {}}),
        delta(2, {"type": "input_json_delta", "partial_json": "{}"}),
        stop(2),
        message_delta("tool_use", output_tokens=5),
        {"type": "message_stop"},
        delta(1, {"type": "text_delta", "text": "after the end"}),
    ):
        chunks += acc.feed_payload(payload)
    assert "".join(c.content for c in chunks) == "Hi"
    assert "".join(c.thinking or "" for c in chunks) == "t"
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["tool_calls"]
    assert acc.done and acc.provider_reason == "tool_use" and acc.id == "msg_1"
    assert [call.name for call in acc.tool_calls] == ["f"]
    assert acc.parts == [
        {"dialect": "anthropic", "type": "thinking", "thinking": "t", "signature": "s"}
    ]
