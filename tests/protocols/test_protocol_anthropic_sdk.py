"""AnthropicStream against the real `anthropic` SDK: every event validated and accumulated
as the SDK does, for generated streams too.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmchat.protocols.anthropic import (
    AnthropicStream,
    thinking_signature,
)

from .anthropic_support import (
    events,
    finish_chunk,
    reasoning_chunk,
    run,
    text_chunk,
    two_tool_calls,
    types_of,
)

HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None

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
