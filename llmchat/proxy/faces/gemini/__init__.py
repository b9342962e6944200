"""The Gemini face: ``/v1beta/models/{model}:generateContent`` and friends for Gemini clients.

`routes` (the handlers and `register`: a model's methods as prefix routes,
the model list), `translate` (a GenerateContentRequest as a chat-completions
body), `history` (``contents`` as chat messages, function calls and results
paired by synthesized ids, thought signatures kept for a Gemini upstream),
`schema` (Gemini's OpenAPI ``Schema`` as JSON Schema, Gemini's type names in a
JSON Schema), `spelling` (snake_case field names read as camelCase), `answer`
(`GeminiAnswer`: a Response as Gemini stream chunks or one
GenerateContentResponse), `models` (the Model resource) and `token_count`
(``countTokens`` by the upstream's tokenizer).

Gemini CLI and google-genai reach it with their base URL set to the proxy.
The client key is accepted as ``x-goog-api-key``, ``?key=`` or a bearer
token (the app's check). Imports the proxy's shared modules and the rest of
llmchat, never another face (see `llmchat.proxy.faces`).
"""

from .routes import register

__all__ = ["register"]
