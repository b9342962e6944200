"""Exact prompt token counts from the upstream itself, for the faces' count routes.

llama-server renders an OpenAI chat body with its chat template
(``POST /apply-template``: messages, tools and reasoning knobs exactly as a
completion would render them) and tokenizes the prompt as a completion does
(``POST /tokenize`` with ``add_special``), so the count equals the
``prompt_tokens`` the same request reports. Shared by the Anthropic face's
``count_tokens`` and Gemini's ``:countTokens``; each face adds its own
dialect's native route (Anthropic's, Gemini's) before this, and
`Upstream.count_tokens`' estimate after it.

Every failure is a `TokenizerError` with llmchat's words; no upstream text
reaches the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..backends.openai_common import OpenAICommon
from ..tokens import TOKENIZE_TIMEOUT, TokenizerError
from .upstream import Upstream

__all__ = ["post_for_count", "template_count"]

# OpenAI members that change nothing a template renders; the rest go to /apply-template.
_NOT_RENDERED: Final = frozenset({"stream", "stream_options", "max_tokens", "n"})
_NO_ROUTE: Final = frozenset({404, 405, 501})


def template_count(upstream: Upstream, request: Mapping[str, Any]) -> int | None:
    """llama-server's own count of the OpenAI chat `request`'s rendered prompt; None when the
    upstream is not llama-server's kind or has no /apply-template."""
    backend = upstream.backend
    if not isinstance(backend, OpenAICommon) or backend.tokenize_route != ("/tokenize", "content"):
        return None
    sent = {key: value for key, value in request.items() if key not in _NOT_RENDERED}
    if backend.model is not None:
        sent["model"] = backend.model
    payload = post_for_count(upstream, "/apply-template", sent, "/apply-template")
    if payload is None:
        return None
    prompt = payload.get("prompt") if isinstance(payload, Mapping) else None
    if not isinstance(prompt, str):
        raise TokenizerError("POST /apply-template answered no prompt")
    # A completion tokenizes its prompt with the model's special tokens (BOS) added.
    tokenized = post_for_count(
        upstream,
        "/tokenize",
        {"content": prompt, "add_special": True, "parse_special": True},
        "/tokenize",
    )
    tokens = tokenized.get("tokens") if isinstance(tokenized, Mapping) else None
    if not isinstance(tokens, list):
        raise TokenizerError("POST /tokenize answered no token list")
    return len(tokens)


def post_for_count(
    upstream: Upstream, route: str, body: Mapping[str, Any], label: str, *, at_root: bool = True
) -> Any:
    """The JSON answer of one bounded POST to `route`; None when the server has no such route.

    At the server root unless `at_root` is False (under the api_url). Raises
    `TokenizerError` for any other failure.
    """
    status, payload, note = upstream.post_json(
        route, body, limit=TOKENIZE_TIMEOUT, at_root=at_root, label=label
    )
    if status in _NO_ROUTE:
        return None
    if note is not None:
        raise TokenizerError(f"the upstream's {label} failed: {note}")
    return payload
