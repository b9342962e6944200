"""The accumulator: a completion's deltas applied to its state, as `Chunk`s.

A push stage with no I/O (STYLE rules 5 and 6), the same for a stream and a
blocking body: `feed_event(event)` takes one SSE event, `feed_events(events)`
all the events of one read (the runner's: the common frame costs no more
than its parse, its decode and its Chunk), `feed_payload(payload, whole=True)`
one whole body (a one-payload stream). Each returns the chunks
to publish and leaves on the accumulator what the judge reads: the provider's
finish reason, ``[DONE]``, the in-band error, dropped and undecodable frames,
tool calls assembled and pending, citations, the first non-empty id.

After the finish chunk only usage (and the model, lifted by the runner) is
taken from later payloads: the finish chunk is the last one whose content,
reasoning and tool calls count (spec: STREAM TERMINATION CONTRACT). Every tool
call lands whole, exactly once, on the final chunk, whose `finish_reason` is
the provider's verbatim.

`StreamParser` is the same accumulator under its earlier public name
(`llmchat.stream_parser`), with `feed` and `wire_finish_reason`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, cast

from .. import fastjson
from ..chunk import Chunk
from ..dialects.base import Delta, Dialect
from ..dialects.openai_chat import DONE, OpenAIChat, OpenAIText
from ..sse import LeanEvent, SSEEvent
from ..tools import ToolCall, ToolCallAssembler
from .think_tags import ThinkTags

__all__ = ["DONE", "Accumulator", "StreamParser"]


class Named(Protocol):
    """What `Accumulator.feed_events` may set a plain frame's model on (a Response)."""

    model: str | None


