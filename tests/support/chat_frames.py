"""What many tests script an upstream with: OpenAI chat-completion frames and one function tool."""

from __future__ import annotations

from typing import Any

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
"""An OpenAI chat tool (copy it before changing it)."""


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with `delta` in its one choice."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "loopback",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def usage_chunk(
    prompt: int, completion: int, *, cached: int | None = None, reasoning: int | None = None
) -> dict[str, Any]:
    """The usage frame after the finish chunk; the detail blocks only when given."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "loopback",
        "choices": [],
        "usage": usage,
    }
