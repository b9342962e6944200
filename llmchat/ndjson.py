"""Placeholder NDJSON push decoder (replaced by the full one)."""

from __future__ import annotations

from .sse import EventTooLarge, SSEEvent

__all__ = ["NDJSONDecoder"]


class NDJSONDecoder:
    """Newline-delimited JSON: one event per non-blank line."""

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self.max_event_bytes = max_event_bytes
        self._buf = b""

    def feed(self, data: bytes) -> list[SSEEvent]:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        out = [self._event(line) for line in lines if line.strip()]
        if self.max_event_bytes is not None and len(self._buf) > self.max_event_bytes:
            exc = EventTooLarge(self.max_event_bytes)
            exc.events = out
            raise exc
        return out

    def flush(self) -> list[SSEEvent]:
        rest, self._buf = self._buf, b""
        return [self._event(rest)] if rest.strip() else []

    @staticmethod
    def _event(line: bytes) -> SSEEvent:
        try:
            return SSEEvent(data=line.decode("utf-8").strip())
        except UnicodeDecodeError:
            return SSEEvent(undecodable=True)
