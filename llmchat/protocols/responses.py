"""Rewrites a decoded OpenAI chat-completion stream as OpenAI Responses API events.

A Responses client reads one response as server-sent events, each with a
``sequence_number`` counting from 0: ``response.created`` and
``response.in_progress``, then output items one after another (each
``response.output_item.added``, its parts and deltas, ``response.output_item.done``),
then one of ``response.completed``, ``response.incomplete`` or ``response.failed``
carrying the whole response with its usage. Upstream reasoning becomes a
``reasoning`` item (``reasoning_text`` deltas), text a ``message`` item
(``output_text`` deltas) and each tool call a ``function_call`` item
(``function_call_arguments`` deltas). Items never interleave: the open one is
closed before the next opens.

The request shapes some items (`responses_shape.OutputShape`): when it asked
for a reasoning summary, the reasoning is also one ``summary_text`` part
(``response.reasoning_summary_part.*`` and ``reasoning_summary_text.*``
events); a call of a tool the client declared in a ``namespace`` carries its
own name and ``namespace``; a call of a ``custom`` tool is a
``custom_tool_call`` item whose raw ``input`` is sent whole when the call is
complete (``response.custom_tool_call_input.delta`` and ``.done``), since it
can only be read out of the stand-in function's finished JSON arguments.
A failed response carries the usage the upstream reported before it failed.

A tool call whose arguments are not one JSON object never becomes a finished
``function_call`` item: the stream ends with ``response.failed`` and a generic
message (the parser-rejection rule), so a client never runs a tool on
arguments nobody wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import wire_json
from ..tools import decode_arguments, slot_for_fragment
from .chunk_fields import int_or_none, reasoning_text, tool_call_list, tool_fragment
from .responses_items import (
    ARGUMENTS_DELTA,
    OUTPUT_TEXT_DELTA,
    REASONING_TEXT_DELTA,
    SUMMARY_TEXT_DELTA,
    OutputItem,
    PendingCall,
)
from .responses_objects import (
    FAILED_CODE,
    Echo,
    new_id,
    output_text_part,
    reasoning_text_part,
    response_object,
    status_for,
    summary_text_part,
    usage_object,
)
from .responses_shape import OutputShape, custom_input
from .translator import StreamTranslator

__all__ = ["BAD_TOOL_CALL", "UPSTREAM_FAILED", "ResponsesStream"]

BAD_TOOL_CALL: Final = "The upstream model produced a tool call that could not be read"
"""The failure message for a tool call without a name or with undecodable arguments."""
UPSTREAM_FAILED: Final = "The upstream server failed"
"""The failure message for an in-band upstream error (its own text is never passed on)."""


class ResponsesStream(StreamTranslator):
    """Translate one OpenAI chat stream into Responses API server-sent events.

    `echo` is what the response object repeats of the request (its ``model``
    names the response; its private keys the `OutputShape`). Call `start`
    once, `delta` per decoded OpenAI chunk, then `finish` when the upstream is
    done, or `error_event` to fail the response. `keep` gets the output items
    of a response that completed (the proxy remembers them for references).
    """

    content_type = "text/event-stream"

    def __init__(
        self,
        echo: Echo,
        *,
        response_id: str | None = None,
        created_at: int | None = None,
        keep: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        super().__init__(str(echo.get("model") or ""))
        self._echo = echo
        self._shape = OutputShape.of(echo)
        self._keep = keep
        self.response_id = response_id or new_id("resp")
        self._created_at = int(time.time()) if created_at is None else created_at
        self._sequence = 0
        self._items: list[OutputItem] = []
        self._done: dict[int, dict[str, Any]] = {}
        self._open: OutputItem | None = None
        self._calls: list[PendingCall] = []
        self._call_by_key: dict[Any, PendingCall] = {}
        self._cached_tokens: int | None = None
        self._reasoning_tokens: int | None = None

    # -- public API -------------------------------------------------------

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress``."""
        snapshot = self._response("in_progress")
        self._emit("response.created", {"response": snapshot})
        self._emit("response.in_progress", {"response": snapshot})
        return self._take()

    def delta(self, chunk: Any) -> bytes:
        """What one decoded OpenAI chunk becomes; an in-band upstream error fails the response."""
        if not self._finished and isinstance(chunk, Mapping) and chunk.get("error") is not None:
            return self.error_event(502, UPSTREAM_FAILED)
        return super().delta(chunk)

    def finish(
        self,
        reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> bytes:
        """Close the open item and end with ``response.completed`` or ``response.incomplete``.

        `reason` is an OpenAI ``finish_reason`` that overrides the one the stream
        carried (``length`` makes the response incomplete for
        ``max_output_tokens``). A tool call left unnamed or with undecodable
        arguments fails the response instead. ``b""`` if the stream already ended.
        """
        if self._finished:
            return b""
        if any(not self._readable(call) for call in self._calls):
            return self.error_event(502, BAD_TOOL_CALL)

        def close() -> bytes:
            self._out = []
            self._override_counts(input_tokens, output_tokens)
            status, details = status_for(reason or self._finish_reason)
            self._close("incomplete" if status == "incomplete" else "completed")
            final = self._response(status, details)
            self._emit(f"response.{status}", {"response": final})
            if self._keep is not None:
                self._keep(final["output"])
            return self._take()

        return self._closing(close)

    def error_event(self, status: int, message: str) -> bytes:
        """End with ``response.failed`` (what was produced is kept in its output); ``b""``
        if the stream already ended. `status` is not sent: the event has no place for it."""
        if self._finished:
            return b""
        self._finished = True
        self._errored = True
        error = {"code": FAILED_CODE, "message": str(message)}
        self._out = []
        try:
            self._emit("response.failed", {"response": self._response("failed", error=error)})
        except Exception:
            # e.g. a lone surrogate in the message: UTF-8 cannot carry it.
            self._out = []
            error["message"] = UPSTREAM_FAILED
            self._emit("response.failed", {"response": self._response("failed", error=error)})
        return self._take()

    # -- chunk handling ---------------------------------------------------

    def _note_usage(self, usage: Mapping[str, Any]) -> None:
        super()._note_usage(usage)
        for block, key, name in (
            ("prompt_tokens_details", "cached_tokens", "_cached_tokens"),
            ("completion_tokens_details", "reasoning_tokens", "_reasoning_tokens"),
        ):
            details = usage.get(block)
            count = int_or_none(details.get(key)) if isinstance(details, Mapping) else None
            if count is not None:
                setattr(self, name, count)

    def _choice(self, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
        self._out = []
        thinking = reasoning_text(delta)
        if thinking:
            self._write("reasoning", thinking)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._write("message", content)
            self._content_bytes += len(content.encode("utf-8"))
        tool_calls = tool_call_list(delta)
        if tool_calls is not None:
            for position, fragment in enumerate(tool_calls):
                if isinstance(fragment, Mapping):
                    self._write_call(fragment, position)
        return self._take()

    def _texts(self, content: str, reasoning: str) -> bytes:
        item = self._open
        if content and not reasoning and item is not None and item.kind == "message":
            # The common frame: text into the open message, one template.
            item.parts.append(content)
            data = OUTPUT_TEXT_DELTA % (
                wire_json.json_string(content).encode("utf-8"),
                item.at,
                self._sequence,
            )
            self._sequence += 1
            self._content_bytes += len(content) if content.isascii() else len(content.encode())
            return data
        self._out = []
        if reasoning:
            self._write("reasoning", reasoning)
        if content:
            self._write("message", content)
            self._content_bytes += len(content.encode("utf-8"))
        return self._take()

    def _write(self, kind: str, text: str) -> None:
        item = self._item_of(kind)
        summary = kind == "reasoning" and self._shape.summary
        item.parts.append(text)
        quoted = wire_json.json_string(text).encode("utf-8")
        sequence = self._sequence
        if kind == "reasoning":
            self._out.append(REASONING_TEXT_DELTA % (quoted, item.at, sequence))
            if summary:
                sequence += 1
                self._out.append(SUMMARY_TEXT_DELTA % (quoted, item.at, sequence))
        else:
            self._out.append(OUTPUT_TEXT_DELTA % (quoted, item.at, sequence))
        self._sequence = sequence + 1

    def _item_of(self, kind: str) -> OutputItem:
        """The open item if it is a `kind` one, else a new one (its part added)."""
        item = self._open
        if item is not None and item.kind == kind:
            return item
        item = self._open_item(kind, new_id("rs" if kind == "reasoning" else "msg"))
        part = reasoning_text_part("") if kind == "reasoning" else output_text_part("")
        self._emit("response.content_part.added", {**self._at(item, 0), "part": part})
        if kind == "reasoning" and self._shape.summary:
            added = {**self._summary_at(item), "part": summary_text_part("")}
            self._emit("response.reasoning_summary_part.added", added)
        return item

    def _write_call(self, fragment: Mapping[str, Any], position: int) -> None:
        call = slot_for_fragment(fragment, position, self._calls, self._call_by_key, PendingCall)
        call_id, name, arguments = tool_fragment(fragment)
        call.id = call.id or call_id
        call.name = call.name or name
        item = call.item
        if item is not None and item is not self._open:
            if arguments:
                raise ValueError("arguments for a tool call whose item is closed")
            return
        if item is None:
            if arguments:
                call.buffered.append(arguments)
            if call.name:
                self._open_call(call)
            return
        if arguments:
            self._send_arguments(item, arguments)

    def _open_call(self, call: PendingCall) -> None:
        item = self._open_item("function_call", new_id("fc"), call)
        buffered, call.buffered = call.buffered, []
        for part in buffered:
            self._send_arguments(item, part)

    def _send_arguments(self, item: OutputItem, arguments: str) -> None:
        item.parts.append(arguments)
        if self._shape.is_custom(item.name):
            return  # the raw input is sent whole once the arguments are complete
        quoted = wire_json.json_string(arguments).encode("utf-8")
        self._out.append(ARGUMENTS_DELTA % (quoted, item.at, self._sequence))
        self._sequence += 1

    def _readable(self, call: PendingCall) -> bool:
        """True when `call` became an item whose arguments are one JSON object (or none),
        holding the raw input when the call is a custom tool's."""
        if call.item is None:
            return False
        _, _, undecodable = decode_arguments(call.item.text)
        return not undecodable and self._shape.readable(call.item.name, call.item.text)

    # -- items and framing ------------------------------------------------

    def _open_item(self, kind: str, item_id: str, call: PendingCall | None = None) -> OutputItem:
        self._close("completed")
        item = OutputItem(kind, len(self._items), item_id, self._shape)
        if call is not None:
            item.call_id = call.id or new_id("call")
            item.name = call.name
            call.item = item
        self._items.append(item)
        self._open = item
        self._emit(
            "response.output_item.added",
            {"output_index": item.index, "item": item.shape("in_progress")},
        )
        return item

    def _close(self, status: str) -> None:
        """Close the open item; a function call's arguments must read as one JSON object."""
        item, self._open = self._open, None
        if item is None:
            return
        text = item.text
        if item.kind == "function_call":
            call = next(c for c in self._calls if c.item is item)
            if not self._readable(call):
                raise ValueError("a tool call's arguments are not a JSON object")
            at = {"item_id": item.id, "output_index": item.index}
            raw = custom_input(text) if self._shape.is_custom(item.name) else None
            if raw is not None:
                self._emit("response.custom_tool_call_input.delta", {**at, "delta": raw})
                self._emit("response.custom_tool_call_input.done", {**at, "input": raw})
            else:
                self._emit("response.function_call_arguments.done", {**at, "arguments": text})
        else:
            reasoning = item.kind == "reasoning"
            part = reasoning_text_part(text) if reasoning else output_text_part(text)
            done = "response.reasoning_text.done" if reasoning else "response.output_text.done"
            extra: dict[str, Any] = {} if reasoning else {"logprobs": []}
            self._emit(done, {**self._at(item, 0), "text": text, **extra})
            self._emit("response.content_part.done", {**self._at(item, 0), "part": part})
            if reasoning and self._shape.summary:
                at = self._summary_at(item)
                self._emit("response.reasoning_summary_text.done", {**at, "text": text})
                done_part = {**at, "part": summary_text_part(text)}
                self._emit("response.reasoning_summary_part.done", done_part)
        shaped = item.shape(status)
        self._done[item.index] = shaped
        self._emit("response.output_item.done", {"output_index": item.index, "item": shaped})

    def _output(self) -> list[dict[str, Any]]:
        """Every item so far: finished ones as sent, an open one as it stands (incomplete)."""
        return [self._done.get(i.index) or i.shape("incomplete") for i in self._items]

    def _response(
        self,
        status: str,
        incomplete_details: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        usage = None
        if status != "in_progress":
            usage = usage_object(
                self._input_tokens,
                self._output_tokens,
                self._cached_tokens,
                self._reasoning_tokens,
            )
        return response_object(
            self._echo,
            response_id=self.response_id,
            created_at=self._created_at,
            status=status,
            output=self._output() if status != "in_progress" else [],
            usage=usage,
            error=error,
            incomplete_details=incomplete_details,
            model=str(self._echo.get("model") or "") or self._model,
        )

    @staticmethod
    def _summary_at(item: OutputItem) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": item.index, "summary_index": 0}

    @staticmethod
    def _at(item: OutputItem, content_index: int) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": item.index, "content_index": content_index}

    def _emit(self, name: str, fields: Mapping[str, Any]) -> None:
        body = {"type": name, "sequence_number": self._sequence, **fields}
        data = wire_json.encode_data(body)  # may raise: the number is used only once sent
        self._sequence += 1
        self._out.append(b"event: " + name.encode("ascii") + b"\ndata: " + data + b"\n\n")
