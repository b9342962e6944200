"""RecordedRequest: one request as the server received it, and what became of the reply."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from .headers import Headers
from .script import Reply

__all__ = ["RecordedRequest"]


@dataclass(eq=False)
class RecordedRequest:
    """One request the server read, with the timeline of its reply.

    The server appends it to `ScriptedServer.requests` as soon as the request
    is fully read, before the reply is chosen, and fills in the reply fields
    from its handler thread as they happen. All times are `time.monotonic()`
    seconds, comparable with the test's own. Wait on `finished` before
    asserting on the timeline of a reply the client has already read: the
    client can see the last byte before the server thread records it.
    """

    index: int
    """Position in `ScriptedServer.requests` (0-based, in order of arrival)."""
    connection_id: int
    """Which accepted connection carried it (0-based); equal ids mean keep-alive reuse."""
    method: str
    path: str
    """The request target as sent, query string included."""
    http_version: str
    """`"HTTP/1.1"` or `"HTTP/1.0"`."""
    headers: Headers
    """Case-insensitive; `headers.fields` keeps the exact pairs."""
    body: bytes = field(repr=False)
    """The body, de-chunked when it came with `Transfer-Encoding: chunked`."""
    raw: bytes = field(repr=False)
    """The exact bytes received for this request, head and (still chunked) body."""
    received_at: float
    """When the last byte of the request arrived."""
    reply: Reply | None = field(default=None, repr=False)
    """The reply the script chose; None until chosen."""
    headers_sent_at: float | None = None
    """When the status line and headers were handed to the kernel; None if never sent."""
    first_body_byte_at: float | None = None
    """When the first body `Write` was sent; None if no body byte went out."""
    finished_at: float | None = None
    """When the server was done with the reply, sent or abandoned; None until then."""
    disconnected_at: float | None = None
    """When the server saw the client go; None unless it left before the reply finished."""
    writes: list[tuple[float, int]] = field(default_factory=list, repr=False)
    """`(time, payload bytes)` for every `Write` fully handed to the kernel, framing excluded."""
    disconnected: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set when the client closed or reset the connection before the reply finished.

    Seen while the server waits (`Pause`, `Stall`, `WaitFor`, before each
    `Write`) or when a write fails; a client leaving after a complete reply
    does not set it.
    """
    finished: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set once `finished_at` is; the handler touches nothing of this record afterwards."""

    def json(self) -> Any | None:
        """Return the body parsed as UTF-8 JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
            return None

    @property
    def status(self) -> int | None:
        """The status code of the chosen reply; None until one is chosen."""
        return None if self.reply is None else self.reply.status
