"""Exact prompt token counts for ``/v1/messages/count_tokens``, from the upstream itself.

Three ways, best first:

- an Anthropic-dialect upstream (api.anthropic.com, llama-server's own
  ``/v1/messages``) counts with its own ``POST /v1/messages/count_tokens``:
  the client's body goes there, with the backend's model when it has one;
- llama-server renders the translated OpenAI body with its chat template
  and tokenizes the prompt as a completion does (`prompt_tokens`), so the
  count equals the ``prompt_tokens`` the same request reports;
- any other upstream with a tokenizer gets `Upstream.count_tokens`'s
  estimate (an upstream without ``/apply-template`` answers 404 or 405 there).

Every failure is a `TokenizerError` with llmchat's words; the route turns it
into the face's 404, and no upstream text reaches the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ....backends.anthropic import Anthropic
from ....tokens import TokenizerError
from ...prompt_tokens import post_for_count, template_count
from ...upstream import Upstream

__all__ = ["count_tokens"]

# What Anthropic's count_tokens takes of a Messages body; the rest would be refused.
_COUNTED: Final = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")


def count_tokens(upstream: Upstream, request: Mapping[str, Any], body: Mapping[str, Any]) -> int:
    """Prompt tokens of the translated OpenAI `request` (the client's Anthropic `body`).

    Raises `TokenizerError` when the upstream cannot count.
    """
    backend = upstream.backend
    if isinstance(backend, Anthropic):
        return _anthropic_count(upstream, backend, body)
    counted = template_count(upstream, request)
    if counted is not None:
        return counted
    return upstream.count_tokens(request)


def _anthropic_count(upstream: Upstream, backend: Anthropic, body: Mapping[str, Any]) -> int:
    sent: dict[str, Any] = {"model": backend.model or body.get("model")}
    sent.update((key, body[key]) for key in _COUNTED if body.get(key) is not None)
    payload = post_for_count(
        upstream, "/messages/count_tokens", sent, "count_tokens", at_root=False
    )
    if payload is None:
        raise TokenizerError("the upstream has no POST /v1/messages/count_tokens")
    count = payload.get("input_tokens") if isinstance(payload, Mapping) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TokenizerError("POST /v1/messages/count_tokens answered no input_tokens")
    return count
