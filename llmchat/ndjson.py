"""Newline-delimited JSON framing: a push decoder that does no I/O.

Ollama's ``/api/chat`` and ``/api/generate`` stream ``application/x-ndjson``:
one JSON value per line, each line ended by LF (Go's `json.Encoder` writes
``value\\n``). `NDJSONDecoder.feed(bytes)` returns one `SSEEvent` per line
those bytes complete, with `data` the line's text, so the accumulator that
reads SSE events (`event.data`) consumes these unchanged; `flush()` at end of
body returns the last line if it had no LF, marked unterminated (it is still
read: a body may end without its final newline).

Lines split at LF only (the NDJSON spec's separator; a CR before it, a
``\\r\\n`` ending, is dropped from the text). A bare CR is no line end: JSON
allows it only as whitespace between tokens. Bytes are split into lines
*before* decoding, so a character split across reads is never broken (LF
never occurs inside a UTF-8 multibyte sequence); a line that is not UTF-8 is
`SSEEvent(undecodable=True)`, a dropped frame, never a crash. A blank line,
or one of only spaces, tabs and CRs (JSON whitespace), is skipped. One
leading UTF-8 BOM is stripped, as `SSEDecoder` does (`json.loads` rejects it).

`feed_data` is `feed` with each line's event as its text alone (a `str`),
as `SSEDecoder.feed_data` gives it: the runner's feed.

`NDJSONDecoder(max_event_bytes=N)` bounds one line: a line, or a partial line
still being buffered, longer than N bytes (its LF not counted) raises
`EventTooLarge` at once, carrying the events completed before it in that
feed, exactly as `SSEDecoder` does.
"""

from __future__ import annotations

import functools
from typing import Final, cast

from .sse import EventTooLarge, LeanEvent, SSEEvent, feed_collecting

__all__ = ["NDJSONDecoder"]

_BOM: Final = b"\xef\xbb\xbf"
_BLANK: Final = " \t\r"  # JSON whitespace (RFC 8259 section 2) other than LF


class NDJSONDecoder:
    """Turns NDJSON body bytes into `SSEEvent`s, one per line; feed it whatever a read returned.

    `max_event_bytes` (None: no limit) bounds the bytes of one line.
    """

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._max = max_event_bytes
        self._partial = bytearray()  # the line still open: no LF seen yet
        self._lead: bytes | None = b""  # the body's first bytes while they may be a BOM
        self._feed_lean = functools.partial(self._feed, lean=True)

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Return one event per line that `data` completes (blank lines give none).

        Raises `EventTooLarge` when a line passes `max_event_bytes`; the
        decoder is then spent (feed it no more).
        """
        # Without `lean`, every event `_feed` makes is an SSEEvent.
        return cast("list[SSEEvent]", feed_collecting(self._feed, data))

    def feed_data(self, data: bytes) -> list[LeanEvent]:
        """`feed`, with each decodable line's event as its text (`SSEDecoder.feed_data`)."""
        return feed_collecting(self._feed_lean, data)

    def _feed(self, data: bytes, out: list[LeanEvent], lean: bool = False) -> None:
        if self._lead is not None:
            data = self._skip_bom(data)
        end = data.rfind(b"\n")
        if end < 0:
            self._buffer(data)
            return
        head = data[:end]  # the complete lines, without the last LF
        if self._partial:
            self._partial += head
            head = bytes(self._partial)
            self._partial.clear()
        self._lines(head, out, lean)
        if end + 1 < len(data):
            self._buffer(data[end + 1 :])

    def _skip_bom(self, data: bytes) -> bytes:
        """The body's bytes with one leading BOM dropped; none while it may still be one."""
        lead = (self._lead or b"") + data
        if len(lead) < len(_BOM) and _BOM.startswith(lead):
            self._lead = lead
            return b""
        self._lead = None
        return lead[len(_BOM) :] if lead.startswith(_BOM) else lead

    def _buffer(self, data: bytes) -> None:
        """Keep the start of a line whose LF has not arrived; bound it."""
        self._partial += data
        if self._max is not None and len(self._partial) > self._max:
            raise EventTooLarge(self._max)

    def _lines(self, head: bytes, out: list[LeanEvent], lean: bool) -> None:
        """Complete lines joined by LF: one decode for the lot when it can be.

        Decoding the whole run at once gives the same text as decoding each
        line, since LF is never part of a multibyte sequence; a run with a
        bad line, or one that may hold a line over the limit, goes line by
        line so the events before the culprit come out first.
        """
        if self._max is None or len(head) <= self._max:
            try:
                text = head.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                self._text_lines(text, out, lean)
                return
        for line in head.split(b"\n"):
            if self._max is not None and len(line) > self._max:
                raise EventTooLarge(self._max)
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                out.append(SSEEvent(undecodable=True))
                continue
            self._text_lines(text, out, lean)

    @staticmethod
    def _text_lines(text: str, out: list[LeanEvent], lean: bool) -> None:
        has_cr = "\r" in text
        for line in text.split("\n"):
            if not line.strip(_BLANK):
                continue
            if has_cr and line[-1] == "\r":
                line = line[:-1]
            out.append(line if lean else SSEEvent(line))

    def flush(self) -> list[SSEEvent]:
        """At end of body: the line that had no LF, if any, marked unterminated."""
        if self._lead:  # the body was one or two bytes of a BOM's start
            self._partial += self._lead
        self._lead = None
        if not self._partial:
            return []
        line = bytes(self._partial)
        self._partial.clear()
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return [SSEEvent(terminated=False, undecodable=True)]
        if not text.strip(_BLANK):
            return []
        return [SSEEvent(text[:-1] if text[-1] == "\r" else text, terminated=False)]
