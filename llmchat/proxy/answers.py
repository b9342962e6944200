"""What a proxied upstream Response becomes for each face's client.

An `Answer` knows one face's two shapes: the stream translator that rewrites
the upstream's chunks as they arrive, and the whole body a non-streaming
client gets once the Response has settled. The pure body builders live in
the face modules; this is where a live `Response` meets them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..protocols.anthropic import AnthropicStream, stop_reason_for
from ..protocols.ollama import OllamaStream
from ..protocols.translator import MALFORMED
from ..protocols.usage_counts import usage_counts
from ..redact import Redactor
from ..response import Response
from . import anthropic_face, ollama_face
from .outbound import CleanStream
from .overflow import context_overflow
from .upstream import Failure, client_message, failure_of, is_truncation, openai_chunk

log = logging.getLogger("llmchat.proxy")

__all__ = ["Answer", "AnthropicAnswer", "OllamaAnswer"]


class Answer:
    """How a proxied Response reaches one face's client: a stream translator, or one body."""

    redactor: Redactor = Redactor.of(())
    """The upstream's key forms; the app sets it before any answer is written."""

    def stream(self) -> CleanStream:
        """The face's translator, behind the one door every streamed event goes through:
        its input cleaned of the key and of lone surrogates, its failures in band."""
        return CleanStream(self.translator(), self.redactor)

    def translator(self) -> Any:
        """The face's own stream translator (`stream` is what writes with it)."""
        raise NotImplementedError

    def chunk(self, chunk: Any, response_id: str | None = None) -> dict[str, Any]:
        """The OpenAI chunk the stream translator takes for one upstream `Chunk`."""
        return openai_chunk(chunk, response_id=response_id)

    def body(self, response: Response) -> dict[str, Any]:
        raise NotImplementedError

    def complete(self, response: Response) -> bool:
        """True when the settled `response` is an answer for this face's client, not an error.

        A stop at the token limit is one: the client asked for that limit.
        """
        return response.is_success or is_truncation(response)

    def failure(self, response: Response) -> Failure:
        """What the failed `response` tells this face's client (`failure_of`'s fixed words)."""
        return failure_of(response)

    def refused(self, response: Response) -> Failure | None:
        """A failure this face makes of a Response the upstream finished; None to answer it.

        Every face refuses a tool call without a name or with arguments that are
        not a JSON object (the spec's parser-rejection rule): the client gets a
        502 with the generic words, never a call to run with made-up arguments.
        """
        if _unreadable(response.tool_calls):
            return Failure(502, MALFORMED, "response")
        return None


class OllamaAnswer(Answer):
    """`/api/chat` and `/api/generate`: NDJSON lines, or one JSON body."""

    def __init__(self, body: Mapping[str, Any], shape: str) -> None:
        model = body.get("model")
        self.model = model if isinstance(model, str) else ""
        self.shape = shape
        # "think": false asks for no reasoning; a server may reason anyway, so hide it.
        self.thinking = body.get("think") is not False

    def translator(self) -> OllamaStream:
        return OllamaStream(self.model, shape=self.shape)

    def chunk(self, chunk: Any, response_id: str | None = None) -> dict[str, Any]:
        return openai_chunk(chunk, thinking=self.thinking, response_id=response_id)

    def loaded(self, unload: bool = False) -> dict[str, Any]:
        common: dict[str, Any] = dict(
            model=self.model,
            text="",
            thinking=None,
            done_reason="unload" if unload else "load",
            input_tokens=None,
            output_tokens=None,
            created_at=_now(),
        )
        if self.shape == "chat":
            return ollama_face.chat_body(tool_calls=[], **common)
        return ollama_face.generate_body(**common)

    def body(self, response: Response) -> dict[str, Any]:
        # Raises UndecodableArguments (an AnswerRejected) for a tool call it must not pass on.
        counts = usage_counts(response.usage)  # for an upstream spelling input_tokens
        common: dict[str, Any] = dict(
            model=response.model or self.model,
            text=response.msg,
            thinking=response.reasoning_text if self.thinking else None,
            done_reason=response.finish_reason or "stop",
            input_tokens=_given(response.prompt_tokens, counts.prompt),
            output_tokens=_given(response.completion_tokens, counts.completion),
            total_duration_ns=_nanoseconds(response.timing.total_seconds),
            created_at=_now(),
            cached_tokens=_given(response.cached_tokens, counts.cached),
        )
        if self.shape == "chat":
            return ollama_face.chat_body(tool_calls=list(response.tool_calls), **common)
        return ollama_face.generate_body(**common)


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
        if _unreadable(chunk.tool_calls):
            # Skeid's rule: a parser rejection ends the stream with a generic error,
            # never a tool_use the client would run with made-up input.
            return {"error": {"message": "a tool call's arguments were not valid JSON"}}
        return openai_chunk(chunk, thinking=self.thinking, response_id=response_id)

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
        if _unreadable(response.tool_calls):
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


def _unreadable(calls: Any) -> bool:
    """A complete tool call without a name, or whose arguments are not a JSON object."""
    if any(call.arguments_undecodable or not call.name for call in calls or ()):
        log.warning("upstream sent a tool call without a name or with undecodable arguments")
        return True
    return False


def _now() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond:06d}Z"


def _given(value: int | None, fallback: int | None) -> int | None:
    return value if value is not None else fallback


def _nanoseconds(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)
