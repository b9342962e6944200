"""A translating proxy: Ollama, Anthropic and OpenAI clients over one OpenAI upstream.

    from llmchat import OpenAICommon
    from llmchat.proxy import make_app, make_server

    app = make_app(OpenAICommon("http://127.0.0.1:8080/v1"), usage_log="usage.jsonl")
    make_server(app, port=11434).serve_forever()  # or any non-buffering WSGI server

Or from the shell: ``llmchat proxy --upstream http://127.0.0.1:8080/v1``.
"""

from __future__ import annotations

from .app import ProxyApp, make_app
from .server import ProxyServer, make_server
from .usage import UsageEvent

__all__ = ["ProxyApp", "ProxyServer", "UsageEvent", "make_app", "make_server"]
