"""A translating proxy: Ollama, Anthropic and OpenAI clients over one OpenAI upstream.

    from llmchat import OpenAICommon
    from llmchat.proxy import make_app, make_server

    app = make_app(OpenAICommon("http://127.0.0.1:8080/v1"), usage_log="usage.jsonl")
    make_server(app, port=11434).serve_forever()  # or any non-buffering WSGI server

Or from the shell: ``llmchat proxy --upstream http://127.0.0.1:8080/v1``.

Layers, each a package whose docstring says what it may import (checked by
tests/test_proxy_layers.py): `server` (HTTP/1.1 and gunicorn; WSGI only, no
face), `faces` (one package per kind of client; no face imports another),
`usage` (events, sinks, stores; no face, server or app). The modules at this
root are what the faces share: `completions` (`Completions`, the one
completion path every face receives), `client_exchange` (`ClientExchange`, one
request and its helpers), `router` (`Route`, `Router`), `upstream`,
`answers`, `bodies`, `outbound`, `failures`, `error_shapes`, ... `app` is the
router itself: it registers each face (``register(router, completions)``) and
is the only module that imports one; no module imports it back.
`gunicorn_app` and `gunicorn_worker` here only re-export their documented
paths. (`routing/`, the next layer, replaces `Completions.upstream`: many
nodes, one chosen per request.)
"""

from __future__ import annotations

from .app import ProxyApp, make_app
from .server import ProxyServer, make_server
from .usage import UsageEvent

__all__ = ["ProxyApp", "ProxyServer", "UsageEvent", "make_app", "make_server"]
