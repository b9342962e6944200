"""Gemini's answer to a proxied Response: stream chunks (SSE or a JSON array), or one body."""

from __future__ import annotations

import uuid
from typing import Any

from ....protocols.gemini import GeminiStream
from ....protocols.gemini_parts import (
    finish_reason_for,
    function_call_part,
    generate_content_response,
    usage_metadata,
)
from ....response import Response
from ...answers import Answer

__all__ = ["GeminiAnswer"]


class GeminiAnswer(Answer):
    """``:streamGenerateContent`` (`framing` ``"sse"`` with ``alt=sse``, else ``"array"``)
    and ``:generateContent`` (`body`). `thinking` False hides the upstream's reasoning
    (a client whose ``thinkingConfig`` asked for no thoughts)."""

    def __init__(self, model: str, *, framing: str = "sse", thinking: bool = True) -> None:
        if framing not in ("sse", "array"):
            raise ValueError(f"framing must be 'sse' or 'array', not {framing!r}")
        self.model = str(model)
        self.framing = framing
        self.thinking = bool(thinking)

    def translator(self) -> GeminiStream:
        return GeminiStream(self.model, framing=self.framing, thinking=self.thinking)

    def complete(self, response: Response) -> bool:
        """Also a content filter's stop: Gemini answers it as ``finishReason: SAFETY``."""
        filtered = (
            response.error_class == "response"
            and not response.is_cancelled
            and response.finish_reason == "content_filter"
        )
        return filtered or super().complete(response)

    def body(self, response: Response) -> dict[str, Any]:
        """One whole ``GenerateContentResponse`` for the settled `response`.

        Thought part, text part, then one ``functionCall`` part per call; a turn
        with none of them has a content without parts (Gemini's empty answer).
        Raises `UndecodableArguments` (an `AnswerRejected`) for a call it must
        not pass on (`refused` turns those away first).
        """
        parts: list[dict[str, Any]] = []
        reasoning = response.reasoning_text if self.thinking else None
        if reasoning:
            parts.append({"text": reasoning, "thought": True})
        if response.msg:
            parts.append({"text": response.msg})
        parts += [function_call_part(call) for call in response.tool_calls]
        usage = usage_metadata(
            response.prompt_tokens,
            response.completion_tokens,
            reasoning=response.reasoning_tokens,
            cached=response.cached_tokens,
        )
        return generate_content_response(
            parts or None,
            model=response.model or self.model,
            response_id=response.id or uuid.uuid4().hex,
            finish_reason=finish_reason_for(response.finish_reason),
            usage=usage,
        )
