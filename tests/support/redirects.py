"""Every backend with a key, pointed at a loopback origin, and one call in either mode: what
the redirect tests (and the secrets matrix's redirect rows) run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmchat import Anthropic, Gemini, Ollama, OpenAICommon, OpenAIResponses, OpenRouter

KEY = "sk-redirect-SECRET-key"
MESSAGES = [{"role": "user", "content": "the whole prompt"}]
WAIT = 10.0

BACKENDS: dict[str, Callable[[str], Any]] = {
    "OpenAICommon": lambda url: OpenAICommon(url + "/v1", api_key=KEY, model="m"),
    "OpenRouter": lambda url: OpenRouter(api_key=KEY, model="m", api_url=url + "/v1"),
    "Anthropic": lambda url: Anthropic(url + "/v1", api_key=KEY, model="m"),
    "Gemini": lambda url: Gemini(url + "/v1beta", api_key=KEY, model="m"),
    "OpenAIResponses": lambda url: OpenAIResponses(url + "/v1", api_key=KEY, model="m"),
    "Ollama": lambda url: Ollama(url, api_key=KEY, model="m"),
}


def run(backend: Any, mode: str) -> Any:
    if mode == "blocking":
        return backend.chat_completion(MESSAGES)
    with backend.chat_completion_stream(MESSAGES) as response:
        response.wait(WAIT)
        return response
