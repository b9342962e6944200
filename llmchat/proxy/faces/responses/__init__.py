"""The Responses face: OpenAI's ``/v1/responses`` for Responses clients (Codex) over chat.

`routes` (the handler, and `register`: how the app's router gets it),
`translate` (a Responses request as a chat-completions body; the liberal rule),
`input` (the ``input`` items as chat messages), `tools` (every declared tool
type as chat function tools) and `memo` (the items this process sent, for
``item_reference``).

Imports the proxy's shared modules and the rest of llmchat, never another
face (see `llmchat.proxy.faces`).
"""

from .routes import register

__all__ = ["register"]
