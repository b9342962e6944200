"""Where usage events go: a JSON-lines file, a callback or a store (`UsageLog`).

A JSON line is written with one `os.write` on an ``O_APPEND`` descriptor, so
several processes (gunicorn workers) appending to one file never interleave or
lose a line: the kernel places each write at the end of the file whole. A line
starts on a new line whatever came before: when the file does not end in a
newline (a write cut short by a full disk, here or in another process), the
line is written after one, so it is never glued onto the torn one (writers
hold an advisory lock while they check the end and append). The stores
(`store`, `sql`) are for totals across processes and machines.

Nothing a client sends makes an event large (`usage.fields` bounds every
field), and refusals that need no key to provoke (`PROBE_STATUSES` without an
accepted key) are recorded up to `PROBES_PER_MINUTE` per process and counted
past that, so a flood of them costs a bounded amount of storage per minute.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import wire_json
from .event import UsageEvent

if TYPE_CHECKING:
    from .prices import PriceTable
    from .store import UsageStore

__all__ = ["PROBES_PER_MINUTE", "ProbeBudget", "UsageLog"]

log = logging.getLogger("llmchat.proxy")

PROBES_PER_MINUTE = 60
"""Probe refusals recorded per process and minute; the rest are counted in a WARNING."""


class ProbeBudget:
    """How many probe refusals are recorded: `per_window` per `window` seconds; the rest counted.

    The first refusal past the budget and the count at the window's end each
    leave one WARNING line, so an operator sees the probing without it filling
    the store.
    """

    def __init__(self, per_window: int = PROBES_PER_MINUTE, window: float = 60.0) -> None:
        self.per_window = per_window
        self.window = window
        self.dropped = 0
        """Probe refusals counted, not recorded, since this process started."""
        self._lock = threading.Lock()
        self._start = -window
        self._used = 0
        self._dropped_now = 0

    def admit(self) -> bool:
        """Whether to record one more probe refusal now."""
        with self._lock:
            now = time.monotonic()
            ended = 0
            if now - self._start >= self.window:
                ended, self._dropped_now = self._dropped_now, 0
                self._start, self._used = now, 0
            admitted = self._used < self.per_window
            if admitted:
                self._used += 1
            else:
                self._dropped_now += 1
                self.dropped += 1
            first_dropped = not admitted and self._dropped_now == 1
        if ended:
            log.warning("%d refused requests (HTTP 401/404/405, no key) were not recorded", ended)
        if first_dropped:
            log.warning(
                "more than %d refused requests (HTTP 401/404/405, no key) in %g s: "
                "the rest are counted, not recorded",
                self.per_window,
                self.window,
            )
        return admitted


class UsageLog:
    """Where usage events go: `target` is a path (JSON lines, appended) or a callable,
    and `store` a `UsageStore`; either may be None.

    A failing sink is logged and never fails the request it describes.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | Callable[[dict[str, Any]], Any] | None,
        store: UsageStore | None = None,
    ):
        if (
            target is not None
            and not callable(target)
            and not isinstance(target, (str, os.PathLike))
        ):
            raise TypeError("usage_log must be a file path, a callable taking a dict, or None")
        self._target = target
        self.store = store
        self.probes = ProbeBudget()
        self.prices: PriceTable | None = None
        """The prices `emit` fills `UsageEvent.cost` from; the app swaps it on reload."""
        self.listeners: list[Callable[[UsageEvent], None]] = []
        """Called with each event once its cost is set (budgets, metrics; not a probe past
        the probe budget); a failing one is logged."""

    def emit(self, event: UsageEvent) -> None:
        prices = self.prices
        if prices is not None:
            prices.fill(event)
        if event.is_probe and not self.probes.admit():
            return
        # The store first: a budget re-reads it and counts only what the listeners
        # heard since it began, so a listener must never hear of an unstored event.
        if self.store is not None:
            try:
                self.store.record(event)
            except Exception as exc:
                # No traceback: a database error's text is the store's to scrub.
                log.warning(
                    "usage event for %s was not stored: %s",
                    event.request_id,
                    self.store.describe_error(exc),
                )
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                log.warning("usage event for %s was not counted", event.request_id, exc_info=True)
        target = self._target
        if target is not None:
            try:
                if callable(target):
                    target(event.as_dict())
                else:
                    _append_line(target, wire_json.encode_data(event.as_dict()) + b"\n")
            except Exception:
                log.warning("usage event for %s was not logged", event.request_id, exc_info=True)


def _append_line(path: str | os.PathLike[str], line: bytes) -> None:
    """Append `line` with one write, so concurrent writers never interleave.

    Opened per event, so a rotated log (renamed away by logrotate) is followed.
    After a torn line (the file does not end in a newline) the line starts
    with one, so the next event is never glued onto it.
    """
    flags = os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | os.O_RDWR, 0o644)
    except PermissionError:
        # A log the proxy may append to but not read: written unchecked.
        fd = os.open(path, flags | os.O_WRONLY, 0o644)
        readable = False
    else:
        readable = True
    try:
        if readable:
            # Held while the end is checked and the line written: without it, a
            # line another process is part-way through writing looks torn.
            _lock(fd)
            if not _ends_a_line(fd):
                line = b"\n" + line
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):
        # Only a full disk or a quota does this; the rest of the line would be a torn line.
        raise OSError(f"short write to the usage log: {written} of {len(line)} bytes")


def _ends_a_line(fd: int) -> bool:
    """Whether the file is empty or ends in a newline; True for a pipe or a terminal."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return True
    return os.pread(fd, 1, info.st_size - 1) == b"\n"


def _lock(fd: int) -> None:
    """An exclusive advisory lock on the log for the rest of this open (released at close)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: unlocked, and a rare race leaves a blank line
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        pass  # a filesystem without locks: the event is still written, unlocked
