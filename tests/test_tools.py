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
