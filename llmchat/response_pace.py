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

from .chunk import Chunk

__all__ = ["Pacing"]


class Pacing:
    """The `Response` side of pacing: the lead asked for, and how far iterators took it."""

    _cond: threading.Condition
    _chunks: list[Chunk]
    is_done: bool
    finish_reason: str | None

    _lead: int | None = None
    _taken: int = 0
    """How many chunks the furthest iterator has taken (set by `Response.__iter__`)."""

    def _pace(self, lead: int) -> None:
        """Read on only while fewer than `lead` chunks wait to be iterated.

        The lead lapses once the finish reason came (the tail is short and
        timed) and when the Response settles. A paced Response that nobody
        iterates reads no further than `lead`: cancel it to end it.
        """
        if isinstance(lead, bool) or not isinstance(lead, int) or lead < 1:
            raise ValueError(f"lead must be a positive int, got {lead!r}")
        with self._cond:
            self._lead = lead

    def _has_room(self) -> bool:
        """Whether the reader thread may read on (always, unless paced and `lead` ahead)."""
        lead = self._lead
        if lead is None or self.is_done or self.finish_reason is not None:
            return True
        return len(self._chunks) - self._taken < lead
