"""The proxy's faces: one package per kind of client the proxy serves.

`ollama` (Ollama's ``/api/*``), `anthropic` (``/v1/messages``), `responses`
(OpenAI's ``/v1/responses``) and `openai` (``/v1/chat/completions``,
``/v1/models``, ``/v1/embeddings`` relayed). Each holds its routes, its
request translation (liberal: forward, fold or drop), its history and its
answer shapes.

Every face registers the same way: its package's ``register(router,
completions)`` puts its `router.Route` list in the app's `router.Router`, its
handlers answering through the `completions.Completions` it is given and the
request's `ClientExchange`.

The rule of this layer: a face imports the proxy's shared modules
(`completions`, `client_exchange`, `router`, `upstream`, `answers`, `bodies`,
`field_checks`, ...), `proxy.server.hangup`, `proxy.usage` and the rest of
llmchat, but never another face and never `proxy.app`: what two faces share
lives at the proxy root. Only `proxy.app` imports the faces, to register
them. tests/test_proxy_layers.py checks it.
"""
