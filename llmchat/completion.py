"""Reading OpenAI-compatible completion bodies: error bodies, and `parse_completion`.

The deciding lives in `llmchat.pipeline` (one judge for every path) and the
reading of payloads in `llmchat.dialects.openai_chat`; the names other code
imported from here are re-exported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .dialects.openai_chat import (
    Delta,
    decode_chat,
    decode_text,
    inband_error,
    no_finish,
    usage_fields,
)
from .pipeline.judge import ERR_FILTER, ERR_LENGTH, ERR_PROVIDER, SUCCESS_REASONS, judge_finish
from .tools import ToolCall

__all__ = [
    "ERR_FILTER",
    "ERR_LENGTH",
    "ERR_PROVIDER",
    "SUCCESS_REASONS",
    "Completion",
    "ErrorBody",
    "error_message",
    "inband_error",
    "json_error_message",
    "judge_finish",
    "no_finish",
    "parse_completion",
    "usage_fields",
]


@dataclass(slots=True)
class Completion:
    """What one non-streamed completion body says."""

    text: str = ""
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    id: str | None = None
    citations: list[Any] | None = None
    error: str | None = None
    """An in-band provider error (top-level or a choice's `error`); None when none."""


def parse_completion(payload: Mapping[str, Any], *, kind: str = "chat") -> Completion:
    """Read a ``chat.completion`` (`kind="chat"`) or ``text_completion`` body.

    The dialect decoder's reading, gathered; never raises on odd shapes.
    """
    decoded = decode_text(payload) if kind == "text" else decode_chat(payload)
    delta = Delta(text=decoded, choice=True) if isinstance(decoded, str) else decoded
    model, pid = payload.get("model"), payload.get("id")
    return Completion(
        text=delta.text,
        reasoning=delta.thinking or None,
        refusal=delta.refusal or None,
        tool_calls=list(delta.calls or ()),
        finish_reason=delta.finish_reason,
        model=model if isinstance(model, str) and model else None,
        id=pid if isinstance(pid, str) and pid else None,
        citations=delta.citations,
        error=delta.error,
    )


@dataclass(frozen=True, slots=True)
class ErrorBody:
    """What an error-status body was, for a log line that must not quote arbitrary text."""

    size: int
    """The body's length in bytes."""
    content_type: str | None
    """The response's ``Content-Type``; None when it sent none."""
    message: str | None
    """The message of a JSON error body; None when the body was not JSON with a message."""

    def describe(self) -> str:
        """The JSON message, or only the body's size and content type."""
        if self.message is not None:
            return self.message
        return f"{self.size} bytes of {self.content_type or 'unknown content type'}"


def json_error_message(payload: Any) -> str | None:
    """The message of a JSON error body (``error``, ``message`` or ``detail``); None if none."""
    if isinstance(payload, Mapping):
        for key in ("error", "message", "detail"):
            found = inband_error(payload.get(key))
            if found:
                return found
    return None


def error_message(payload: Any, text: str, status: int | None = None) -> str:
    """The provider's own words for a failure, from a JSON error body or the text."""
    found = json_error_message(payload)
    if found:
        return found
    stripped = text.strip()
    if stripped:
        return stripped if len(stripped) <= 500 else stripped[:497] + "..."
    return f"HTTP {status}" if status is not None else "Empty response body"
