"""Server-sent-event framing: a push decoder that does no I/O.

`SSEDecoder.feed(bytes)` returns the events completed by those bytes;
`flush()` at end of body returns what is left, marked unterminated. Bytes are
split into lines at CR, LF or CRLF *before* decoding, and each whole line is
decoded as UTF-8 on its own, so a character split across reads is never
broken; a line that is not UTF-8 marks its event undecodable (a dropped
frame), never a crash. Event framing follows the WHATWG EventSource rules
("Interpreting an event stream"): ``data`` lines join with ``\\n``, a leading
space after the colon is dropped, a blank line dispatches, ``:`` lines are
comments.

Why not sseclient-py: at end of body it dispatches an unterminated tail as if
it were complete (the stream contract must count a frame cut off mid-JSON), it
drops comments silently (they are keep-alives that refresh activity), it is a
pull generator rather than a push stage, and it re-concatenates its buffer on
every line.

`feed_data` is `feed` for a reader that needs no more of an event than its
data (llmchat's own): a frame read at a frame boundary, one ``data:`` line
(and an ``event:`` line before it), comes as its data `str`, its name left
out; any other event as an `SSEEvent`. No object is built for the common frame.

`SSEDecoder(max_event_bytes=N)` bounds one event: its field lines, or one
line still being buffered, larger than N bytes raise `EventTooLarge` at once
(carrying the events completed before it in that feed), so a reader can drop
the connection instead of buffering a runaway line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias, cast

__all__ = [
    "EventTooLarge",
    "KeepAliveOnly",
    "KeepAliveWatch",
    "LeanEvent",
    "SSEDecoder",
    "SSEEvent",
]

_CR: Final = 0x0D
_LF: Final = 0x0A
_COLON: Final = 0x3A
_BOM: Final = b"\xef\xbb\xbf"


@dataclass(slots=True, unsafe_hash=True)  # not frozen: frozen __init__ is slow per frame
class SSEEvent:
    """One dispatched event, or one comment line.

    `data` is None for a comment (then `comment` holds its text). `terminated`
    is False only for an event still open when the body ended. `undecodable`
    is True when one of its lines was not UTF-8.
    """

    data: str | None = None
    event: str | None = None
    id: str | None = None
    comment: str | None = None
    terminated: bool = True
    undecodable: bool = False


LeanEvent: TypeAlias = "str | SSEEvent"
"""What `feed_data` gives: a plain event's data `str`, or any other event as an `SSEEvent`."""


class EventTooLarge(Exception):
    """One SSE event (or one line being buffered) passed the decoder's `max_event_bytes`.

    `events` holds the events the same `feed` completed before it, in order.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"Stream event larger than max_event_bytes ({limit} bytes)")
        self.limit = limit
        self.events: list[LeanEvent] = []
        """The events completed before it (`LeanEvent`s when read by `feed_data`)."""


class KeepAliveOnly(Exception):
    """A stream sent nothing but comments (keep-alive pings) for longer than its limit.

    A server that can no longer answer may go on pinging: llama-server's
    ``sse_ping_interval`` (30 s) writes ``:`` comments while a stream waits
    for its next token, and after a SIGTERM it waits forever. The pings keep
    every socket read short, so the read timeout alone never fires.
    """

    def __init__(self, limit: float) -> None:
        super().__init__(f"Body silent for more than {limit:g}s (keep-alive comments only)")
        self.limit = limit


class KeepAliveWatch:
    """Bounds the time a stream may answer with comments alone (`limit` seconds; None: no bound).

    Feed it each read's events with the read's time. A read that completes a
    comment and no event, `limit` seconds or more after the last event (or
    after the watch began: the headers), raises `KeepAliveOnly`; a read that
    completes no line at all (half an event) is neither. No clock of its own.
    """

    __slots__ = ("last", "limit")

    def __init__(self, limit: float | None, now: float) -> None:
        self.limit = limit
        self.last = now
        """When the last event (not a comment) arrived, or the watch began."""

    def seen(self, events: Sequence[LeanEvent], now: float) -> None:
        """One read's `events` arrived at `now`; raises `KeepAliveOnly` past the limit."""
        if not events:
            return
        for event in events:
            if isinstance(event, str) or event.comment is None:
                self.last = now
                return
        if self.limit is not None and now - self.last >= self.limit:
            raise KeepAliveOnly(self.limit)


