"""What the AnthropicStream tests share: SSE events parsed strictly, chunk builders, a run."""

from __future__ import annotations

import json
from typing import Any

from llmchat.protocols.anthropic import (
    AnthropicStream,
)

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
