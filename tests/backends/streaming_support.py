"""What the stream tests share: OpenAI chunk events, tool-call fragments, one streamed call."""

from __future__ import annotations

from typing import Any

from llmchat import OpenAICommon
from llmchat.response import Response
from llmchat.testing import (
    Reply,
    ScriptedServer,
)

HI = [{"role": "user", "content": "Hi"}]
CLOSED = "Stream closed without [DONE] or a finish reason"


def delta(content: str | None = None, finish: str | None = None, **fields: Any) -> dict[str, Any]:
    """One chat.completion.chunk event."""
    d: dict[str, Any] = dict(fields)
    if content is not None:
        d["content"] = content
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def usage_event(prompt: int = 7, completion: int = 3, cached: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": usage,
    }


def call_fragment(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "type": "function", "function": {}}
    if id is not None:
        fragment["id"] = id
    if name is not None:
        fragment["function"]["name"] = name
    if arguments is not None:
        fragment["function"]["arguments"] = arguments
    return fragment


def stream(server: ScriptedServer, reply: Reply | None = None, **kwargs: Any) -> Response:
    if reply is not None:
        server.push(reply)
    response = OpenAICommon(server.url, **kwargs).chat_completion_stream(HI)
    assert response.wait(10).is_done, "the stream never settled"
    return response
