"""Anthropic's words for what an OpenAI chat upstream reports: stop reasons, error types, usage.

Pure functions shared by the stream translator (`anthropic`) and the proxy's
blocking answers, so both name a stop, an error and the token counts alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["anthropic_usage", "error_type_for_status", "stop_reason_for"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_type_for_status(status: int) -> str:
    """The Anthropic ``error.type`` a client expects for HTTP `status`."""
    if isinstance(status, bool) or not isinstance(status, int):
        return "api_error"
    known = _ERROR_TYPES.get(status)
    if known is not None:
        return known
    if 400 <= status < 500:
        return "invalid_request_error"
    return "api_error"


def stop_reason_for(
    finish_reason: str | None,
    used_tools: bool,
    *,
    output_tokens: int | None = None,
    max_tokens: int | None = None,
) -> str:
    """Map an OpenAI ``finish_reason`` to an Anthropic ``stop_reason``.

    `used_tools` matters because several OpenAI-compatible servers end a
    tool-calling turn with ``stop`` (or nothing), while an Anthropic client
    only runs its tools when it sees ``tool_use``. ``content_filter`` is a
    ``refusal``. A ``length`` ending before the client's `max_tokens` (the
    `output_tokens` counted say so) stopped at the context window, not at the
    budget: ``model_context_window_exceeded``, as llama-server ends a
    generation that fills its slot's context.
    """
    if finish_reason in ("tool_calls", "function_call"):
        return "tool_use"
    if finish_reason == "length":
        if output_tokens is not None and max_tokens is not None and output_tokens < max_tokens:
            return "model_context_window_exceeded"
        return "max_tokens"
    if finish_reason == "content_filter":
        return "refusal"
    if used_tools and finish_reason in (None, "", "stop"):
        return "tool_use"
    return "end_turn"


def anthropic_usage(
    prompt_tokens: int | None, cached_tokens: int | None, output_tokens: int | None
) -> dict[str, Any]:
    """Anthropic's ``usage`` from OpenAI's counts, or None where a count is unknown.

    OpenAI's ``prompt_tokens`` includes the cached prompt tokens; Anthropic's
    ``input_tokens`` does not, and names them ``cache_read_input_tokens``
    (what Claude Code shows as cache reads). A chat upstream writes no cache
    of its own on request, so ``cache_creation_input_tokens`` is 0.
    """
    cached = max(0, min(cached_tokens or 0, prompt_tokens or 0))
    usage: dict[str, Any] = {}
    if prompt_tokens is not None:
        usage["input_tokens"] = prompt_tokens - cached
    usage["cache_creation_input_tokens"] = 0
    usage["cache_read_input_tokens"] = cached
    usage["output_tokens"] = output_tokens or 0
    return usage
