"""A request's body as ``wsgi.input``: never a byte past its end, so keep-alive stays in step.

On a kept-alive connection the next request's bytes follow this body on the
same stream. `LengthBody` (``Content-Length``) and `ChunkedBody`
(``Transfer-Encoding: chunked``, RFC 9112 §7.1) each end at the body's end
and report `complete`, so the server can tell whether the connection is
still in step once the app is done: if not, it drains what is left
(`drain`) or closes the connection.

The first read sends ``100 Continue`` when the client asked for it (`on_first_read`):
an app that refuses the request without reading its body never invites it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

__all__ = ["BadChunk", "ChunkedBody", "LengthBody", "RequestBody", "Unframeable", "body_of"]

# A chunk-size line, its extensions, or a trailer longer than this is refused:
# they are metadata, and an endless one must not grow a buffer forever.
_LINE_MAX = 4096
_TRAILERS_MAX = 64
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")  # int(x, 16) would also take "0x", "_", " "
_LENGTH = re.compile(r"[0-9]{1,18}")  # int() would also take "+1", "1_0", " 1"


class BadChunk(ValueError):
    """The chunked framing is broken; the connection cannot be read any further."""


class RequestBody(io.RawIOBase):
    """The raw reader under ``wsgi.input``: reads from the connection's `rfile`, up to the end."""

    def __init__(self, rfile: Any, on_first_read: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._rfile = rfile
        self._on_first_read = on_first_read
        self.complete = False
        """Set once the whole body has been read: the connection is at the next request."""
        self.broken = False
        """Set when a read failed: the connection can no longer be put back in step."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.complete:
            return 0
        if self._on_first_read is not None:
            invite, self._on_first_read = self._on_first_read, None
            invite()
        try:
            return self._read_into(memoryview(buffer).cast("B"))
        except (OSError, ValueError):
            self.broken = True  # a deadline passed, the framing broke: out of step for good
            raise

    def _read_into(self, view: memoryview) -> int:
        raise NotImplementedError

    def settles(self, limit: int) -> bool:
        """Whether the connection can be put back in step after the answer: by `drain(limit)`."""
        return self.complete

    @property
    def invited(self) -> bool:
        """Whether the client may be sending the body (no ``100 Continue`` is still withheld)."""
        return self._on_first_read is None

    def drain(self, limit: int) -> bool:
        """Read and drop up to `limit` more bytes of body; whether its end was reached.

        Never sends a withheld ``100 Continue``: a client that was not invited
        to send the body may not, and waiting for it would hang.
        """
        if self.broken or not self.invited:
            return self.complete
        left = limit
        scrap = bytearray(min(65536, limit + 1))
        try:
            while not self.complete and left >= 0:
                count = self._read_into(memoryview(scrap))
                if count == 0 and not self.complete:
                    return False  # the client ended the connection inside its body
                left -= count
        except (OSError, ValueError):  # a deadline passed (TimeoutError), bad framing
            return False
        return self.complete


class LengthBody(RequestBody):
    """A body of ``Content-Length`` bytes."""

    def __init__(
        self, rfile: Any, length: int, on_first_read: Callable[[], None] | None = None
    ) -> None:
        super().__init__(rfile, on_first_read)
        self.left = length
        self.complete = length == 0

    def settles(self, limit: int) -> bool:
        return self.complete or (not self.broken and self.invited and self.left <= limit)

    def _read_into(self, view: memoryview) -> int:
        if self.left == 0:
            return 0
        count = self._rfile.readinto(view[: self.left])
        if not count:
            # The client closed its end inside the body; the app sees a short body.
            return 0
        self.left -= count
        self.complete = self.left == 0
        return int(count)


class ChunkedBody(RequestBody):
    """A ``Transfer-Encoding: chunked`` body, de-chunked; trailers are read and dropped."""

    def __init__(self, rfile: Any, on_first_read: Callable[[], None] | None = None) -> None:
        super().__init__(rfile, on_first_read)
        self._in_chunk = 0  # bytes left in the current chunk's data

    def _read_into(self, view: memoryview) -> int:
        if self._in_chunk == 0:
            size = self._chunk_size()
            if size == 0:
                self._trailers()
                self.complete = True
                return 0
            self._in_chunk = size
        count = self._rfile.readinto(view[: self._in_chunk])
        if not count:
            raise BadChunk("the request body ended inside a chunk")
        self._in_chunk -= count
        if self._in_chunk == 0 and self._line() != b"":
            raise BadChunk("a chunk of the request body does not end with CRLF")
        return int(count)

    def _chunk_size(self) -> int:
        line = self._line()
        size = line.split(b";", 1)[0].strip(b" \t")  # RFC 9112 §7.1.1: extensions are ignored
        if not _CHUNK_SIZE.fullmatch(size):
            raise BadChunk("a chunk size in the request body is not hexadecimal")
        return int(size, 16)

    def _trailers(self) -> None:
        for _ in range(_TRAILERS_MAX):
            if self._line() == b"":
                return
        raise BadChunk("the request body has too many trailer lines")

    def _line(self) -> bytes:
        """One CRLF-ended line without its CRLF; a bare LF or an overlong line is refused."""
        line = bytes(self._rfile.readline(_LINE_MAX + 2))
        if not line.endswith(b"\r\n"):
            if not line:
                raise BadChunk("the request body ended inside its chunked framing")
            raise BadChunk("a line of the request body's chunked framing is malformed")
        return line[:-2]


class Unframeable(ValueError):
    """The request's head does not say where its body ends; answer `status` and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def body_of(
    headers: Any, rfile: Any, on_first_read: Callable[[], None] | None
) -> tuple[RequestBody, int | None]:
    """The body `headers` frame, read from `rfile`, and its Content-Length (`None` if chunked).

    RFC 9112 §6.3: a request with both framings, or a transfer coding other
    than chunked, cannot be read safely; neither can differing lengths.
    """
    codings = headers.get_all("Transfer-Encoding") or []
    lengths = headers.get_all("Content-Length") or []
    if codings:
        if lengths:
            raise Unframeable(400, "Send Transfer-Encoding or Content-Length, not both")
        named = [c.strip().lower() for c in ",".join(codings).split(",") if c.strip()]
        if named != ["chunked"]:
            raise Unframeable(501, "Only Transfer-Encoding: chunked is supported")
        return ChunkedBody(rfile, on_first_read), None
    if not lengths:
        return LengthBody(rfile, 0), None
    given = {v.strip() for v in ",".join(lengths).split(",")}
    text = given.pop() if len(given) == 1 else ""
    if not _LENGTH.fullmatch(text):
        raise Unframeable(400, "Content-Length is not a number")
    length = int(text)
    return LengthBody(rfile, length, on_first_read if length else None), length
