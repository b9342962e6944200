"""Anthropic's answer to a proxied Response: Messages SSE, or one Message body."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from ....protocols.anthropic import AnthropicStream, stop_reason_for
from ....response import Response
from ...answers import Answer, unreadable
from ...overflow import context_overflow
from ...upstream import Failure, client_message, failure_of
from . import translate as anthropic_face

__all__ = ["AnthropicAnswer"]


class AnthropicAnswer(Answer):
    """`/v1/messages`: Messages SSE, or one Message body."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        model = body.get("model")
        self.model = model if isinstance(model, str) else ""
        # Anthropic shows thinking blocks only to a client that turned thinking on.
        thinking = body.get("thinking")
        self.thinking = isinstance(thinking, Mapping) and thinking.get("type") in (
            "enabled",
            "adaptive",
        )
        max_tokens = body.get("max_tokens")
        # Validated by the face's translation before any answer is made.
        self.max_tokens = max_tokens if type(max_tokens) is int else None

    def chunk(self, chunk: Any, response_id: str | None = None) -> dict[str, Any]:
        if unreadable(chunk.tool_calls):
            # Skeid's rule: a parser rejection ends the stream with a generic error,
            # never a tool_use the client would run with made-up input.
            return {"error": {"message": "a tool call's arguments were not valid JSON"}}
        return super().chunk(chunk, response_id)

    def complete(self, response: Response) -> bool:
        """Also a content filter's stop: Anthropic's client reads it as ``refusal``."""
        filtered = (
            response.error_class == "response"
            and not response.is_cancelled
            and response.finish_reason == "content_filter"
        )
        return filtered or super().complete(response)

    def refused(self, response: Response) -> Failure | None:
        """An unreadable tool call is the upstream's unusable answer, never ``input: {}``."""
        if unreadable(response.tool_calls):
            return Failure(502, _UNUSABLE, "response")
        return None

    def translator(self) -> AnthropicStream:
        return AnthropicStream(self.model, max_tokens=self.max_tokens)

    def failure(self, response: Response) -> Failure:
        """`failure_of`, but a prompt over the context is Anthropic's ``prompt is too long``.

        Claude Code compacts its conversation on those words; a prompt that
        fits with a budget that does not is Anthropic's ``input length and
        `max_tokens` exceed context limit``, on which it lowers ``max_tokens``.
        Only the upstream's token counts travel, never its text.
        """
        failure = failure_of(response)
        overflow = context_overflow(response)
        if overflow is None:
            return failure
        message = "prompt is too long for the model's context window"
        prompt, context = overflow.prompt_tokens, overflow.context_tokens
        if overflow.budget_only and self.max_tokens is not None:
            # Anthropic's words for it: Claude Code then retries with a max_tokens
            # that fits (context - prompt - 1000) instead of compacting a prompt that fits.
            message = (
                f"input length and `max_tokens` exceed context limit: {prompt} + "
                f"{self.max_tokens} > {context}, decrease input length or `max_tokens` "
                "and try again"
            )
        elif prompt is not None and context is not None and not overflow.budget_only:
            message = f"prompt is too long: {prompt} tokens > {context} maximum"
        return Failure(400, message, failure.error_class)

    def body(self, response: Response) -> dict[str, Any]:
        return anthropic_face.message_body(
            model=response.model or self.model,
            message_id="msg_" + (response.id or uuid.uuid4().hex),
            text=response.msg,
            thinking=response.reasoning_text if self.thinking else None,
            tool_calls=list(response.tool_calls),
            stop_reason=stop_reason_for(
                response.finish_reason,
                bool(response.tool_calls),
                output_tokens=response.completion_tokens,
                max_tokens=self.max_tokens,
            ),
            input_tokens=response.prompt_tokens,
            output_tokens=response.completion_tokens,
            cached_tokens=response.cached_tokens,
        )


_UNUSABLE = client_message("response", None)
