"""How a relayed OpenAI stream ends when the upstream fails it: never as a clean end.

The relay passes the upstream's bytes through, but only whole SSE frames
(`FrameGate`): a frame the upstream left half-written is held back, so when the
upstream breaks off the client's SSE parser never sees ``data: {"choi``. The
stream then gets one last frame, ``data: {"error": {...}}`` in OpenAI's shape
with the proxy's fixed words for the failure's class (`error_frame`), and the
body is cut without its terminating chunk (`StreamCut`).

Why both the frame and the cut (checked with openai-node 6.49.0, the Python
``openai`` SDK, and the AI SDK 6's ``@ai-sdk/openai-compatible`` and
``@ai-sdk/openai`` ``.chat()``): the SDKs raise an ``APIError`` with the
frame's message as soon as they read it; the AI SDK reports it as an
``error`` part and then fails the stream on the cut. A client that ignores
an ``error`` frame (a hand-written SSE reader) still sees a broken body,
never a finished answer that lacks its end.
"""

from __future__ import annotations

import json
import re
from typing import Final

from ...error_shapes import StreamCut, error_body
from ...failures import client_message, status_for

__all__ = ["FrameGate", "StreamCut", "error_frame"]

# A blank line ends a frame: two line ends in a row, each CRLF, CR or LF. A CR
# right before a LF is half of one CRLF, never a line end of its own.
_FRAME_END: Final = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")


class FrameGate:
    """Passes on bytes up to the last complete SSE frame; holds the unfinished rest.

    `feed(bytes) -> bytes` and `flush() -> bytes` (the held rest, at a clean
    end); `drop()` forgets the rest when the stream failed. No I/O.
    """

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The bytes that end on a frame boundary (maybe fewer than given, maybe more)."""
        if not self._held and data.endswith(b"\n\n") and b"\r" not in data:
            return data  # one or more whole frames, as an upstream writes them
        buf = self._held + data
        end = 0
        for match in _FRAME_END.finditer(buf):
            end = match.end()
        self._held = buf[end:]
        return buf[:end]

    def feed_within(self, data: bytes, limit: int | None) -> bytes:
        """The whole frames of `data` before the first one longer than `limit`; the rest is
        dropped. For a read whose later event passed the size limit: one read may carry
        several frames, and those before the oversized one are still the client's."""
        buf, self._held = self._held + data, b""
        start = end = 0
        for match in _FRAME_END.finditer(buf):
            if limit is not None and match.start() - start > limit:
                break
            start = end = match.end()
        return buf[:end]

    def flush(self) -> bytes:
        """The unfinished rest, for a stream that ended well (a last frame ended by one LF)."""
        held, self._held = self._held, b""
        return held

    def drop(self) -> int:
        """Forget the unfinished rest; how many bytes it was."""
        held, self._held = self._held, b""
        return len(held)


def error_frame(error_class: str) -> bytes:
    """The SSE frame that ends a failed relayed stream: OpenAI's error shape, fixed words."""
    body = error_body("openai", status_for(error_class, None), client_message(error_class, None))
    return b"data: " + json.dumps(body).encode("utf-8") + b"\n\n"
