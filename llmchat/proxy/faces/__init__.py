"""The proxy's faces: one package per kind of client the proxy serves.

`ollama` (Ollama's ``/api/*``), `anthropic` (``/v1/messages``), `responses`
(OpenAI's ``/v1/responses``) and `openai` (``/v1/chat/completions``,
``/v1/models``, ``/v1/embeddings`` relayed). Each holds its routes, its
request translation (liberal: forward, fold or drop), its history and its
answer shapes.

The rule of this layer: a face imports the proxy's shared modules (the app's
helpers, `upstream`, `answers`, `bodies`, `field_checks`, ...), `proxy.server.hangup`,
`proxy.usage` and the rest of llmchat, but never another face: what two faces
share lives at the proxy root. Only `proxy.app` (the router) imports the
faces. tests/test_proxy_layers.py checks it.
"""
