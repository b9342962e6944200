"""Ask OpenRouter one question and print the answer, its cost and who served it.

python examples/openrouter_chat.py                      # embedded OpenRouter-like server
OPENROUTER_API_KEY=sk-or-... python examples/openrouter_chat.py   # the real OpenRouter
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/openrouter_chat.py
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from llmchat import Settings
from llmchat.backends.openrouter import DEFAULT_API_URL, OpenRouter
from llmchat.testing import RecordedRequest, Reply, ScriptedServer

ANSWER = "Paris is the capital of France."


def loopback(request: RecordedRequest) -> Reply:
    """Answer like OpenRouter: usage with cost, the serving provider, GET /generation."""
    if request.method == "GET" and request.path.startswith("/v1/generation"):
        return Reply.json({"data": {"provider_name": "Loopback", "native_tokens_cached": 0}})
    usage = {"prompt_tokens": 14, "completion_tokens": 7, "total_tokens": 21, "cost": 0.000021}
    message = {"role": "assistant", "content": ANSWER}
    return Reply.json(
        {
            "id": "gen-loopback-1",
            "object": "chat.completion",
            "model": "openai/gpt-4o-mini",
            "provider": "Loopback",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage,
        }
    )


@contextlib.contextmanager
def api_url() -> Iterator[str]:
    """$LLMCHAT_API_URL, else OpenRouter itself when a key is set, else the embedded server."""
    configured = os.environ.get("LLMCHAT_API_URL")
    if configured or os.environ.get("OPENROUTER_API_KEY"):
        yield configured or DEFAULT_API_URL
        return
    with ScriptedServer(loopback) as url:
        yield url


with api_url() as url:
    backend = OpenRouter(
        model=os.environ.get("LLMCHAT_MODEL", "openai/gpt-4o-mini"),
        settings=Settings(max_tokens=64, temperature=0),
        x_title="llmchat example",
        provider={"sort": "price"},  # OpenRouter's routing preferences, sent as given
        api_url=url,
    )
    response = backend.chat_completion(
        [
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "What is the capital of France?"},
        ]
    )
    if response.is_success:
        print(response.msg)
        cost = "not reported" if response.cost is None else f"{response.cost:.6f} credits"
        print(f"cost: {cost}; provider: {response.provider_name}")
    else:
        print(f"failed ({response.error_class}): {response.err}")
    backend.close()
