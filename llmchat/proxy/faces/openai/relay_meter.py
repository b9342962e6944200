"""Reads the usage of a relayed OpenAI answer as its bytes pass through, untouched.

The OpenAI face relays the upstream's bytes as they are; this watches the same
bytes with llmchat's own push stages (SSE decoder, stream parser) so the usage
event still gets token counts and the answer's text bytes.
"""

from __future__ import annotations

import time
from typing import Any

from ....completion import parse_completion, usage_fields
from ....pipeline.accumulate import Accumulator
from ....sse import EventTooLarge, KeepAliveOnly, KeepAliveWatch, SSEDecoder
from ....transport import decode_body, parse_json
from ...outbound import utf8_size
from ...upstream import RelayBroken

__all__ = ["RelayMeter"]


class RelayMeter:
    """Feed it every relayed byte; read `input_tokens`, `output_tokens`, `cached_tokens`,
    `content_bytes`."""

    def __init__(
        self,
        *,
        event_stream: bool,
        max_event_bytes: int | None = None,
        silence: float | None = None,
    ) -> None:
        self.event_stream = event_stream
        self.max_event_bytes = max_event_bytes
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cached_tokens: int | None = None
        """``prompt_tokens_details.cached_tokens``, as the relayed usage says it (exact)."""
        self.reasoning_tokens: int | None = None
        """``completion_tokens_details.reasoning_tokens``, as the relayed usage says it."""
        self.content_bytes = 0
        self.model: str | None = None
        self.finished = False
        """True once the answer was complete: ``[DONE]``/a finish reason, or a whole body."""
        self.done = False
        """True once a stream's ``data: [DONE]`` was fed (whole: the frame is relayed with it)."""
        self._decoder = SSEDecoder(max_event_bytes) if event_stream else None
        self._parser = Accumulator("chat", keep_raw=False) if event_stream else None
        self._body: list[bytes] = []
        # `silence`: the node's read timeout, which pings alone must not outlast either.
        self._pings = KeepAliveWatch(silence, time.monotonic()) if silence is not None else None

    def feed(self, data: bytes) -> None:
        """Watch `data`; raises `RelayBroken`: ("response") when an event passes the limit,
        ("timeout") when the stream sent only keep-alive comments for `silence` seconds."""
        if self._decoder is None:
            self._body.append(data)
            return
        try:
            events = self._decoder.feed(data)
        except EventTooLarge as exc:
            self._events(exc.events)
            raise RelayBroken(str(exc), "response") from exc
        self._events(events)
        if self._pings is not None:
            try:
                self._pings.seen(events, time.monotonic())
            except KeepAliveOnly as exc:
                raise RelayBroken(str(exc), "timeout") from exc

    def close(self) -> None:
        """The body ended; read what a whole (non-stream) body said."""
        if self._decoder is not None:
            self._events(self._decoder.flush())
            return
        payload = parse_json(decode_body(b"".join(self._body)))
        self._body = []
        if not isinstance(payload, dict):
            return
        self._usage(payload)
        completion = parse_completion(payload)
        self.content_bytes = utf8_size(completion.text)
        self.finished = completion.finish_reason is not None

    def _events(self, events: list[Any]) -> None:
        parser = self._parser
        assert parser is not None
        for event in events:
            try:
                chunks = parser.feed_event(event)
            except Exception:  # a frame we cannot read is still relayed as is
                continue
            if parser.payload is not None:
                self._usage(parser.payload)
            for chunk in chunks:
                self.content_bytes += utf8_size(chunk.content)
        self.done = parser.done
        self.finished = parser.done or parser.finished

    def _usage(self, payload: dict[str, Any]) -> None:
        fields = usage_fields(payload)
        self.model = fields.get("model", self.model)
        self.input_tokens = fields.get("prompt_tokens", self.input_tokens)
        self.output_tokens = fields.get("completion_tokens", self.output_tokens)
        self.cached_tokens = fields.get("cached_tokens", self.cached_tokens)
        self.reasoning_tokens = fields.get("reasoning_tokens", self.reasoning_tokens)
