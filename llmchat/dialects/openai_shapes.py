"""The OpenAI chat wire shapes llmchat reads most, as `TypedDict`s (types only).

A chunk (``chat.completion.chunk``, or a whole ``chat.completion`` read as
one), its usage block and its tool calls, as the OpenAI chat-completions API
documents them. Every key is optional (``total=False``): servers leave any of
them out. They give the reading code (`llmchat.dialects.openai_chat`) checked
key names; the values still come off the wire untrusted, so the reader keeps
its run-time type checks. A `TypedDict` is only a type: nothing here runs.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "OpenAIChoice",
    "OpenAIChunk",
    "OpenAIDelta",
    "OpenAIFunctionCall",
    "OpenAIToolCall",
    "OpenAIUsage",
]


class OpenAIFunctionCall(TypedDict, total=False):
    """A tool call's ``function``: arguments are JSON text (a fragment of it, streamed)."""

    name: str
    arguments: str


class OpenAIToolCall(TypedDict, total=False):
    """One ``tool_calls[*]`` entry, whole (in a message) or a fragment (in a delta)."""

    index: int
    """Which call a streamed fragment belongs to."""
    id: str
    type: str
    function: OpenAIFunctionCall


class _PromptDetails(TypedDict, total=False):
    cached_tokens: int


class _CompletionDetails(TypedDict, total=False):
    reasoning_tokens: int


class OpenAIUsage(TypedDict, total=False):
    """The ``usage`` block; ``input_tokens``/``output_tokens`` are gateways' spellings."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    input_tokens: int
    output_tokens: int
    prompt_tokens_details: _PromptDetails
    input_tokens_details: _PromptDetails
    completion_tokens_details: _CompletionDetails


class OpenAIDelta(TypedDict, total=False):
    """A stream ``delta`` or a whole ``message``: the same members."""

    role: str
    content: str | list[Any] | None
    """Text, or (some servers) a list of parts, ``thinking`` ones among them."""
    reasoning_content: str
    reasoning: str
    refusal: str | None
    tool_calls: list[OpenAIToolCall]


class OpenAIChoice(TypedDict, total=False):
    """One ``choices[*]`` entry: a ``delta`` (streamed), a ``message`` or ``text`` (text API)."""

    index: int
    delta: OpenAIDelta
    message: OpenAIDelta
    text: str
    finish_reason: str | None
    error: Any


class OpenAIChunk(TypedDict, total=False):
    """One stream event's JSON, or a whole blocking body."""

    id: str
    object: str
    created: int
    model: str
    choices: list[OpenAIChoice]
    usage: OpenAIUsage | None
    error: Any
    """An in-band error (a string or ``{"message": ...}``)."""
    citations: list[Any]
