"""What every stream translator shares: the call shape, the end state and the chunk guards.

A translator turns decoded OpenAI chat-completion chunks into another
client's wire format. This base reads what is common to every chunk (the
model, usage, the first choice and its finish reason), contains any failure
at one boundary, and keeps the finished / errored state; a subclass says
what one choice's delta becomes (`_choice`) and writes `finish` and
`error_event` in its own format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .chunk_fields import int_or_none, reasoning_text, upstream_error_message

__all__ = ["MALFORMED", "StreamTranslator"]

MALFORMED = "Upstream sent a stream chunk that could not be translated"
"""The one message a client gets for a chunk the translator could not read:
parser and provider details are never reflected to it."""


CLOSE_FAILED = "The stream could not be closed"
"""The message of the error event that ends a stream whose closing events could not be written."""


class StreamTranslator:
    """Base of `OllamaStream` and `AnthropicStream`; see their docs for each format."""

    content_type = ""
    """The response's Content-Type."""

    def __init__(self, model: str) -> None:
        self._model = str(model)
        self._finish_reason: str | None = None
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._content_bytes = 0
        self._chunk_id: str | None = None  # the first id an upstream chunk carried
        self._finished = False
        self._errored = False
        self._out: list[bytes] = []  # the events of the call under way (event-stream formats)

    @property
    def errored(self) -> bool:
        """True once `error_event` ended the stream (the request failed, whatever its status)."""
        return self._errored

    def start(self) -> bytes:
        """Bytes to write before the first delta; ``b""`` unless the format has a prologue."""
        return b""

    def delta(self, chunk: Any) -> bytes:
        """What one decoded OpenAI chunk becomes (``b""`` for nothing).

        A chunk that is not an object, or that cannot be read, ends the stream
        with a generic error; an upstream ``error`` object ends it with that
        error's message. Nothing comes after the stream has finished.
        """
        if self._finished:
            return b""
        if not isinstance(chunk, Mapping):
            return self.error_event(502, MALFORMED)
        error = chunk.get("error")
        if error is not None:
            return self.error_event(500, upstream_error_message(error))
        try:
            self._note(chunk)
            choices = chunk.get("choices")
            if choices is None:
                return b""
            if not isinstance(choices, list):
                raise TypeError("choices is not a list")
            if not choices:
                return b""
            choice = choices[0]
            if not isinstance(choice, Mapping):
                raise TypeError("choice is not an object")
            delta = choice.get("delta")
            reason = choice.get("finish_reason")
            reason = reason if isinstance(reason, str) and reason else None
            if reason is not None:
                self._finish_reason = reason
            elif isinstance(delta, Mapping) and delta.get("tool_calls") is None:
                # The common chunk, text or reasoning only: the format's template path.
                content = delta.get("content")
                content = content if isinstance(content, str) else ""
                return self._texts(content, reasoning_text(delta))
            return self._choice(delta if isinstance(delta, Mapping) else {}, reason)
        except Exception:
            return self._salvage() + self.error_event(502, MALFORMED)

    def text_delta(
        self,
        content: str,
        reasoning: str = "",
        model: str | None = None,
        chunk_id: str | None = None,
    ) -> bytes:
        """`delta` of the common chunk, given as its parts: what a chunk with this `model`
        and `chunk_id` whose one choice's delta holds only `content` and `reasoning` text
        (either may be ``""``), with no finish reason, no usage and no tool call, becomes.

        The same bytes as `delta` of that chunk, without building it: the proxy's
        per-token path. None for `model` or `chunk_id` is a chunk without that field.
        """
        if type(content) is not str or type(reasoning) is not str:
            raise TypeError("content and reasoning must be str")
        if self._finished:
            return b""
        if model:
            self._model = model
        if chunk_id and self._chunk_id is None:
            self._chunk_id = chunk_id
        if not content and not reasoning:
            return b""
        try:
            return self._texts(content, reasoning)
        except Exception:
            return self._salvage() + self.error_event(502, MALFORMED)

    # finish(reason=None, input_tokens=None, output_tokens=None) is each format's
    # own, its first parameter named in that format's vocabulary (API.md).

    def error_event(self, status: int, message: str) -> bytes:
        """End the stream with the format's error; ``b""`` if it already ended."""
        raise NotImplementedError

    def usage(self) -> tuple[int | None, int | None, int]:
        """``(input_tokens, output_tokens, content_bytes)`` the stream carried.

        `content_bytes` counts the UTF-8 bytes of answer text written (not
        reasoning): an observation for the usage record, never a token estimate.
        """
        return self._input_tokens, self._output_tokens, self._content_bytes

    # -- for subclasses ---------------------------------------------------

    def _note(self, chunk: Mapping[str, Any]) -> None:
        """Record what any chunk may carry: the model it names, its id and usage counts."""
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self._model = model
        chunk_id = chunk.get("id")
        if self._chunk_id is None and isinstance(chunk_id, str) and chunk_id:
            self._chunk_id = chunk_id
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._note_usage(usage)

    def _note_usage(self, usage: Mapping[str, Any]) -> None:
        """Record a chunk's usage counts; a format that reads more extends this."""
        prompt = int_or_none(usage.get("prompt_tokens"))
        completion = int_or_none(usage.get("completion_tokens"))
        if prompt is not None:
            self._input_tokens = prompt
        if completion is not None:
            self._output_tokens = completion

    def _override_counts(self, input_tokens: Any, output_tokens: Any) -> None:
        """`finish`'s token arguments win over what the stream reported."""
        if input_tokens is not None:
            self._input_tokens = int(input_tokens)
        if output_tokens is not None:
            self._output_tokens = int(output_tokens)

    def _choice(self, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
        """What the first choice's delta becomes; `finish_reason` is set on the finish chunk.

        May raise to reject the chunk (the stream then ends with `MALFORMED`).
        """
        raise NotImplementedError

    def _texts(self, content: str, reasoning: str) -> bytes:
        """What a delta of only `content` and `reasoning` text becomes (no finish, no tools).

        A format writes this from pre-encoded templates; by default it is `_choice`'s.
        """
        delta = {"content": content}
        if reasoning:
            delta["reasoning_content"] = reasoning
        return self._choice(delta, None)

    def _closing(self, build: Callable[[], bytes]) -> bytes:
        """The stream's last bytes from `build`, which ends the stream; if it raises (a
        value the encoder cannot write), the error event with `CLOSE_FAILED` instead."""
        try:
            data = build()
        except Exception:
            self._out = []
            return self.error_event(500, CLOSE_FAILED)
        self._finished = True
        return data

    def _take(self) -> bytes:
        """The events gathered in `_out` so far, joined; `_out` starts over."""
        data, self._out = b"".join(self._out), []
        return data

    def _salvage(self) -> bytes:
        """Bytes already built for a chunk that then failed, to send before the error.

        By default the events gathered in `_out`: they are consistent with the
        state, so the error follows exactly what the client has seen.
        """
        return self._take()
