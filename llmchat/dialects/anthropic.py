"""The Anthropic Messages dialect: one ``/v1/messages`` payload into one neutral `Delta`.

Pure, no I/O (ARCHITECTURE: dialects). A stream is a sequence of typed events
(Anthropic: "Streaming Messages"): ``message_start``; per content block
``content_block_start``, its deltas and ``content_block_stop``; ``message_delta``
with the stop reason and the final usage; ``message_stop``, the end. A blocking
body is the whole ``message`` object, read as one payload carrying everything.

What becomes what:

- ``text`` blocks are the answer; ``thinking`` blocks are reasoning, and each
  one, with its ``signature``, is also kept as an opaque part (so a tool loop
  sends it back: Anthropic requires that with tool use), as are
  ``redacted_thinking`` blocks;
- a ``tool_use`` block's ``input_json_delta`` pieces are joined and the call
  lands whole at its block's ``content_block_stop`` (blocks are kept by index:
  llama-server opens the next tool block before it closes the previous one);
- ``citations_delta`` (and a text block's ``citations``) are the citations, as
  Anthropic's own citation objects;
- ``error`` events fail the completion with the provider's message;
- ``ping``, unknown event types and unknown block types (``server_tool_use``,
  ``web_search_tool_result`` …: Anthropic says new ones will be added) add
  nothing. Server tools' own blocks are the provider's bookkeeping, not answer
  text; the text blocks around them are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..tools import ToolCall, decode_arguments
from .base import Delta, Dialect, inband_error, is_count, model_and_usage

__all__ = ["STOP_REASONS", "AnthropicMessages", "finish_reason_of", "usage_fields"]

DIALECT: Final = "anthropic"

STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "model_context_window_exceeded": "length",
}
"""Anthropic's ``stop_reason`` values in OpenAI's names; any other (``pause_turn`` …)
is passed on unmapped, so the judge fails it as an unknown reason."""


def finish_reason_of(stop_reason: str) -> str:
    """`stop_reason` in OpenAI's names, or itself when it has none."""
    return STOP_REASONS.get(stop_reason, stop_reason)


class _Block:
    """A content block being streamed: what its deltas add up to."""

    __slots__ = ("data", "id", "input", "json", "kind", "name", "signature", "thinking")

    def __init__(self, block: Mapping[str, Any]) -> None:
        self.kind = str(block.get("type") or "")
        self.id = _str(block.get("id"))
        self.name = _str(block.get("name"))
        given = block.get("input")
        self.input: Any = given if isinstance(given, Mapping) else None
        self.json: list[str] = []
        self.thinking = [_str(block.get("thinking"))]
        self.signature = _str(block.get("signature"))
        self.data = _str(block.get("data"))

    def call(self) -> ToolCall:
        """The ``tool_use`` block as a whole call (the joined JSON, else the start's input).

        Blocking and streamed, the same call: `arguments_json` is None unless
        the input was not a JSON object (then it keeps the text, flagged).
        """
        raw: Any = "".join(self.json) if self.json else self.input
        arguments, text, undecodable = decode_arguments(raw)
        return ToolCall(
            name=self.name,
            arguments=arguments,
            id=self.id,
            # The input is an object on the wire (its JSON text only a streaming
            # detail), so the text is kept only when it is not an object.
            arguments_json=text if undecodable else None,
            arguments_undecodable=undecodable,
        )

    def part(self) -> dict[str, Any] | None:
        """The block as an opaque reasoning part, or None when it is not one."""
        if self.kind == "thinking":
            return thinking_part("".join(self.thinking), self.signature)
        if self.kind == "redacted_thinking":
            return {"dialect": DIALECT, "type": "redacted_thinking", "data": self.data}
        return None


def thinking_part(thinking: str, signature: str) -> dict[str, Any]:
    """A thinking block as a reasoning part tagged ``anthropic``."""
    return {"dialect": DIALECT, "type": "thinking", "thinking": thinking, "signature": signature}


