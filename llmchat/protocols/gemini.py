"""Rewrites a decoded OpenAI chat-completion stream as Gemini ``streamGenerateContent`` chunks.

A Gemini client reads a stream of ``GenerateContentResponse`` objects, each
one candidate (index 0, ``content.role`` ``"model"``) with a few parts:
answer text as ``{"text": ...}``, reasoning as ``{"text": ..., "thought":
true}`` and each tool call as one whole ``{"functionCall": {"name", "args"}}``
(Gemini never streams a call's arguments in pieces: the OpenAI fragments are
assembled, and the calls go out when the upstream finishes). The last chunk
carries ``finishReason`` and ``usageMetadata``; every chunk names
``modelVersion`` and ``responseId``.

Two framings, as the Gemini API has them: ``"sse"`` (``?alt=sse``: each chunk
a ``data: {...}`` event ended by ``\\r\\n\\r\\n``) and ``"array"`` (without
``alt=sse``: one JSON array written as it grows, ``[{...}\\n,\\r\\n{...}\\n]``).

An error after the stream began is Gemini's ``{"error": {"code", "message",
"status"}}``: in the array, its last element; in SSE, that object bare, without
``data:``, as Vertex writes it mid-stream. google-genai (Python) raises
`APIError` for it either way, but js-genai (Gemini CLI) only recognises the
bare object: a ``data:`` event would reach it as a chunk with no candidate.
No blank line follows it, so a reader that got it joined to the event before
still fails (js-genai: "Incomplete JSON segment") rather than skipping it.
A tool call whose arguments are not a JSON object ends the stream with that
error (`MALFORMED`), never with the call sent as ``"args": {}``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from .. import wire_json
from ..tools import ToolCallAssembler
from .chunk_fields import reasoning_text, tool_call_list
from .gemini_parts import (
    encode_ordered,
    error_body,
    finish_reason_for,
    function_call_part,
    generate_content_response,
    reasoning_tokens_of,
    usage_metadata,
)
from .translator import StreamTranslator
from .usage_counts import usage_counts

__all__ = ["GeminiStream"]

_FRAMINGS: Final = ("sse", "array")
_UNFINISHED_TOOL_CALL = "Upstream stream ended inside an unfinished tool call"

# The chunk of a text delta, pre-encoded in the order `encode_ordered` writes the same
# chunk: the lead (``data: ``, or the array's ``[`` / separator), the escaped texts, the
# model and response id spliced in, then the tail. One format per token instead of a
# dict built and encoded.
_HEAD: Final = b'%b{"candidates":[{"content":{"parts":['
_FOOT: Final = b'],"role":"model"},"index":0}],"modelVersion":%b,"responseId":%b}%b'
_TEXT_CHUNK: Final = _HEAD + b'{"text":%b}' + _FOOT
_THOUGHT_CHUNK: Final = _HEAD + b'{"text":%b,"thought":true}' + _FOOT
_BOTH_CHUNK: Final = _HEAD + b'{"text":%b,"thought":true},{"text":%b}' + _FOOT
_SSE_LEAD: Final = b"data: "
_SSE_TAIL: Final = b"\r\n\r\n"
_ARRAY_OPEN: Final = b"["
_ARRAY_NEXT: Final = b"\n,\r\n"
_ARRAY_CLOSE: Final = b"\n]"
_json_string = wire_json.json_string


class GeminiStream(StreamTranslator):
    """Translate one OpenAI stream into Gemini ``GenerateContentResponse`` chunks.

    `model` is the ``modelVersion`` until an upstream chunk names its own.
    `framing` is ``"sse"`` (content type ``text/event-stream``) or ``"array"``
    (``application/json``). With `thinking` False reasoning is not written.
    Usage may be spelled ``prompt_tokens``/``completion_tokens`` or
    ``input_tokens``/``output_tokens``; reasoning tokens (``*_tokens_details``)
    become ``thoughtsTokenCount`` and cached prompt tokens
    ``cachedContentTokenCount``. Call `delta` (or `text_delta`) per chunk, then
    `finish` once the upstream is done, or `error_event` to end with an error.
    """

    def __init__(self, model: str, *, framing: str = "sse", thinking: bool = True) -> None:
        if framing not in _FRAMINGS:
            raise ValueError(f"framing must be 'sse' or 'array', not {framing!r}")
        super().__init__(model)
        self._sse = framing == "sse"
        self._thinking = bool(thinking)
        self.content_type = "text/event-stream" if self._sse else "application/json"
        # What goes before the next chunk and after each: SSE's framing, or the array's.
        self._lead = _SSE_LEAD if self._sse else _ARRAY_OPEN
        self._next_lead = _SSE_LEAD if self._sse else _ARRAY_NEXT
        self._tail = _SSE_TAIL if self._sse else b""
        self._tools = ToolCallAssembler()
        self._used_tools = False
        self._reasoning_tokens: int | None = None
        self._cached_tokens: int | None = None
        self._response_id: str | None = None  # fixed by the first chunk written
        # (model, model as a JSON string, response id as a JSON string), for that model.
        self._quoted: tuple[str | None, bytes, bytes] = (None, b"", b"")

    # -- public API -------------------------------------------------------

    def start(self) -> bytes:
        """The array's ``[`` (framing ``"array"``); ``b""`` for SSE, which has no prologue."""
        if self._sse or self._lead != _ARRAY_OPEN or self._finished:
            return b""
        self._lead = b""
        return _ARRAY_OPEN

    def finish(
        self,
        finish_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> bytes:
        """The last chunk (``finishReason``, ``usageMetadata``) and, in the array, its ``]``.

        `finish_reason` is written verbatim (Gemini vocabulary); without it the
        recorded OpenAI reason is mapped (`finish_reason_for`). Token arguments
        override the counts the upstream reported. ``b""`` if the stream ended.
        """
        if self._finished:
            return b""
        if self._tools.pending:
            self._tools.finish()
            return self.error_event(502, _UNFINISHED_TOOL_CALL)

        def close() -> bytes:
            self._override_counts(input_tokens, output_tokens)
            reason = finish_reason or finish_reason_for(self._finish_reason)
            usage = usage_metadata(
                self._input_tokens,
                self._output_tokens,
                reasoning=self._reasoning_tokens,
                cached=self._cached_tokens,
            )
            # Gemini's own last chunk has one empty text part beside its finish.
            data = self._element([{"text": ""}], finish_reason=str(reason), usage=usage)
            return data if self._sse else data + _ARRAY_CLOSE

        return self._closing(close)

    def error_event(self, status: int, message: str) -> bytes:
        """End the stream with Gemini's ``{"error": {...}}``; ``b""`` if it already ended.

        In SSE the object is written bare (see the module doc), in the array as
        its last element. `status` becomes the error's code and status name.
        """
        if self._finished:
            return b""
        self._finished = True
        self._errored = True
        try:
            body = encode_ordered(error_body(status, message))
        except Exception:
            # e.g. a lone surrogate in the message: UTF-8 cannot carry it.
            body = encode_ordered(error_body(status, "Upstream error"))
        if self._sse:
            return body + b"\n"
        lead, self._lead = self._lead, self._next_lead
        return lead + body + _ARRAY_CLOSE

    # -- chunk handling ---------------------------------------------------

    def _note_usage(self, usage: Mapping[str, Any]) -> None:
        counts = usage_counts(usage)
        if counts.prompt is not None:
            self._input_tokens = counts.prompt
        if counts.completion is not None:
            self._output_tokens = counts.completion
        if counts.cached is not None:
            self._cached_tokens = counts.cached
        reasoning = reasoning_tokens_of(usage)
        if reasoning is not None:
            self._reasoning_tokens = reasoning

    def _texts(self, content: str, reasoning: str) -> bytes:
        if not self._thinking:
            reasoning = ""
        if not content and not reasoning:
            return b""
        model, quoted_model, quoted_id = self._quoted
        if model != self._model:
            quoted_model, quoted_id = self._quote()
        # Encoded before the lead is spent: a text UTF-8 cannot carry raises here.
        text = _json_string(content).encode("utf-8") if content else b""
        thought = _json_string(reasoning).encode("utf-8") if reasoning else b""
        lead, self._lead = self._lead, self._next_lead
        if not reasoning:
            data = _TEXT_CHUNK % (lead, text, quoted_model, quoted_id, self._tail)
        elif not content:
            data = _THOUGHT_CHUNK % (lead, thought, quoted_model, quoted_id, self._tail)
        else:
            data = _BOTH_CHUNK % (lead, thought, text, quoted_model, quoted_id, self._tail)
        if content:
            self._content_bytes += len(content) if content.isascii() else len(content.encode())
        return data

    def _choice(self, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
        self._out = []
        content = delta.get("content")
        text = self._texts(content if isinstance(content, str) else "", reasoning_text(delta))
        if text:
            self._out.append(text)
        self._tools.feed(tool_call_list(delta))
        if finish_reason is not None and self._tools.pending:
            # Gemini sends each call whole: they are, once the upstream has finished.
            # An unreadable one raises here; the text above still goes out before the error.
            parts = [function_call_part(call) for call in self._tools.finish()]
            self._out.append(self._element(parts))
            self._used_tools = True
        return self._take()

    # -- framing ------------------------------------------------------------

    def _element(
        self,
        parts: list[dict[str, Any]],
        *,
        finish_reason: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> bytes:
        """One whole chunk, framed; for chunks other than a text delta's."""
        self._quote()
        chunk = generate_content_response(
            parts,
            model=self._model,
            response_id=str(self._response_id),
            finish_reason=finish_reason,
            usage=usage,
        )
        body = encode_ordered(chunk)  # raises before the lead is spent
        lead, self._lead = self._lead, self._next_lead
        return lead + body + self._tail

    def _quote(self) -> tuple[bytes, bytes]:
        """The model and the response id as JSON strings, remembered for this model.

        The response id is the upstream's first chunk id, or one made here, and
        then the same on every chunk.
        """
        if self._response_id is None:
            self._response_id = self._chunk_id or uuid.uuid4().hex
        model = self._model
        if self._quoted[0] == model:
            return self._quoted[1], self._quoted[2]
        quoted_model = _json_string(model).encode("utf-8")
        quoted_id = _json_string(self._response_id).encode("utf-8")
        self._quoted = (model, quoted_model, quoted_id)
        return quoted_model, quoted_id
