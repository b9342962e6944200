"""The Ollama face: Ollama's ``/api/*`` for Ollama clients, over an OpenAI upstream.

`routes` (the handlers, and `register`: how the app's router gets them),
`translate` (``/api/chat`` and ``/api/generate`` requests as chat-completions
bodies; the decisions), `history` (the chat history), `shapes` (the answer
bodies: chat, generate, tags, ps, show, version, error), `answer`
(`OllamaAnswer`: a Response as NDJSON lines or one body), `embed`
(``/api/embed`` and ``/api/embeddings``) and `models` (what the upstream tells
of its model).

Imports the proxy's shared modules and the rest of llmchat, never another
face (see `llmchat.proxy.faces`).
"""

from .routes import register

__all__ = ["register"]