class AnthropicMessages(Dialect):
    """The Messages dialect; stateful (the open content blocks), one per completion."""

    name: ClassVar[str] = DIALECT
    derives_total: ClassVar[bool] = True

    def __init__(self) -> None:
        self._blocks: dict[Any, _Block] = {}
        self._citations: list[Any] = []

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
        kind = payload.get("type")
        if kind == "content_block_delta":
            return self._block_delta(payload)
        if whole or kind == "message":
            return decode_message(payload)
        if kind == "content_block_start":
            return self._block_start(payload)
        if kind == "content_block_stop":
            return self._block_stop(payload)
        if kind == "message_start":
            return _message_start(payload)
        if kind == "message_delta":
            return self._message_delta(payload)
        if kind == "message_stop":
            return self._landed(Delta(end=True))
        if kind == "error":
            return Delta(error=_error_text(payload), end=True)
        return ""  # ping, and event types Anthropic has yet to add

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        return usage_fields(payload)

    # -- content blocks ---------------------------------------------------------------

    def _block_start(self, payload: Mapping[str, Any]) -> str | Delta:
        block = payload.get("content_block")
        if not isinstance(block, Mapping):
            return ""
        state = _Block(block)
        index = payload.get("index")
        if index in self._blocks:
            # Which deltas belong to which block is unknowable now: a failure,
            # never one block silently replacing the other (spec: TOOL-CALL IDENTITY).
            return Delta(error=f"content block {index!r} started again while still open", end=True)
        self._blocks[index] = state
        if state.kind == "text":
            text = block.get("text")
            return text if isinstance(text, str) else ""
        if state.kind == "thinking" and state.thinking[0]:
            return Delta(thinking=state.thinking[0], choice=True)
        return ""

    def _block_delta(self, payload: Mapping[str, Any]) -> str | Delta:
        delta = payload.get("delta")
        if not isinstance(delta, Mapping):
            return ""
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return text if isinstance(text, str) else ""
        block = self._blocks.get(payload.get("index"))
        if kind == "thinking_delta":
            thinking = _str(delta.get("thinking"))
            if block is not None:
                block.thinking.append(thinking)
            return Delta(thinking=thinking, choice=True) if thinking else ""
        if block is None:
            return ""
        if kind == "input_json_delta" and block.kind == "tool_use":
            block.json.append(_str(delta.get("partial_json")))
        elif kind == "signature_delta":
            block.signature += _str(delta.get("signature"))
        elif kind == "citations_delta" and isinstance(delta.get("citation"), Mapping):
            self._citations.append(dict(delta["citation"]))
            return Delta(citations=list(self._citations), choice=True)
        return ""

    def _block_stop(self, payload: Mapping[str, Any]) -> str | Delta:
        block = self._blocks.pop(payload.get("index"), None)
        if block is None:
            return ""
        if block.kind == "tool_use":
            return Delta(calls=[block.call()], choice=True)
        part = block.part()
        return Delta(parts=[part], choice=True) if part is not None else ""

    def _landed(self, out: Delta) -> Delta:
        """`out` with every reasoning block still open landed on it (a stop that never came).

        A ``tool_use`` block still open at the message's end is a failure: its
        input may be cut anywhere, so it is not handed out as a call (the calls
        that did end stay on the Response).
        """
        unended = [i for i, b in self._blocks.items() if b.kind == "tool_use"]
        parts = [p for b in self._blocks.values() if (p := b.part()) is not None]
        self._blocks.clear()
        if unended:
            out.error = f"tool_use block {unended[0]!r} never ended (no content_block_stop)"
        if parts:
            out.parts = parts
            out.choice = True
        return out

    # -- the message ------------------------------------------------------------------

    def _message_delta(self, payload: Mapping[str, Any]) -> Delta:
        delta = payload.get("delta")
        reason = delta.get("stop_reason") if isinstance(delta, Mapping) else None
        if not isinstance(reason, str) or not reason:
            return Delta()
        return self._landed(
            Delta(finish_reason=finish_reason_of(reason), provider_reason=reason, choice=True)
        )


def _message_start(payload: Mapping[str, Any]) -> Delta:
    message = payload.get("message")
    if not isinstance(message, Mapping):
        return Delta()
    return Delta(id=_str(message.get("id")) or None, model=_str(message.get("model")) or None)


def decode_message(payload: Mapping[str, Any]) -> Delta:
    """A whole ``message`` body (blocking): every block read at once."""
    if payload.get("type") == "error":
        return Delta(error=_error_text(payload), whole=True)
    out = Delta(choice=True, whole=True)
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    parts: list[dict[str, Any]] = []
    citations: list[Any] = []
    content = payload.get("content")
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text.append(_str(block.get("text")))
            found = block.get("citations")
            if isinstance(found, list):
                citations.extend(dict(c) for c in found if isinstance(c, Mapping))
        elif kind in ("thinking", "redacted_thinking", "tool_use"):
            state = _Block(block)
            if kind == "tool_use":
                calls.append(state.call())
            else:
                thinking.append("".join(state.thinking))
                part = state.part()
                if part is not None:
                    parts.append(part)
    out.text, out.thinking = "".join(text), "".join(thinking)
    out.calls, out.parts = calls or None, parts or None
    out.citations = citations or None
    reason = payload.get("stop_reason")
    if isinstance(reason, str) and reason:
        out.finish_reason, out.provider_reason = finish_reason_of(reason), reason
    return out


def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Response usage fields a body or event reports, in OpenAI's names.

    ``prompt_tokens`` is every input token: Anthropic's ``input_tokens`` counts
    only those after the last cache breakpoint, so the cache reads and writes
    are added (as OpenAI's ``prompt_tokens`` includes its cached tokens);
    ``cached_tokens`` is ``cache_read_input_tokens``, ``cache_write_tokens``
    ``cache_creation_input_tokens``; ``reasoning_tokens`` is
    ``output_tokens_details.thinking_tokens``. ``message_start``'s
    ``output_tokens`` is a placeholder (1 before anything was generated) and is
    not taken; ``message_delta``'s is the count.
    """
    source: Any = payload
    start = payload.get("type") == "message_start"
    if start:
        source = payload.get("message")
        if not isinstance(source, Mapping):
            return {}
    elif "usage" not in payload and "model" not in payload:
        return {}
    fields, usage = model_and_usage(source)
    if usage is None:
        return fields
    read, written = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    if is_count(usage.get("input_tokens")):
        fields["prompt_tokens"] = sum(
            n for n in (usage["input_tokens"], read, written) if is_count(n)
        )
    if is_count(read):
        fields["cached_tokens"] = read
    if is_count(written):
        fields["cache_write_tokens"] = written
    if not start and is_count(usage.get("output_tokens")):
        fields["completion_tokens"] = usage["output_tokens"]
    details = usage.get("output_tokens_details")
    if isinstance(details, Mapping) and is_count(details.get("thinking_tokens")):
        fields["reasoning_tokens"] = details["thinking_tokens"]
    return fields


def _error_text(payload: Mapping[str, Any]) -> str:
    return inband_error(payload.get("error")) or "The provider sent an error event"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
