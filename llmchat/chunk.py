"""Chunk: one streamed event, as a consumer sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .tools import ToolCall

__all__ = ["Chunk"]


@dataclass(slots=True)  # not frozen: a frozen __init__ costs microseconds per frame
class Chunk:
    """One event of a streamed completion.

    `content` is always a string (often empty); every optional field is None
    when the event did not carry it. A tool call never arrives in pieces: each
    one lands whole on exactly one chunk. Treat a Chunk as read-only: it is
    shared by every iterator of its Response.
    """

    content: str
    """The text this event adds to the answer; ``""`` when it adds none."""
    raw: dict[str, Any] | None = None
    """The decoded event as the provider sent it; None when not kept."""
    is_final: bool = False
    """True on the chunk that carries the finish reason."""
    model: str | None = None
    """The model the provider named on this event; None when it named none."""
    finish_reason: str | None = None
    """The provider's finish reason, on the final chunk only; None elsewhere."""
    tool_calls: list[ToolCall] | None = None
    """Tool calls completed on this chunk, whole; None when none completed."""
    citations: list[Any] | None = None
    """Source citations a search-augmented provider attached; None when none."""
    thinking: str | None = None
    """Reasoning text this event adds; None when it adds none."""
    refusal: str | None = None
    """A fragment of the model's refusal; None when there is none."""
    usage: dict[str, Any] | None = None
    """The provider's usage block, when this event carried one; None otherwise."""
    cached_tokens: int | None = None
    """Prompt tokens served from the prefix cache, when reported; None otherwise."""
