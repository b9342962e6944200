"""Exact prompt token counts for ``/v1/messages/count_tokens``, from the upstream itself.

Three ways, best first:

- an Anthropic-dialect upstream (api.anthropic.com, llama-server's own
  ``/v1/messages``) counts with its own ``POST /v1/messages/count_tokens``:
  the client's body goes there, with the backend's model when it has one;
- llama-server renders the translated OpenAI body with its chat template
  (``POST /apply-template``: messages, tools and reasoning knobs exactly as a
  completion would render them) and tokenizes the prompt as a completion
  does (``POST /tokenize`` with ``add_special``), so the count equals the
  ``prompt_tokens`` the same request reports;
- any other upstream with a tokenizer gets `Upstream.count_tokens`'s
  estimate (an upstream without ``/apply-template`` answers 404 or 405 there).

Every failure is a `TokenizerError` with llmchat's words; the route turns it
into the face's 404, and no upstream text reaches the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ....backends.anthropic import Anthropic
from ....backends.openai_common import OpenAICommon
from ....tokens import TOKENIZE_TIMEOUT, TokenizerError
from ...upstream import Upstream

__all__ = ["count_tokens"]

# What Anthropic's count_tokens takes of a Messages body; the rest would be refused.
_COUNTED: Final = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")
# OpenAI members that change nothing a template renders; the rest go to /apply-template.
_NOT_RENDERED: Final = frozenset({"stream", "stream_options", "max_tokens", "n"})
_NO_ROUTE: Final = frozenset({404, 405, 501})


def count_tokens(upstream: Upstream, request: Mapping[str, Any], body: Mapping[str, Any]) -> int:
    """Prompt tokens of the translated OpenAI `request` (the client's Anthropic `body`).

    Raises `TokenizerError` when the upstream cannot count.
    """
    backend = upstream.backend
    if isinstance(backend, Anthropic):
        return _anthropic_count(upstream, backend, body)
    if isinstance(backend, OpenAICommon) and backend.tokenize_route == ("/tokenize", "content"):
        counted = _template_count(upstream, backend, request)
        if counted is not None:
            return counted
    return upstream.count_tokens(request)


def _anthropic_count(upstream: Upstream, backend: Anthropic, body: Mapping[str, Any]) -> int:
    sent: dict[str, Any] = {"model": backend.model or body.get("model")}
    sent.update((key, body[key]) for key in _COUNTED if body.get(key) is not None)
    payload = _post(upstream, "/messages/count_tokens", sent, "count_tokens", at_root=False)
    if payload is None:
        raise TokenizerError("the upstream has no POST /v1/messages/count_tokens")
    count = payload.get("input_tokens") if isinstance(payload, Mapping) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TokenizerError("POST /v1/messages/count_tokens answered no input_tokens")
    return count


def _template_count(
    upstream: Upstream, backend: OpenAICommon, request: Mapping[str, Any]
) -> int | None:
    """llama-server's own count of the rendered prompt; None when it has no /apply-template."""
    sent = {key: value for key, value in request.items() if key not in _NOT_RENDERED}
    if backend.model is not None:
        sent["model"] = backend.model
    payload = _post(upstream, "/apply-template", sent, "/apply-template")
    if payload is None:
        return None
    prompt = payload.get("prompt") if isinstance(payload, Mapping) else None
    if not isinstance(prompt, str):
        raise TokenizerError("POST /apply-template answered no prompt")
    # A completion tokenizes its prompt with the model's special tokens (BOS) added.
    tokenized = _post(
        upstream,
        "/tokenize",
        {"content": prompt, "add_special": True, "parse_special": True},
        "/tokenize",
    )
    tokens = tokenized.get("tokens") if isinstance(tokenized, Mapping) else None
    if not isinstance(tokens, list):
        raise TokenizerError("POST /tokenize answered no token list")
    return len(tokens)


def _post(
    upstream: Upstream, route: str, body: Mapping[str, Any], label: str, *, at_root: bool = True
) -> Any:
    """The JSON answer of one bounded POST to `route`; None when the server has no such route.

    At the server root unless `at_root` is False (under the api_url).
    """
    status, payload, note = upstream.post_json(
        route, body, limit=TOKENIZE_TIMEOUT, at_root=at_root, label=label
    )
    if status in _NO_ROUTE:
        return None
    if note is not None:
        raise TokenizerError(f"the upstream's {label} failed: {note}")
    return payload
