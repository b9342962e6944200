"""Token counts from an upstream ``usage`` block, whichever spelling the upstream used.

OpenAI chat servers write ``prompt_tokens``/``completion_tokens``; servers
that borrow the Responses or Anthropic vocabulary write
``input_tokens``/``output_tokens``. Cached prompt tokens come as
``prompt_tokens_details.cached_tokens`` (OpenAI, llama-server, vLLM) or
``input_tokens_details.cached_tokens`` (Responses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .chunk_fields import int_or_none

__all__ = ["UsageCounts", "usage_counts"]


class UsageCounts(NamedTuple):
    """Prompt, completion and cached-prompt tokens; None where the block said nothing."""

    prompt: int | None
    completion: int | None
    cached: int | None


def usage_counts(usage: Any) -> UsageCounts:
    """The counts `usage` reports; all None when it is not an object."""
    if not isinstance(usage, Mapping):
        return UsageCounts(None, None, None)
    return UsageCounts(
        _first(usage, "prompt_tokens", "input_tokens"),
        _first(usage, "completion_tokens", "output_tokens"),
        _cached(usage),
    )


def _first(usage: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = int_or_none(usage.get(name))
        if value is not None:
            return value
    return None


def _cached(usage: Mapping[str, Any]) -> int | None:
    for block in ("prompt_tokens_details", "input_tokens_details"):
        details = usage.get(block)
        if isinstance(details, Mapping):
            value = int_or_none(details.get("cached_tokens"))
            if value is not None:
                return value
    return None
