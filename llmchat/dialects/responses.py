"""The OpenAI Responses dialect (``/v1/responses``): one payload into one neutral `Delta`.

Pure, no I/O (ARCHITECTURE: dialects). A stream is SSE whose events carry
their ``type`` in the JSON; a blocking body is the ``response`` object itself,
read by the same item readers (`responses_items`) as the stream's final
``response.completed``. There is no done marker: ``response.completed``,
``response.incomplete``, ``response.failed`` and ``error`` are the ends.

Stream events read (OpenAI API reference, "Streaming events"):

- ``response.created`` / ``in_progress`` / ``queued``: the id and model;
- ``response.output_text.delta``: answer text;
- ``response.reasoning_text.delta`` and ``response.reasoning_summary_text.delta``:
  thinking, a blank line between two segments (parts or items);
- ``response.refusal.delta``: refusal text;
- ``response.output_text.annotation.added``: a ``url_citation``;
- ``response.output_item.done``: a ``function_call`` item lands whole (the
  ``function_call_arguments`` deltas are ignored), a ``reasoning`` item becomes a
  reasoning part, a ``message`` item's annotations are citations;
- ``response.completed`` / ``incomplete`` / ``failed``: the finish, the usage, and
  whatever the final ``output`` holds that the stream did not already deliver
  (calls by ``call_id``, reasoning parts, citations; text, thinking or refusal
  only when the stream sent none of that kind);
- ``error``, or a bare ``{"error": …}`` (llama-server's mid-stream error): fails.

Everything else (``web_search_call`` progress, ``content_part`` bookkeeping,
events after the end, types added later) is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from ..tools import ToolCall
from .base import Delta, Dialect, inband_error
from .responses_items import (
    DIALECT,
    THINKING_SEPARATOR,
    finish_state,
    function_call,
    item_citations,
    merge_citations,
    message_texts,
    payload_citations,
    reasoning_part,
    reasoning_segments,
    url_citations,
    usage_fields,
)

__all__ = ["ResponsesDialect"]

_STREAM_SKIPS: Final = frozenset({"text", "thinking", "refusal"})
"""What a stream's done item does not give again: its texts came as deltas."""
_FINAL_STATUS: Final = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}

_Handler = Callable[["ResponsesDialect", Mapping[str, Any]], Delta]