def feed_collecting(feed: Callable[[bytes, list[LeanEvent]], None], data: bytes) -> list[LeanEvent]:
    """The events `feed(data, out)` appends to `out`, for a push decoder's ``feed``.

    An `EventTooLarge` leaves carrying the events completed before it (both
    decoders promise that); no data gives no events without calling `feed`.
    """
    out: list[LeanEvent] = []
    if not data:
        return out
    try:
        feed(data, out)
    except EventTooLarge as exc:
        exc.events = out
        raise
    return out


class SSEDecoder:
    """Turns body bytes into `SSEEvent`s; feed it whatever a read returned.

    `max_event_bytes` (None: no limit) bounds the bytes of one event's lines.
    `stray_json=True` reads a bare JSON object written between events (a line
    that starts with ``{``, and every line after it up to the next blank line
    or the end of the body) as one event whose data is those lines: Vertex AI
    sends a mid-stream error that way, with no ``data:`` prefix. Off, such
    lines are unknown fields and ignored, as EventSource does.
    """

    def __init__(self, max_event_bytes: int | None = None, *, stray_json: bool = False) -> None:
        self._max = max_event_bytes
        self._stray_json = stray_json
        self._stray = False  # inside a bare JSON object (stray_json only)
        self._event_bytes = 0  # bytes of the field lines of the open event
        self._partial = bytearray()
        self._skip_lf = False  # the last byte fed was a CR: a LF right after it ends nothing
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._undecodable = False
        self._open = False  # some field line arrived since the last dispatch
        self._first_line = True
        self._feed_lean = functools.partial(self._feed, lean=True)

    def feed_data(self, data: bytes) -> list[LeanEvent]:
        """`feed`, with the common frame's event as its data `str` (see the module doc).

        The reader's own feed (the runner's): a frame a read holds alone is
        read here without building any object but its text.
        """
        end = len(data) - 2
        if (
            data.endswith(b"\n\n")
            and not (self._skip_lf or self._first_line or self._open or self._partial)
            and b"\r" not in data
            and (self._max is None or end <= self._max)
        ):
            # A read that is exactly one frame (as `feed`), the data-only one inline.
            if data.startswith(b"data: ") and data.find(b"\n", 6) == end:
                try:
                    return [data[6:end].decode("utf-8")]
                except UnicodeDecodeError:
                    return [SSEEvent(undecodable=True)]
            event = self._one_frame(data)
            if event is not None:
                return [event if event.data is None else event.data]
        return feed_collecting(self._feed_lean, data)

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Return the events (and comments) that `data` completes.

        Raises `EventTooLarge` when an event passes `max_event_bytes`; the
        decoder is then spent (feed it no more).
        """
        if (
            data.endswith(b"\n\n")
            and not (self._skip_lf or self._first_line or self._open or self._partial)
            and b"\r" not in data
            and (self._max is None or len(data) - 2 <= self._max)
        ):
            # A read that is exactly one frame at a frame boundary: what a server
            # writing one HTTP chunk per event gives every read.
            event = self._one_frame(data)
            if event is not None:
                return [event]
        # Without `lean`, every event `_feed` makes is an SSEEvent.
        return cast("list[SSEEvent]", feed_collecting(self._feed, data))

    @staticmethod
    def _one_frame(data: bytes) -> SSEEvent | None:
        """The event of a whole frame of one ``data: `` line, or of an ``event: `` line
        and a ``data: `` line (Anthropic's and the Responses API's frames): the same
        event the line rules make of it. None for any other frame (the line rules
        read it), and for an event name that is not UTF-8.
        """
        end = len(data) - 2
        if data.startswith(b"data: "):
            if data.find(b"\n", 6) != end:
                return None
            try:
                return SSEEvent(data[6:end].decode("utf-8"))
            except UnicodeDecodeError:
                return SSEEvent(undecodable=True)
        if not data.startswith(b"event: "):
            return None
        newline = data.find(b"\n", 7)
        if not data.startswith(b"data: ", newline + 1) or data.find(b"\n", newline + 7) != end:
            return None
        try:
            name = data[7:newline].decode("utf-8")
            text = data[newline + 7 : end].decode("utf-8")
        except UnicodeDecodeError:
            return None
        return SSEEvent(text, name)

    def _feed(self, data: bytes, out: list[LeanEvent], lean: bool = False) -> None:
        if self._skip_lf or self._first_line or b"\r" in data:
            self._feed_lines(data, out)
            return
        if self._open or self._partial:
            # Finish the frame a previous read left open line by line, up to the
            # first blank line; from there on the state is clean again.
            end = data.find(b"\n\n")
            if end < 0:
                self._feed_lines(data, out)
                return
            self._feed_lines(data[: end + 2], out)
            data = data[end + 2 :]
        self._feed_frames(data, out, lean)

    def _feed_frames(self, data: bytes, out: list[LeanEvent], lean: bool) -> None:
        """The common case, at a frame boundary with LF line ends: split frames in C.

        A frame that is one ``data: `` line becomes an event directly (its data
        alone when `lean`); any other frame, and the unfinished tail, go through
        the line rules.
        """
        frames = data.split(b"\n\n")
        tail = frames.pop()
        # Only a read longer than the limit can hold a frame over it: then check each.
        limit = self._max if self._max is not None and len(data) > self._max else None
        for frame in frames:
            if limit is not None and len(frame) > limit:
                raise EventTooLarge(limit)
            if frame.startswith(b"data: ") and b"\n" not in frame:
                try:
                    text = frame[6:].decode("utf-8")
                    out.append(text if lean else SSEEvent(text))
                except UnicodeDecodeError:
                    out.append(SSEEvent(undecodable=True))
                continue
            for line in frame.split(b"\n"):
                self._line(line, out)
            self._line(b"", out)
        if tail:
            self._feed_lines(tail, out)

    def _feed_lines(self, data: bytes, out: list[LeanEvent]) -> None:
        """Any bytes, line by line, with CR, LF and CRLF line ends across feeds."""
        start = 0
        if self._skip_lf and data[:1] == b"\n":
            start = 1
        self._skip_lf = False
        length = len(data)
        while start < length:
            cr = data.find(b"\r", start)
            lf = data.find(b"\n", start)
            if cr < 0 and lf < 0:
                self._partial += data[start:]
                if self._max is not None and self._event_bytes + len(self._partial) > self._max:
                    raise EventTooLarge(self._max)
                return
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            if self._partial:
                self._partial += data[start:end]
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = data[start:end]
            self._line(line, out)
            start = end + 1
            if data[end] == _CR:
                if start < length and data[start] == _LF:
                    start += 1
                elif start == length:
                    self._skip_lf = True

    def flush(self) -> list[SSEEvent]:
        """At end of body: the event still open, if any, marked unterminated."""
        out: list[LeanEvent] = []
        if self._partial:
            line = bytes(self._partial)
            self._partial.clear()
            self._line(line, out)
        if self._open:
            out.append(self._dispatch(terminated=False))
        return cast("list[SSEEvent]", out)  # the line rules make SSEEvents only

    def _line(self, raw: bytes, out: list[LeanEvent]) -> None:
        if self._first_line:
            self._first_line = False
            if raw.startswith(_BOM):  # the EventSource rules strip one leading BOM
                raw = raw[len(_BOM) :]
        if not raw:
            if self._open:
                out.append(self._dispatch(terminated=True))
            return
        if raw[0] == _COLON:  # a comment: recognised before decoding, never a dropped frame
            text = raw[1:].decode("utf-8", "replace")
            out.append(SSEEvent(comment=text[1:] if text.startswith(" ") else text))
            return
        if self._max is not None:
            self._event_bytes += len(raw)
            if self._event_bytes > self._max:
                raise EventTooLarge(self._max)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            self._undecodable = True
            self._open = True
            return
        if self._stray or (self._stray_json and not self._open and line.startswith("{")):
            self._stray = True  # the whole line is JSON text, colons and all
            self._open = True
            self._data.append(line)
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        self._open = True
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        # "retry" and unknown fields are ignored, as EventSource does.

    def _dispatch(self, *, terminated: bool) -> SSEEvent:
        event = SSEEvent(
            data="\n".join(self._data) if self._data else None,
            event=self._event,
            id=self._id,
            terminated=terminated,
            undecodable=self._undecodable,
        )
        self._data = []
        self._event = None
        self._id = None
        self._undecodable = False
        self._open = False
        self._stray = False
        self._event_bytes = 0
        return event
