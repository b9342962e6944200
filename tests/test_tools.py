"""ToolCall: decoding and the dialect renderings."""

from __future__ import annotations

import pytest

from llmchat.tools import ToolCall

OPENAI = {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}


def test_from_openai_and_back() -> None:
    call = ToolCall.from_openai(OPENAI)
    assert (call.name, call.arguments, call.id) == ("f", {"a": 1}, "call-1")
    assert call.to_openai() == OPENAI  # the original argument text is kept


def test_object_arguments_are_accepted() -> None:
    call = ToolCall.from_openai({"function": {"name": "f", "arguments": {"b": 2}}})
    assert call.arguments == {"b": 2} and call.to_openai()["function"]["arguments"] == '{"b":2}'


@pytest.mark.parametrize("raw", ["{oops", "[1, 2]", "3", 7])
def test_undecodable_arguments_are_flagged(raw: object) -> None:
    call = ToolCall.from_openai({"function": {"name": "f", "arguments": raw}})
    assert call.arguments == {} and call.arguments_undecodable
    assert call.arguments_json is not None


def test_other_dialects() -> None:
    call = ToolCall.from_openai(OPENAI)
    assert call.to_ollama() == {"function": {"name": "f", "arguments": {"a": 1}}}
    assert call.to_anthropic_block() == {
        "type": "tool_use",
        "id": "call-1",
        "name": "f",
        "input": {"a": 1},
    }


def test_a_call_with_no_arguments_goes_out_as_an_empty_object() -> None:
    from llmchat.tools import ToolCallAssembler

    assembler = ToolCallAssembler()
    assembler.feed([{"index": 0, "id": "c", "function": {"name": "now"}}])
    (call,) = assembler.finish()
    assert call.arguments == {} and not call.arguments_undecodable
    assert call.to_openai()["function"]["arguments"] == "{}"


def test_unkeyed_fragments_continue_a_call_begun_by_id() -> None:
    from llmchat.tools import ToolCallAssembler

    assembler = ToolCallAssembler()
    assembler.feed([{"id": "a", "function": {"name": "f", "arguments": '{"x":'}}])
    assembler.feed([{"function": {"arguments": "1}"}}])
    assert [(c.id, c.arguments) for c in assembler.finish()] == [("a", {"x": 1})]