class Accumulator:
    """The state of one completion, advanced one payload at a time."""

    def __init__(
        self,
        dialect: str | Dialect = "chat",
        *,
        keep_raw: bool = True,
        think_tags: ThinkTags | None = None,
    ) -> None:
        if isinstance(dialect, str):  # the OpenAI dialects by kind, as before
            dialect = OpenAIText() if dialect == "text" else OpenAIChat()
        self.dialect = dialect
        """The decoder of this completion's wire dialect (stateful: one per completion)."""
        self._decode: Callable[..., str | Delta] = dialect.decode
        self._usage = dialect.usage_fields
        self._done_marker = dialect.done_marker
        self._finish_is_last = dialect.finish_is_last
        self._think = None if think_tags is None else think_tags.new_filter()
        """Splits inline ``<think>`` text out of the answer; None when off."""
        self.keep_raw = keep_raw
        """Whether each Chunk keeps its decoded payload as `raw` (memory: ~1 KB a frame)."""
        self.assembler = ToolCallAssembler()
        self.finish_reason: str | None = None
        """The finish reason in OpenAI's names as the dialect mapped it; None until it comes."""
        self.provider_reason: str | None = None
        """The provider's own finish value, verbatim; None until it comes."""
        self.done = False
        """True once the dialect's explicit end arrived (``[DONE]``, ``message_stop`` …)."""
        self.after_end = False
        """True once an event came after the explicit end (a repeated ``[DONE]`` aside).

        Keep-alive does not reuse a connection whose body said more after its
        end; one read may carry the end and what follows it, so the reader
        learns it here, not only from the bytes the drain reads."""
        self.error: str | None = None
        """The first in-band provider error; None when there was none."""
        self.dropped = 0
        """Frames that could not be parsed (not UTF-8, not JSON, cut off)."""
        self.undecodable = 0
        """Of `dropped`, the frames that were not UTF-8: their text is lost."""
        self.comments = 0
        self.saw_tool_calls = False
        """True once any tool-call fragment or whole call arrived."""
        self.tool_calls: list[ToolCall] = []
        """The calls handed out, whole, in order."""
        self.citations: list[Any] | None = None
        """The latest top-level ``citations`` (before the finish); None when none came."""
        self.id: str | None = None
        """The first non-empty completion id."""
        self.saw_choice = False
        """True once a payload had a choice 0 (a blocking body without one is unusable)."""
        self.payload: dict[str, Any] | None = None
        """The JSON object the last event carried; None for comments, [DONE], drops."""
        self.parts: list[dict[str, Any]] = []
        """Opaque reasoning parts (thinking blocks with signatures …), in order."""

    @property
    def finished(self) -> bool:
        """True once the provider's finish reason arrived."""
        return self.finish_reason is not None

    @property
    def pending(self) -> bool:
        """True while a tool call has begun and not been handed out."""
        return self.assembler.pending

    def feed_event(self, event: SSEEvent) -> list[Chunk]:
        """Return the chunks one SSE event produces (often none)."""
        self.payload = None
        data = event.data
        if data is None or event.undecodable:
            if self.done:
                self.after_end = True
            if event.comment is not None:
                self.comments += 1
            elif event.undecodable:
                self.drop(undecodable=True)
            return []
        if not data:
            return []  # WHATWG: an event whose data is empty is not dispatched
        marker = self._done_marker
        if marker is not None and len(data) < 16 and data.strip() == marker:
            return self.mark_done()
        try:
            payload = fastjson.loads(data)
        except ValueError:
            payload = None  # a garbage frame, or one cut off mid-JSON at end of body
        if type(payload) is not dict:
            if not self.done:  # after the end (OpenRouter's [DONE] after response.completed)
                self.drop()
            elif data.strip() != DONE:
                self.after_end = True
            return []
        self.payload = payload
        if self.done:
            self.after_end = True
            return []
        return self.feed_payload(payload)

    def feed_events(
        self,
        events: Iterable[LeanEvent],
        lift: Callable[[dict[str, Any]], None] | None = None,
        named: Named | None = None,
    ) -> list[Chunk]:
        """The chunks of a batch of events (all one read completed), in order.

        The same chunks and state as `feed_event` on each in turn (`payload`
        is the last event's); a `str` is a plain event's data
        (`SSEDecoder.feed_data`). `lift` gets each decoded payload after its
        chunks (the runner's `_lift_usage`). Given `named`, a payload the
        dialect reads as plain text (a dialect with `plain_usage_is_model`)
        is not lifted: its model, when it names one, is set on `named.model`,
        all the default `_lift_usage` does with it. The common frame is read
        here in line: one call for its parse, one for its decode, one Chunk.
        """
        out: list[Chunk] = []
        loads = fastjson.loads
        decode = self._decode
        marker = self._done_marker
        plain = named if self.dialect.plain_usage_is_model else None
        for event in events:
            if type(event) is not str:
                out += self.feed_event(cast(SSEEvent, event))
                if lift is not None and self.payload is not None:
                    lift(self.payload)
                continue
            self.payload = None
            if not event:
                continue  # WHATWG: an event whose data is empty is not dispatched
            if marker is not None and len(event) < 16 and event.strip() == marker:
                out += self.mark_done()
                continue
            try:
                payload = loads(event)
            except ValueError:
                payload = None  # a garbage frame, or one cut off mid-JSON at end of body
            if type(payload) is not dict:
                if not self.done:
                    self.drop()
                elif event.strip() != DONE:
                    self.after_end = True
                continue
            self.payload = payload
            if self.done:
                self.after_end = True  # after the end only lifted
            else:
                if self.id is None:
                    pid = payload.get("id")
                    if type(pid) is str and pid:
                        self.id = pid
                delta = decode(payload, whole=False)
                if type(delta) is not str or self._think is not None:
                    out += self._decoded(payload, delta, False)
                else:
                    model = payload.get("model")
                    if delta and (self.finish_reason is None or not self._finish_is_last):
                        out.append(
                            Chunk(
                                delta,
                                payload if self.keep_raw else None,
                                False,
                                model if type(model) is str else None,
                            )
                        )
                    if plain is not None:
                        if type(model) is str and model:
                            plain.model = model
                        continue
            if lift is not None:
                lift(payload)
        return out

    def drop(self, *, undecodable: bool = False) -> None:
        """Count a frame that could not be read."""
        self.dropped += 1
        if undecodable:
            self.undecodable += 1

    def mark_done(self) -> list[Chunk]:
        """The dialect's explicit end (``[DONE]`` …): the provider says it is finished.

        With no finish reason sent, what a finish chunk would have carried is
        handed out here on a final chunk with no finish reason (spec case 1):
        a tool call still being assembled, and the citations.
        """
        self.done = True
        if self.finish_reason is not None:
            return []
        held = self.flush_text()
        landed = self.assembler.finish() if self.assembler.pending else []
        if not landed and self.citations is None:
            return held
        self.tool_calls.extend(landed)
        return [*held, Chunk("", None, True, None, None, landed or None, self.citations)]

    def flush_text(self) -> list[Chunk]:
        """The text the think-tag filter still holds, as a chunk (none when nothing is held).

        Called at the end of the answer (the finish, the explicit end, the end
        of the body) so that no text is lost.
        """
        if self._think is None:
            return []
        content, thinking = self._think.flush()
        if not content and not thinking:
            return []
        return [Chunk(content, thinking=thinking or None)]

    def feed_payload(self, payload: Mapping[str, Any], *, whole: bool = False) -> list[Chunk]:
        """Return the chunks one decoded payload produces; `whole` for a blocking body."""
        if self.id is None:
            pid = payload.get("id")
            if type(pid) is str and pid:
                self.id = pid
        return self._decoded(payload, self._decode(payload, whole=whole), whole)

    def _decoded(self, payload: Mapping[str, Any], delta: str | Delta, whole: bool) -> list[Chunk]:
        """The chunks of `payload`, decoded as `delta` (`feed_payload` after its decode)."""
        if type(delta) is str:
            if not delta or (self.finish_reason is not None and self._finish_is_last):
                return []
            model = payload.get("model")
            raw = cast("dict[str, Any]", payload) if self.keep_raw else None
            if self._think is not None:
                content, thinking = self._think.feed(delta)
                if not content and not thinking:
                    return []
                return [
                    Chunk(
                        content,
                        raw,
                        False,
                        model if type(model) is str else None,
                        thinking=thinking or None,
                    )
                ]
            return [Chunk(delta, raw, False, model if type(model) is str else None)]
        return self._delta(payload, cast(Delta, delta), whole)

    def _delta(self, payload: Mapping[str, Any], delta: Delta, whole: bool) -> list[Chunk]:
        chunks = self._apply(payload, delta, whole)
        if delta.end and not self.done:
            chunks += self.mark_done()
        return chunks

    def _apply(self, payload: Mapping[str, Any], delta: Delta, whole: bool) -> list[Chunk]:
        if delta.error is not None and self.error is None:
            self.error = delta.error
        if delta.id is not None and self.id is None:
            self.id = delta.id
        usage = self._usage(payload)
        has_usage = "usage" in usage
        if (self.finish_reason is not None and self._finish_is_last) or not delta.choice:
            if whole or not has_usage:
                return []
            return [self._usage_chunk(payload, usage, delta.model)]
        self.saw_choice = True
        if delta.citations is not None:
            self.citations = delta.citations
        if delta.parts:
            self.parts.extend(delta.parts)
        landed = self._tool_calls(delta)
        reason = delta.finish_reason
        if reason is not None:
            self.finish_reason = reason
            self.provider_reason = delta.provider_reason or reason
            landed += self.assembler.finish()
        self.tool_calls.extend(landed)
        final = whole or reason is not None
        text, thinking = delta.text, delta.thinking
        if self._think is not None:
            text, inline = self._think.feed(text) if text else ("", "")
            if final:
                rest, more = self._think.flush()
                text, inline = text + rest, inline + more
            thinking += inline
        if not (text or thinking or delta.refusal or landed or final or has_usage):
            return []
        model = delta.model or payload.get("model")
        return [
            Chunk(
                text,
                _raw(payload) if self.keep_raw else None,
                final,
                model if type(model) is str else None,
                reason,
                landed or None,
                self.citations if final else None,
                thinking or None,
                delta.refusal or None,
                usage.get("usage"),
                usage.get("cached_tokens"),
            )
        ]

    def _tool_calls(self, delta: Delta) -> list[ToolCall]:
        """Feed a delta's fragments on; return a whole message's calls."""
        if delta.fragments is not None:
            self.saw_tool_calls = True
            self.assembler.feed(delta.fragments)
        if delta.calls:
            self.saw_tool_calls = True
            return list(delta.calls)
        return []

    def _usage_chunk(
        self, payload: Mapping[str, Any], usage: dict[str, Any], model: str | None
    ) -> Chunk:
        model = model or payload.get("model")
        return Chunk(
            content="",
            raw=_raw(payload) if self.keep_raw else None,
            model=model if type(model) is str else None,
            usage=usage.get("usage"),
            cached_tokens=usage.get("cached_tokens"),
        )


def _raw(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload as a Chunk's `raw` (decoded JSON is a dict already: no copy)."""
    return payload if isinstance(payload, dict) else dict(payload)


class StreamParser(Accumulator):
    """An `Accumulator` under its earlier name (public as `llmchat.stream_parser.StreamParser`)."""

    def feed(self, event: SSEEvent) -> list[Chunk]:
        """Return the chunks one SSE event produces (`feed_event`)."""
        return self.feed_event(event)

    @property
    def wire_finish_reason(self) -> str | None:
        """The finish reason exactly as it arrived (`finish_reason`); None until it does."""
        return self.finish_reason
