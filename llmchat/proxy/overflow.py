"""An upstream's "the prompt does not fit the context" refusal, recognised for the faces.

llama-server refuses such a request before any token with HTTP 400 and
``request (3009 tokens) exceeds the available context size (1024 tokens)``;
vLLM and OpenAI say ``maximum context length is N tokens``. A client that can
act on it (Claude Code compacts its conversation when it reads Anthropic's
``prompt is too long``) needs to be told in its own words; every other
upstream message still stays out of the client's answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ..response import Response

__all__ = ["ContextOverflow", "context_overflow"]

_LLAMACPP: Final = re.compile(
    r"request \((\d{1,12}) tokens\) exceeds the available context size \((\d{1,12}) tokens\)"
)
_GENERIC: Final = re.compile(
    r"(maximum context length|context (size|window|length)).{0,80}(exceed|too long|maximum)"
    r"|(exceed|too long|longer than).{0,80}context (size|window|length)",
    re.IGNORECASE | re.DOTALL,
)
_STATUSES: Final = frozenset({400, 413, 422})


@dataclass(frozen=True)
class ContextOverflow:
    """The prompt did not fit; the counts when the upstream gave them (only numbers travel)."""

    prompt_tokens: int | None = None
    context_tokens: int | None = None


def context_overflow(response: Response) -> ContextOverflow | None:
    """The overflow `response` failed with, when its error status body says so; else None."""
    if response.error_class != "http" or response.error_status not in _STATUSES:
        return None
    body = response._error_body
    message = body.message if body is not None else None
    if not message:
        return None
    found = _LLAMACPP.search(message)
    if found is not None:
        return ContextOverflow(int(found.group(1)), int(found.group(2)))
    if _GENERIC.search(message[:2000]):
        return ContextOverflow()
    return None
