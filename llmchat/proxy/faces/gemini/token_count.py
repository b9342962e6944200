"""Exact prompt token counts for ``:countTokens``, from the upstream itself.

Three ways, best first (as the Anthropic face counts):

- a Gemini upstream counts with its own ``POST /models/{model}:countTokens``:
  the client's request goes there (as a ``generateContentRequest``), with
  the backend's model when it has one;
- llama-server renders the translated OpenAI body with its chat template and
  tokenizes it as a completion does (`prompt_tokens.template_count`): the
  count equals the ``promptTokenCount`` the same request reports;
- any other upstream with a tokenizer gets `Upstream.count_tokens`'s estimate.

Every failure is a `TokenizerError`; the route answers Gemini's 501
``UNIMPLEMENTED`` and no upstream text reaches the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ....backends.gemini import Gemini, model_resource
from ....tokens import TokenizerError
from ...prompt_tokens import post_for_count, template_count
from ...upstream import Upstream

__all__ = ["count_tokens"]

# What a GenerateContentRequest inside countTokens may hold.
_COUNTED: Final = ("contents", "systemInstruction", "tools", "toolConfig", "generationConfig")


def count_tokens(
    upstream: Upstream, request: Mapping[str, Any], body: Mapping[str, Any], model: str
) -> int:
    """Prompt tokens of the translated OpenAI `request` (the client's Gemini request `body`
    for `model`). Raises `TokenizerError` when the upstream cannot count."""
    backend = upstream.backend
    if isinstance(backend, Gemini):
        return _gemini_count(upstream, backend, body, model)
    counted = template_count(upstream, request)
    if counted is not None:
        return counted
    return upstream.count_tokens(request)


def _gemini_count(upstream: Upstream, backend: Gemini, body: Mapping[str, Any], model: str) -> int:
    resource = model_resource(backend.model or model)
    inner: dict[str, Any] = {"model": resource}
    inner.update((key, body[key]) for key in _COUNTED if body.get(key) is not None)
    route = f"/{resource}:countTokens"
    payload = post_for_count(
        upstream, route, {"generateContentRequest": inner}, "countTokens", at_root=False
    )
    if payload is None:
        raise TokenizerError("the upstream has no countTokens")
    count = payload.get("totalTokens") if isinstance(payload, Mapping) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TokenizerError("countTokens answered no totalTokens")
    return count
