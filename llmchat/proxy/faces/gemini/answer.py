"""Gemini's answer to a proxied Response: stream chunks, or one GenerateContentResponse."""

from __future__ import annotations

from typing import Any

from ....protocols.gemini import GeminiStream
from ....response import Response
from ...answers import Answer

__all__ = ["GeminiAnswer"]


class GeminiAnswer(Answer):
    """``:streamGenerateContent`` (SSE or a JSON array) and ``:generateContent`` (one body)."""

    def __init__(self, model: str, *, framing: str = "sse", thinking: bool = True) -> None:
        self.model = str(model)
        self.framing = framing
        self.thinking = bool(thinking)

    def translator(self) -> GeminiStream:
        return GeminiStream(self.model, framing=self.framing, thinking=self.thinking)

    def body(self, response: Response) -> dict[str, Any]:
        """One whole GenerateContentResponse for a settled `response`."""
        raise NotImplementedError
