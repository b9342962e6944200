"""A chunked body's reads that hand over every chunk already received, not one chunk per read.

`http.client`'s ``read1`` on a chunked body returns at most one HTTP chunk,
and a streaming server writes each SSE event as its own chunk: one event per
read, so every event pays the whole per-read cost above the transport. The
read here returns the data of every chunk the socket's buffer already holds
(whole chunks, and the start of one still arriving) at the price of one
buffered peek: it never waits for more than one receive, so an event is
handed over as soon as its bytes are here, as before.

The framing state stays `http.client`'s own (``chunk_left``), updated after
each read, and whatever the buffer cannot settle at once is left to
`http.client`'s ``read1``: a size line or chunk end still arriving, a line it
would reject, the last chunk with its trailers, the end of the stream. So the
bytes, the exceptions (`IncompleteRead`, `LineTooLong`), the connection
closed at the end, and a later reader going on from where this one stopped
are exactly `http.client`'s.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Callable

__all__ = ["chunked_read1"]

_MAXLINE = 65536
"""`http.client`'s longest size or trailer line; a longer one is left to it (`LineTooLong`)."""

_LONG_CHUNK = io.DEFAULT_BUFFER_SIZE
"""Past this many bytes left in a chunk, read it with `http.client`: one receive into the
chunk (up to the read size) beats a peek, which fills the socket file's buffer at most."""


def chunked_read1(fp: http.client.HTTPResponse) -> Callable[[int], bytes] | None:
    """A ``read1(n)`` for `fp`'s chunked body returning every buffered chunk's data at once.

    None when `fp` is not a chunked body read from a buffered socket file
    (then its own ``read1`` is the one to use). An empty result is the body's
    clean end, with `fp` closed as its own ``read1`` leaves it.
    """
    if not getattr(fp, "chunked", False) or getattr(fp, "_method", None) == "HEAD":
        return None
    if not isinstance(fp.fp, io.BufferedReader) or not hasattr(fp, "chunk_left"):
        return None
    fallback = fp.read1

    def read1(n: int) -> bytes:
        while True:
            left: int | None = fp.chunk_left
            if left is not None and not 0 <= left <= _LONG_CHUNK:
                return fallback(n)  # a long chunk, or a state only http.client makes sense of
            socket_file = fp.fp
            if socket_file is None:  # the body has ended
                return b""
            buffered = socket_file.peek()  # what is buffered, else what one receive brings
            pieces, used, left = _take(buffered, left)
            if used:
                socket_file.read(used)  # consumes what `_take` settled: served from the buffer
                fp.chunk_left = left
                if pieces:
                    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
                continue  # a size line with no data after it yet: the next peek waits for it
            # Nothing settled from the buffer: http.client's own step waits for the
            # rest of a line, reads the last chunk, or raises on bad framing.
            return fallback(n)

    return read1


def _take(buffered: bytes, left: int | None) -> tuple[list[bytes], int, int | None]:
    """The chunk data in `buffered`, how many of its bytes that settles, and the chunk left then.

    `left` is `http.client`'s ``chunk_left``: the data still to come in the
    current chunk, 0 when only its CRLF is, None when a size line is next.
    It stops before anything `http.client` must judge: an unfinished or
    over-long line, a size it would not take as a positive chunk (the last
    chunk is 0).
    """
    pieces: list[bytes] = []
    pos, end = 0, len(buffered)
    while True:
        if left:
            stop = pos + left
            if stop >= end:
                if end > pos:
                    pieces.append(buffered[pos:end])
                return pieces, end, stop - end
            pieces.append(buffered[pos:stop])
            pos, left = stop, 0
        if left == 0:
            if end - pos < 2:
                return pieces, pos, 0
            pos += 2  # the chunk's CRLF, tossed unread as http.client does
            left = None
        newline = buffered.find(b"\n", pos)
        if newline < 0 or newline - pos >= _MAXLINE:
            return pieces, pos, None
        line = buffered[pos:newline]
        semicolon = line.find(b";")  # chunk extensions are ignored, as http.client does
        try:
            size = int(line if semicolon < 0 else line[:semicolon], 16)
        except ValueError:
            return pieces, pos, None
        if size <= 0:
            return pieces, pos, None
        pos, left = newline + 1, size
