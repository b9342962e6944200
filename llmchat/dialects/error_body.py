"""Reading a remote error body: the provider's own words, or only its size and type.

Pure, no I/O. Every runner and the proxy's upstream read an error-status body
the same way: the message of a JSON error body (``error``, ``message`` or
``detail``, as any dialect's server spells it), else the body's text trimmed;
`ErrorBody` describes a body for a log line that must not quote arbitrary text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .base import inband_error

__all__ = ["ErrorBody", "error_message", "json_error_message"]


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
