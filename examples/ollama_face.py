"""Serve Ollama (and Anthropic) clients from an OpenAI-compatible server.

python examples/ollama_face.py
LLMCHAT_API_URL=http://127.0.0.1:8080/v1 python examples/ollama_face.py

Needs the `ollama` client package (`pip install ollama`); the Anthropic part
runs only when `anthropic` is installed too.
"""

from __future__ import annotations

import os
import threading

import ollama
from _server import server_url

from llmchat import OpenAICommon
from llmchat.proxy import make_app, make_server

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]

with server_url() as upstream_url:
    # With a model set here the upstream serves every request with it, whatever
    # name the client uses; without one, the client's model name is passed on.
    upstream = OpenAICommon(
        upstream_url,
        api_key=os.environ.get("LLMCHAT_API_KEY"),
        model=os.environ.get("LLMCHAT_MODEL"),
    )
    app = make_app(upstream)
    # Port 0 picks a free port, so the example never collides with a real Ollama
    # on 11434. The proxy is a plain WSGI app: any non-buffering server would do.
    server = make_server(app, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # The unmodified Ollama client: the proxy is the whole integration.
        client = ollama.Client(host=server.url)
        print("ollama: ", end="")
        final = None
        for part in client.chat(model="llama3", messages=QUESTION, stream=True):
            print(part.message.content, end="", flush=True)
            final = part
        print()
        # Only the closing `done` line carries the counts, read from the
        # upstream's usage frame rather than estimated by the proxy.
        assert final is not None and final.done
        print(
            f"[{final.done_reason}; {final.prompt_eval_count} prompt tokens, "
            f"{final.eval_count} generated]"
        )

        try:
            import anthropic
        except ImportError:
            anthropic = None  # type: ignore[assignment]
        if anthropic is not None:
            # Same proxy, other face: /v1/messages. The key is unused unless the
            # proxy was made with api_key=...; the SDK just insists on one.
            claude = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)
            message = claude.messages.create(model="claude-x", max_tokens=64, messages=QUESTION)
            print(f"anthropic: {message.content[0].text} [{message.stop_reason}]")
    finally:
        server.shutdown()
        server.server_close()
        upstream.close()
