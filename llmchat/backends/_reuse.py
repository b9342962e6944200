"""After a stream's explicit end: read its body to the end, so the connection can be reused.

A dialect's explicit end (``[DONE]``, ``message_stop``, ``response.completed``,
``done: true``) comes before the body's own end (the chunked terminator, or
the last byte of a Content-Length), and urllib3 pools a connection only once
its body was read to that end. `drain` reads on, in the reader thread after
the Response settled, for at most `reuse_grace`; the body ending there leaves
the connection in the pool. Anything else closes it: the grace running out
(the `"reuse"` abort shuts the socket down), a cancel or deadline, a read
error, or the body going on with more than whitespace or one more
``data: [DONE]`` (OpenRouter sends one after ``response.completed``).
"""

from __future__ import annotations

from typing import Final

from ..transport import Exchange, TransportResponse

__all__ = ["drain"]

_HARMLESS_TAIL: Final = b"data: [DONE]"
"""Besides whitespace, the only bytes allowed between the explicit end and the body's end."""
_TAIL_LIMIT: Final = 256


def drain(http: TransportResponse, exchange: Exchange, seconds: float) -> str:
    """Read the rest of `http`'s body for up to `seconds`; return ``"back in the pool"`` or why not.

    The caller closes `http` and finishes `exchange` afterwards; after a clean
    end that leaves the connection pooled, otherwise it drops it.
    """
    if exchange.aborted is not None:
        return f"closed: {exchange.aborted}"
    exchange.schedule_abort(seconds, "reuse")
    tail = b""
    try:
        for data in http.iter_bytes():
            tail += data
            if len(tail) > _TAIL_LIMIT or not _HARMLESS_TAIL.startswith(tail.strip()):
                return "closed: bytes after the end"
    except Exception as exc:
        if exchange.aborted == "reuse":
            return f"closed: the body did not end within reuse_grace ({seconds:g}s)"
        return f"closed: {exchange.aborted or type(exc).__name__}"
    if exchange.aborted is not None:  # a body that ends after an abort never ends cleanly
        return f"closed: {exchange.aborted}"
    return "back in the pool"
