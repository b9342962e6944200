"""Where a request ends, found incrementally from the bytes as they arrive.

The gunicorn worker (`gunicorn_worker`) reads a request in its poller and
hands the connection to a thread only once the request is whole, so a quiet
client never holds a thread. `RequestFraming` tells it when that is: after
the head, then ``Content-Length`` bytes, or a chunked body through its last
chunk and trailers. It never judges a request: on anything it does not
understand exactly as gunicorn's parser does (a bad chunk line, a bare LF,
conflicting lengths, a transfer coding other than chunked) it is `ready` at
once, and the thread's parser answers as it always has (400, 413, 501).
Being ready early only gives back the thread's own deadlines; being ready
late would make a client wait, so every doubt ends in ready.
"""

from __future__ import annotations

__all__ = ["RequestFraming"]

_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"
_HEX = frozenset(b"0123456789abcdefABCDEF")
# Past this much head the thread's parser takes over: the head's own deadline
# still bounds it, so a big head costs a thread no longer than a slow one.
HEAD_CAP = 80 * 1024


class RequestFraming:
    """One request's bytes and how far its framing has been read.

    `body_limit` is the app's largest body: a declared length over it is
    `ready` at the head (the app refuses it unread), a chunked body once more
    than that many body bytes have arrived (the app reads that much and
    refuses it). `line_limit` and `trailer_limit` are gunicorn's own caps on a
    chunk-size line and a trailer section, so past them its parser fails at
    once rather than waiting for more.
    """

    def __init__(self, body_limit: int, *, line_limit: int, trailer_limit: int) -> None:
        self.data = bytearray()
        self.ready = False
        """The connection should go to a thread now: whole, refused, or not understood."""
        self.head_done = False
        self.whole = False
        """The request is all here (or its body is to be invited: ``Expect: 100-continue``)."""
        self._body_limit = body_limit
        self._line_limit = line_limit
        self._trailer_limit = trailer_limit
        self._pos = 0  # where the scan resumes
        self._state = "head"  # head, length, size, data, crlf, trailers
        self._left = 0  # bytes of the body (length) or of the current chunk (data)
        self._decoded = 0

    def feed(self, data: bytes) -> bool:
        """Add `data`; whether the connection should now go to a thread (`ready`)."""
        self.data += data
        while not self.ready and self._step():
            pass
        return self.ready

    def _step(self) -> bool:
        """Advance one framing element; whether another step may make progress."""
        if self._state == "head":
            return self._head()
        if self._state == "length":
            if len(self.data) - self._pos >= self._left:
                self.ready = self.whole = True
            return False
        if self._state == "size":
            return self._size()
        if self._state == "data":
            taken = min(self._left, len(self.data) - self._pos)
            self._pos += taken
            self._left -= taken
            self._decoded += taken
            if self._decoded > self._body_limit:
                self.ready = True  # the app has all it reads before its 413
            elif self._left == 0:
                self._state = "crlf"
                return True
            return False
        if self._state == "crlf":
            if len(self.data) - self._pos < 2:
                return False
            if self.data[self._pos : self._pos + 2] != _CRLF:
                self.ready = True
                return False
            self._pos += 2
            self._state = "size"
            return True
        return self._trailers()

    def _head(self) -> bool:
        start = 2 if self.data[:2] == _CRLF else 0  # one empty line may precede it
        if self.data[:1] == b"\r" and len(self.data) < 2:
            return False
        end = self.data.find(_HEAD_END, max(start, self._pos - 3))
        if end < 0:
            self._pos = len(self.data)
            if self.data.count(b"\n") != self.data.count(_CRLF) or len(self.data) > HEAD_CAP:
                self.ready = True  # a bare LF (refused), or big: the thread reads on
            return False
        self.head_done = True
        self._pos = end + 4
        self._frame(bytes(self.data[start:end]))
        return not self.ready

    def _frame(self, head: bytes) -> None:
        """Pick the body's framing from the head, or be ready (no body, refused, unclear)."""
        request_line, *lines = head.split(_CRLF)
        lengths: list[bytes] = []
        codings: list[bytes] = []
        for line in lines:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip(b" \t"):
                self.ready = True  # malformed, folded, or a space before the colon: a 400
                return
            key = name.lower()
            value = value.strip(b" \t")
            if key == b"content-length":
                lengths.append(value)
            elif key == b"transfer-encoding":
                codings += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif key == b"expect" and value.lower() == b"100-continue":
                # Invited only when the app reads the body: see gunicorn_worker.
                self.ready = self.whole = True
                return
        if codings:
            chunked = codings == [b"chunked"] and request_line.endswith(b" HTTP/1.1")
            if chunked and not lengths:
                self._state = "size"
            else:
                self.ready = True  # stacked or unknown codings, or with a length: 400/501
            return
        if not lengths:
            self.ready = self.whole = True  # no body
            return
        [length] = lengths if len(lengths) == 1 else [b""]
        if not length.isdigit() or int(length) > self._body_limit:
            self.ready = True  # the parser's 400, or the app's 413 before any read
            return
        self._state, self._left = "length", int(length)

    def _size(self) -> bool:
        end = self.data.find(_CRLF, self._pos)
        if end < 0:
            if len(self.data) - self._pos > self._line_limit + 2:
                self.ready = True
            return False
        size = bytes(self.data[self._pos : end]).split(b";", 1)[0].rstrip(b" \t")
        if not size or not set(size) <= _HEX:
            self.ready = True
            return False
        self._pos = end + 2
        self._left = int(size, 16)
        self._state = "data" if self._left else "trailers"
        return True

    def _trailers(self) -> bool:
        if self.data[self._pos : self._pos + 2] == _CRLF:
            self.ready = self.whole = True  # the last chunk, no trailers
        elif self.data.find(_HEAD_END, self._pos) >= 0:
            self.ready = self.whole = True
        elif len(self.data) - self._pos > self._trailer_limit:
            self.ready = True
        return False
