"""An OpenRouter-shaped loopback server for the OpenRouter tests: its bodies, streams and
/generation answers, and a backend pointed at it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmchat.backends.openrouter import (
    OpenRouter,
)
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

KEY = "sk-or-v1-SECRET-loopback-4242"
HI = [{"role": "user", "content": "Hi"}]
GEN_ID = "gen-1700000000-abc"
PROCESSING = ": OPENROUTER PROCESSING\n\n"
EPHEMERAL = {"type": "ephemeral"}


# -- an OpenRouter-shaped loopback server ---------------------------------------


def usage(cost: float | None = 0.0042, is_byok: bool | None = False, **extra: Any) -> dict:
    u: dict[str, Any] = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8, **extra}
    if cost is not None:
        u["cost"] = cost
    if is_byok is not None:
        u["is_byok"] = is_byok
    return u


def completion(
    content: str = "Paris.", *, ident: str | None = GEN_ID, use: dict | None = None, **message: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object": "chat.completion",
        "model": "openai/gpt-4o-mini",
        "provider": "OpenAI",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": usage() if use is None else use,
    }
    if ident is not None:
        body["id"] = ident
    return body


def chunk(finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {
        "id": GEN_ID,
        "object": "chat.completion.chunk",
        "model": "openai/gpt-4o-mini",
        "provider": "OpenAI",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream_events(use: dict | None = None) -> list[Any]:
    final = chunk("stop", content="")
    final["usage"] = usage(is_byok=True) if use is None else use
    return [
        PROCESSING,
        PROCESSING,
        chunk(role="assistant", content=""),
        chunk(reasoning="Thinking "),
        chunk(reasoning="hard."),
        PROCESSING,
        chunk(content="Par"),
        chunk(content="is."),
        final,
    ]


def generation(**data: Any) -> Reply:
    fields = {
        "id": GEN_ID,
        "total_cost": 0.9,
        "provider_name": "Lookup Provider",
        "tokens_prompt": 50,
        "tokens_completion": 30,
        "native_tokens_prompt": 55,
        "native_tokens_completion": 33,
        "native_tokens_reasoning": 4,
        "native_tokens_cached": 40,
        "is_byok": True,
        **data,
    }
    return Reply.json({"data": fields})


def openrouter(
    chat: Reply | None = None, lookup: Reply | None = None
) -> Callable[[RecordedRequest], Reply]:
    """A script: POST /chat/completions answers `chat` (or a stream for a stream body)."""

    def answer(request: RecordedRequest) -> Reply:
        path = request.path.partition("?")[0]
        if request.method == "POST" and path == "/v1/chat/completions":
            if chat is not None:
                return chat
            streamed = (request.json() or {}).get("stream")
            return Reply.sse(stream_events()) if streamed else Reply.json(completion())
        if request.method == "GET" and path == "/v1/generation":
            return lookup if lookup is not None else generation()
        return Reply.error(404, "Not Found")

    return answer


def backend(server: ScriptedServer, **kwargs: Any) -> OpenRouter:
    kwargs.setdefault("api_key", KEY)
    return OpenRouter(api_url=server.url, **kwargs)
