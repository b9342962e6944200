"""The Anthropic face: ``/v1/messages`` and ``/v1/messages/count_tokens`` for Anthropic clients.

`routes` (the handlers, and `register`: how the app's router gets them),
`translate` (a Messages request as a chat-completions body; the Message and
error bodies), `history` and `blocks` (the conversation and its content
blocks), `answer` (`AnthropicAnswer`: a Response as Messages SSE or one
Message), `body` (the streamed body with pings), `chain` (the stream started
before the upstream answers) and `token_count` (``count_tokens`` by the
upstream's tokenizer).

Imports the proxy's shared modules and the rest of llmchat, never another
face (see `llmchat.proxy.faces`).
"""

from .routes import register

__all__ = ["register"]
