"""Rewrites a decoded OpenAI chat-completion stream as Gemini ``streamGenerateContent`` chunks.

(Interface stub: the translator is being written on branch gemini-stream.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .translator import StreamTranslator

__all__ = ["GeminiStream"]

_FRAMINGS = ("sse", "array")


class GeminiStream(StreamTranslator):
    """Translate one OpenAI stream into Gemini GenerateContentResponse chunks.

    `framing` is ``"sse"`` (``?alt=sse``: ``data: {...}`` events) or ``"array"``
    (the JSON array a client reads without ``alt=sse``). With `thinking` False
    reasoning is not written as thought parts.
    """

    def __init__(self, model: str, *, framing: str = "sse", thinking: bool = True) -> None:
        if framing not in _FRAMINGS:
            raise ValueError(f"framing must be 'sse' or 'array', not {framing!r}")
        super().__init__(model)
        self._framing = framing
        self._thinking = bool(thinking)
        self.content_type = "text/event-stream" if framing == "sse" else "application/json"

    def finish(
        self,
        finish_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> bytes:
        """The last chunk (finishReason, usageMetadata); ``b""`` if the stream already ended."""
        raise NotImplementedError

    def error_event(self, status: int, message: str) -> bytes:
        """End the stream with Gemini's ``{"error": {...}}`` in band; ``b""`` if already ended."""
        raise NotImplementedError

    def _choice(self, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
        raise NotImplementedError
