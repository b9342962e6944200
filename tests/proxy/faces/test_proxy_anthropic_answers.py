"""The proxy's Anthropic face, answers out: message_body from a Response, error_body per status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmchat.protocols.anthropic import thinking_signature
from llmchat.proxy.faces.anthropic.translate import error_body, message_body
from llmchat.tools import ToolCall

# -- responses ------------------------------------------------------------


@pytest.mark.parametrize("thinking", [None, "", "pondering"])
@pytest.mark.parametrize("words", ["", "hello"])
@pytest.mark.parametrize(
    "calls",
    [[], [ToolCall(name="f", arguments={"x": 1}, id="toolu_1"), ToolCall(name="g", id="toolu_2")]],
)
def test_message_body_validates(thinking: str | None, words: str, calls: list[ToolCall]) -> None:
    out = message_body(
        model="m",
        message_id="msg_1",
        text=words,
        thinking=thinking,
        tool_calls=calls,
        stop_reason="tool_use" if calls else "end_turn",
        input_tokens=None,
        output_tokens=7,
        cached_tokens=None,
    )
    expected: list[dict[str, Any]] = []
    if thinking:
        signature = thinking_signature(thinking)
        expected.append({"type": "thinking", "thinking": thinking, "signature": signature})
    if words:
        expected.append({"type": "text", "text": words})
    expected.extend(call.to_anthropic_block() for call in calls)
    assert out["content"] == expected
    assert out["usage"] == {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 7,
    }
    assert (out["id"], out["type"], out["role"], out["stop_sequence"]) == (
        "msg_1",
        "message",
        "assistant",
        None,
    )
    types = pytest.importorskip("anthropic.types")
    message = types.Message.model_validate(json.loads(json.dumps(out)))
    assert [block.type for block in message.content] == [block["type"] for block in expected]
    assert message.stop_reason == out["stop_reason"]
    assert message.usage.output_tokens == 7


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
        (409, "invalid_request_error"),
    ],
)
def test_error_body(status: int, kind: str) -> None:
    assert error_body(status, "nope") == {
        "type": "error",
        "error": {"type": kind, "message": "nope"},
    }
    if kind == "request_too_large":
        return  # Anthropic's documented 413 type, which the SDK's error union does not model
    types = pytest.importorskip("anthropic.types")
    parsed = types.ErrorResponse.model_validate(error_body(status, "nope"))
    assert parsed.error.type == kind
