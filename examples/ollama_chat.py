"""Talk to Ollama's native API (/api/chat): a streamed answer, then a blocking one.

python examples/ollama_chat.py
LLMCHAT_OLLAMA_URL=http://127.0.0.1:11434 LLMCHAT_OLLAMA_MODEL=qwen3 python examples/ollama_chat.py

Without LLMCHAT_OLLAMA_URL the example starts its own stand-in: llmchat's proxy,
whose Ollama face serves /api/chat over the embedded OpenAI-compatible server.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from _server import server_url

from llmchat import OpenAICommon, Settings
from llmchat.backends.ollama import Ollama
from llmchat.proxy import make_app, make_server

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@contextlib.contextmanager
def ollama_url() -> Iterator[str]:
    """$LLMCHAT_OLLAMA_URL, else the proxy's Ollama face over the embedded server."""
    configured = os.environ.get("LLMCHAT_OLLAMA_URL")
    if configured:
        yield configured
        return
    with server_url() as upstream_url, OpenAICommon(upstream_url) as upstream:
        server = make_server(make_app(upstream), port=0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield server.url
        finally:
            server.shutdown()
            server.server_close()


with ollama_url() as url:
    # No /v1: Ollama's own API. Samplers go under "options" (max_tokens is
    # num_predict, max_context is num_ctx); a blocking call says "stream": false.
    backend = Ollama(
        url,
        model=os.environ.get("LLMCHAT_OLLAMA_MODEL", "llama3.2"),
        settings=Settings(max_tokens=64, temperature=0, max_context=4096),
    )
    with backend.chat_completion_stream(QUESTION) as response:
        print("ollama: ", end="")
        for text in response.iter_text():
            print(text, end="", flush=True)
    print()
    if response.is_success:
        print(
            f"[{response.finish_reason}; {response.prompt_tokens} prompt tokens, "
            f"{response.completion_tokens} generated]"
        )
    else:
        print(f"[failed ({response.error_class}): {response.err}]")

    answer = backend.chat_completion(QUESTION)
    # Ollama reports its own durations on the done line (a real Ollama does;
    # the stand-in proxy only on blocking answers): Response.timing has them.
    server_time = answer.timing.server_total_seconds
    print(
        f"blocking: {answer.msg if answer.is_success else answer.err} "
        f"[server time: {'n/a' if server_time is None else f'{server_time:.3f}s'}]"
    )
    print(f"limits: {backend.probe_server_limits()}")
    backend.close()