class ResponsesDialect(Dialect):
    """One Responses-API completion's decoder (stateful: what the stream already gave)."""

    name: ClassVar[str] = DIALECT
    derives_total: ClassVar[bool] = True

    def __init__(self) -> None:
        self._calls: dict[str, ToolCall] = {}
        """The calls handed out, by call id (else item id, else name and arguments)."""
        self._citations: list[str] = []
        self._citation_keys: set[str] = set()
        self._seen: set[str] = set()
        """The kinds the stream delivered: ``text``, ``thinking``, ``refusal`` as deltas,
        ``calls`` and ``parts`` as done items."""
        self._segment: tuple[Any, ...] | None = None

    # -- the entry point ------------------------------------------------------------

    def decode(self, payload: Mapping[str, Any], *, whole: bool = False) -> str | Delta:
        kind = payload.get("type")
        if type(kind) is str:
            if kind == "response.output_text.delta":  # the hot path: most events
                text = payload.get("delta")
                if type(text) is str:
                    self._seen.add("text")
                    return text
                return Delta()
            handler = self._EVENTS.get(kind)
            if handler is not None:
                return handler(self, payload)
            return self._error(payload) if kind == "error" else Delta()
        if payload.get("object") == "response":
            return self._final(payload, None)
        if inband_error(payload.get("error")) is not None:
            return self._error(payload)  # an error body, or llama-server's bare error event
        return self._final(payload, None) if whole else Delta()

    @staticmethod
    def usage_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
        return usage_fields(payload)

    # -- stream events ------------------------------------------------------------

    def _started(self, payload: Mapping[str, Any]) -> Delta:
        response = payload.get("response")
        if not isinstance(response, Mapping):
            return Delta()
        return Delta(id=_text(response.get("id")), model=_text(response.get("model")))

    def _thinking(self, payload: Mapping[str, Any], index_key: str) -> Delta:
        text = payload.get("delta")
        if not isinstance(text, str) or not text:
            return Delta()
        segment = (payload.get("item_id"), index_key, payload.get(index_key, 0))
        if self._segment is not None and segment != self._segment:
            text = THINKING_SEPARATOR + text
        self._segment = segment
        self._seen.add("thinking")
        return Delta(thinking=text, choice=True)

    def _summary(self, payload: Mapping[str, Any]) -> Delta:
        return self._thinking(payload, "summary_index")

    def _reasoning_text(self, payload: Mapping[str, Any]) -> Delta:
        return self._thinking(payload, "content_index")

    def _refusal(self, payload: Mapping[str, Any]) -> Delta:
        text = payload.get("delta")
        if not isinstance(text, str) or not text:
            return Delta()
        self._seen.add("refusal")
        return Delta(refusal=text, choice=True)

    def _annotation(self, payload: Mapping[str, Any]) -> Delta:
        return self._cited(url_citations(payload.get("annotation")))

    def _item_done(self, payload: Mapping[str, Any]) -> Delta:
        item = payload.get("item")
        if not isinstance(item, Mapping):
            return Delta()
        out = Delta()
        self._take_item(item, out, _STREAM_SKIPS)
        return out

    def _ended(self, payload: Mapping[str, Any]) -> Delta:
        response = payload.get("response")
        status = _FINAL_STATUS[str(payload.get("type"))]
        out = self._final(response if isinstance(response, Mapping) else {}, status)
        self._cite(payload_citations(payload), out)
        return out

    def _error(self, payload: Mapping[str, Any]) -> Delta:
        """An ``error`` event (``message`` on it, or in its ``error`` object): the end."""
        message = inband_error(payload.get("error")) or _text(payload.get("message"))
        code = payload.get("code")
        if message is None:
            message = f"The provider sent an error event (code {code!r})"
        return Delta(error=message, end=True)

    # -- a whole response object (a blocking body, or a stream's final event) --------

    def _final(self, response: Mapping[str, Any], status: str | None) -> Delta:
        """The finish, and what `response`'s output adds to what the stream delivered.

        Each kind (calls, reasoning parts, text, thinking, refusal) is taken from
        the output only when the stream delivered none of it: servers re-number
        items in the final output (OpenRouter's reasoning ids differ), so
        matching items by id could hand out one call twice.
        """
        out = Delta(choice=True, end=status is not None)
        out.id = _text(response.get("id"))
        out.model = _text(response.get("model"))
        skip = frozenset(self._seen)
        output = response.get("output")
        for item in output if isinstance(output, list) else ():
            if isinstance(item, Mapping):
                self._take_item(item, out, skip)
        self._cite(payload_citations(response), out)
        reason, provider, error = finish_state(response, has_calls=bool(self._calls), status=status)
        out.finish_reason, out.error = reason, error or out.error  # a conflicting call id's
        out.provider_reason = provider if provider != reason else None
        if error is not None and reason is None:
            out.choice = False  # a background response: nothing of an answer yet
        return out

    def _take_item(self, item: Mapping[str, Any], out: Delta, skip: frozenset[str]) -> None:
        """Add one output item to `out`, except the kinds in `skip`; citations always."""
        kind = item.get("type")
        if kind == "function_call":
            if "calls" not in skip:
                self._call(item, out)
        elif kind == "reasoning":
            self._reasoning_item(item, out, skip)
        elif kind == "message":
            text, refusal = message_texts(item)
            if "text" not in skip:
                out.text += text
            if "refusal" not in skip:
                out.refusal += refusal
            self._cite(item_citations(item), out)
        elif kind == "search_results":
            self._cite(item_citations(item), out)

    def _call(self, item: Mapping[str, Any], out: Delta) -> None:
        call = function_call(item)
        key = call.id or _text(item.get("id")) or f"{call.name}:{call.arguments_json}"
        earlier = self._calls.get(key)
        if earlier is not None:
            if earlier != call:  # another call under a used id: never a silent drop
                out.error = f"two different function calls share the id {key!r}"
            return  # the same item done twice: one call
        self._calls[key] = call
        self._seen.add("calls")
        out.calls = [*(out.calls or []), call]
        out.choice = True

    def _reasoning_item(self, item: Mapping[str, Any], out: Delta, skip: frozenset[str]) -> None:
        part = reasoning_part(item)
        if part is not None and "parts" not in skip:
            self._seen.add("parts")
            out.parts = [*(out.parts or []), part]
            out.choice = True
        segments = reasoning_segments(item)
        if segments and "thinking" not in skip:
            joined = THINKING_SEPARATOR.join(segments)
            out.thinking += THINKING_SEPARATOR + joined if out.thinking else joined

    # -- citations ------------------------------------------------------------------

    def _cited(self, citations: list[Any]) -> Delta:
        out = Delta()
        self._cite(citations, out)
        return out

    def _cite(self, citations: list[Any], out: Delta) -> None:
        """Merge `citations` in; when any is new, `out` carries the whole list so far."""
        if merge_citations(self._citations, self._citation_keys, citations):
            out.citations = list(self._citations)
            out.choice = True

    # Inside the class body the handlers are plain functions, called as handler(self, payload).
    _EVENTS: Final[dict[str, _Handler]] = {
        "response.created": _started,
        "response.in_progress": _started,
        "response.queued": _started,
        "response.reasoning_summary_text.delta": _summary,
        "response.reasoning_text.delta": _reasoning_text,
        "response.refusal.delta": _refusal,
        "response.output_text.annotation.added": _annotation,
        "response.output_item.done": _item_done,
        "response.completed": _ended,
        "response.incomplete": _ended,
        "response.failed": _ended,
    }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
