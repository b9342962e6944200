"""Gemini's ``Model`` resource and model list, from what the upstream says; pure.

``GET /v1beta/models`` lists every model the upstream (or the routing
config's aliases) serves; ``GET /v1beta/models/{model}`` describes any name
asked for, since the proxy serves whatever name routing resolves. The token
limits are the upstream's context window when it tells one (its output
limit when it tells one, else the window: a model may write until it is
full); an upstream that tells none gets no limits, rather than made-up ones.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["METHODS", "model_body", "models_body"]

METHODS: Final = ("generateContent", "streamGenerateContent", "countTokens")
"""``supportedGenerationMethods``: the model methods the face serves."""


def model_body(name: str, limits: dict[str, Any]) -> dict[str, Any]:
    """One Gemini ``Model`` for the client's model `name` (with or without ``models/``)."""
    bare = name[len("models/") :] if name.startswith("models/") else name
    body: dict[str, Any] = {
        "name": f"models/{bare}",
        "baseModelId": bare,
        "version": "llmchat-proxy",
        "displayName": bare,
        "description": f"{bare}, served by llmchat proxy",
    }
    window = _count(limits.get("context_length"))
    output = _count(limits.get("max_output_tokens")) or window
    if window is not None:
        body["inputTokenLimit"] = window
    if output is not None:
        body["outputTokenLimit"] = output
    body["supportedGenerationMethods"] = list(METHODS)
    return body


def models_body(names: list[str], limits: dict[str, Any]) -> dict[str, Any]:
    """``ListModelsResponse``: every name, in one page (no ``nextPageToken``)."""
    return {"models": [model_body(name, limits) for name in names]}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
