"""An upstream's "the prompt does not fit the context" refusal, recognised for the faces.

llama-server refuses such a request before any token with HTTP 400 and
``request (3009 tokens) exceeds the available context size (1024 tokens)``;
vLLM and OpenAI say ``maximum context length is N tokens``. Only these
wordings count: a message that merely mentions a context is any other 400.
A client that can act on it (Claude Code compacts its conversation when it
reads Anthropic's ``prompt is too long``) needs to be told in its own words;
only the counts travel, and every other upstream message still stays out of
the client's answer.
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
# OpenAI and vLLM: "This model's maximum context length is 4096 tokens. However, your
# messages resulted in 5000 tokens" / "you requested 5000 tokens (4000 in the messages, ...";
# newer vLLM: "... is 32768 tokens and your request has 20000 input tokens (128000 > ...)".
_MAXIMUM: Final = re.compile(r"maximum context length is (\d{1,12}) tokens")
_PROMPT: Final = re.compile(
    r"resulted in (\d{1,12}) tokens|(\d{1,12}) in the messages|has (\d{1,12}) input tokens"
)
_STATUSES: Final = frozenset({400, 413, 422})


@dataclass(frozen=True)
class ContextOverflow:
    """The prompt did not fit; the counts when the upstream gave them (only numbers travel).

    `budget_only` says the prompt itself fits (`prompt_tokens` <= `context_tokens`,
    both known) and only the completion's budget on top of it does not.
    """

    prompt_tokens: int | None = None
    context_tokens: int | None = None
    budget_only: bool = False


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
    maximum = _MAXIMUM.search(message)
    if maximum is None:
        return None
    context = int(maximum.group(1))
    prompt = _PROMPT.search(message)
    counted = int(next(filter(None, prompt.groups()))) if prompt is not None else None
    if counted is None:
        return ContextOverflow()
    # The prompt may fit, and only the completion's budget with it not.
    return ContextOverflow(counted, context, budget_only=counted <= context)
