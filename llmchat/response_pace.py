"""Pacing: a streamed Response read only as fast as it is iterated.

By default the reader thread reads a stream as fast as the server sends it,
whoever iterates: a caller gets the whole answer even if it only calls
`wait()`. A consumer that forwards the chunks to a client that may stop
reading (the proxy) wants the opposite: the upstream held back by TCP, not
piled up in memory. `_pace(lead)` asks for that: the reader thread then waits
while `lead` chunks are published past the furthest any iterator has taken;
an iterator that has caught up reads on itself (`backends._baton`).
"""

from __future__ import annotations

import threading

from .response_writer import ResponseWriter, Written

__all__ = ["Pacing"]


class Pacing:
    """The `Response` side of pacing: ask for a lead (the writer keeps it and checks it)."""

    _cond: threading.Condition
    _writer: ResponseWriter[Written]

    def _pace(self, lead: int) -> None:
        """Read on only while fewer than `lead` chunks wait to be iterated.

        The lead lapses once the finish reason came (the tail is short and
        timed) and when the Response settles. A paced Response that nobody
        iterates reads no further than `lead`: cancel it to end it.
        """
        if isinstance(lead, bool) or not isinstance(lead, int) or lead < 1:
            raise ValueError(f"lead must be a positive int, got {lead!r}")
        with self._cond:
            self._writer.lead = lead

    def _has_room(self) -> bool:
        """Whether the reader thread may read on (`ResponseWriter.has_room`)."""
        return self._writer.has_room()
