"""The ejection policy: which failures take a node out, and for how long.

A node that fails a request (a refused connection, a timeout, a 5xx but
503, a broken answer, or a refusal of the proxy's own key) is ejected for a
back-off: `BACKOFF_BASE` seconds, doubling with each ejection that follows
without a success in between, up to `BACKOFF_CAP`. A failure that is the
client's (a 4xx other than 401, 403 and 408, a 429) or a cancel never
ejects. The back-off is the least time out; the node comes back only when a
probe succeeds after it (`health.HealthMonitor`), never by time alone.

A 503 is not a failure: the node is up but not serving yet (llama-server
answers it while loading its model; a server shedding load says the same).
`not_ready` is that one rule, for a request's answer and a probe's alike:
the node is not eligible until a probe finds it healthy, with no strike and
no back-off.

Pure bookkeeping (no I/O, no clock of its own): `Backoff` is one node's
state, and every method takes the time it acts at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ...pipeline.judge import ERR_STREAM_CLOSED

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "EJECTING_CLASSES",
    "NOT_READY_STATUS",
    "Backoff",
    "broke_off",
    "ejects",
    "not_ready",
]

BACKOFF_BASE: Final = 5.0
"""Seconds out after a first ejection."""
BACKOFF_CAP: Final = 60.0
"""The longest back-off, however many ejections in a row."""

EJECTING_CLASSES: Final = frozenset({"connection", "timeout", "response", "unknown"})
"""`Response.error_class` values that eject whatever the status (``http`` depends on it)."""

NOT_READY_STATUS: Final = 503
"""The status of a node that is up but not serving yet (loading its model, shedding load)."""

_NODE_STATUSES: Final = frozenset({401, 403, 408})
"""4xx statuses that are the node's doing, not the client's: its key refused, its timeout."""


def ejects(error_class: str | None, status: int | None = None) -> bool:
    """Whether a request that failed with `error_class` (and HTTP `status`) ejects its node.

    ``http`` ejects for a 5xx but 503 (`not_ready`), an answer with no
    status, and 401, 403 or 408; any other 4xx (429 included) is the
    client's or a capacity answer. A cancel (``client_abort``,
    ``cancelled``) and anything unknown to the table never ejects.
    """
    if error_class in EJECTING_CLASSES:
        return True
    if error_class != "http" or not_ready(error_class, status):
        return False
    return status is None or status >= 500 or status in _NODE_STATUSES


def broke_off(error_class: str | None, err: str | None) -> bool:
    """Whether a stream that had started failed by the node's doing: cut, silent, or gone.

    A connection lost, a read that timed out, or a stream that closed without
    ``[DONE]`` or a finish reason. Not an answer the model ended (``length``,
    ``content_filter``), an in-band error about the request, or anything
    malformed: the node served those, and another request may be fine there.
    """
    if error_class in ("connection", "timeout"):
        return True
    return error_class == "response" and err == ERR_STREAM_CLOSED


def not_ready(error_class: str | None, status: int | None) -> bool:
    """Whether an answer (a request's or a probe's) says its node is up but not serving yet.

    A 503: not eligible until a probe finds the node healthy; never a strike.
    """
    return error_class == "http" and status == NOT_READY_STATUS


@dataclass
class Backoff:
    """One node's ejection state: ejected or not, until when, and for what.

    `strikes` counts the ejections since the last success; the next
    ejection lasts ``BACKOFF_BASE * 2**strikes`` seconds (capped). Not
    thread-safe: the monitor holds its lock around every call.
    """

    base: float = BACKOFF_BASE
    cap: float = BACKOFF_CAP
    strikes: int = 0
    """Ejections since the last success (a request, or a probe while admitted)."""
    until: float | None = None
    """When the back-off ends (clock seconds); None while the node is admitted."""
    reason: str = ""
    """Why the node was ejected, in llmchat's words; empty while admitted."""

    @property
    def ejected(self) -> bool:
        """Whether the node is out (until a probe after `until` succeeds)."""
        return self.until is not None

    def eject(self, now: float, reason: str) -> float:
        """Take the node out from `now`; returns the back-off in seconds."""
        seconds = min(self.cap, self.base * 2.0 ** min(self.strikes, 32))
        self.strikes += 1
        self.until = now + seconds
        self.reason = reason
        return seconds

    def served(self) -> None:
        """The node served (a request, or a probe while admitted): back-offs start again at base."""
        self.strikes = 0

    def may_readmit(self, now: float) -> bool:
        """Whether a probe succeeding at `now` brings the node back (its back-off is over)."""
        return self.until is not None and now >= self.until

    def readmit(self) -> None:
        """The node is back; `strikes` stay until it serves (a flapping node backs off longer)."""
        self.until = None
        self.reason = ""

    def remaining(self, now: float) -> float:
        """Seconds of back-off left at `now` (0.0 when admitted or over)."""
        return 0.0 if self.until is None else max(0.0, self.until - now)
