"""Who reads a streamed body: the reader thread, or the thread iterating the Response.

On a real server a token arrives every few milliseconds, so each one finds
the CPU cold. With the reader thread alone doing the reads, every token wakes
two threads — the reader from ``recv``, then the iterating consumer from its
wait — and the second wake-up costs more than all of llmchat's own work on the
frame (on the pinned llama-server: 1.4x the raw floor's CPU iterating, 0.95x
with nobody iterating). So the reads are a generator that either thread may
advance, one read at a time, and a baton says whose turn it is:

- an iterator with nothing new to yield advances the reads itself
  (`ReadBaton.pull`): one wake-up per token, its own;
- the reader thread parks while an iterator keeps pulling, and takes the
  reads back when nobody has pulled for `LEASE` seconds (no iterator, or one
  busy in its loop body), when the iterator leaves, and for good once the
  finish chunk has arrived (what follows it — usage, the end marker, the
  drain for keep-alive — runs under timers that a slow loop body must not
  eat into);
- the settle, the completion hooks and the drain always run on the reader
  thread, so what a caller's loop body does can never change how a stream
  ends. Per-payload hooks (`_lift_usage`, a dialect's decoder) run on
  whichever thread read the payload.

Each step yields the chunks its read made; the thread that took the step
publishes them and hands the turn back in one critical section, on the
Response's own lock (the baton's state lives under it), so a read costs the
reading iterator two lock acquisitions (take the turn; publish and hand it
back) and the reader thread one while it keeps the turn.

A cancel, deadline or grace abort shuts the socket down whichever thread is
in ``recv``. A `BaseException` (Ctrl-C) raised into an iterator's read cancels
the Response — the read cannot be resumed — and propagates to the caller.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Generator
from typing import Final, Literal

from ..chunk import Chunk
from ..pipeline.judge import CANCELLED_ENDING, Ending
from ..response import Response
from ..response_writer import ResponseWriter

__all__ = ["LEASE", "ReadBaton", "Reads"]

LEASE: Final = 0.05
"""Seconds an iterator may spend away (in its loop body) before the reader thread
takes the reads back. Short enough that a slow consumer never stalls the wire for
long, long enough that the reader wakes about twenty times a second, not per token."""

Reads = Generator[list[Chunk], None, Ending]
"""One step per body read, yielding the chunks it made (the baton publishes them);
returns the Ending (what its last reads made published by itself)."""


class ReadBaton:
    """The turn to advance one stream's reads, shared by its reader thread and iterators."""

    def __init__(self, reads: Reads, writer: ResponseWriter[Response]) -> None:
        self._reads = reads
        self._writer = writer
        # The Response's own lock: a step's chunks are published and the turn handed
        # back in one critical section.
        self._mutex = writer.mutex
        self._cond = threading.Condition(writer.mutex)
        self._owner: Literal["reader", "consumer"] | None = None
        self._pulling = 0  # iterators waiting for the reader's step to end
        self._last_pull = -math.inf  # monotonic end of an iterator's last step
        self._closed = False  # iterators may no longer pull
        self._ended = False
        self._ending: Ending | None = None
        self._error: Exception | None = None

    # -- the reader thread ------------------------------------------------------

    def run(self) -> Ending:
        """Advance the reads whenever no iterator holds the lease; their Ending.

        Raises what a read raised (in whichever thread it ran), so the caller
        translates it exactly as before.
        """
        if self._writer.attach_puller(self):
            # An iterator is already waiting: let it take the first read.
            self._last_pull = time.monotonic()
        try:
            while self._take():
                while self._step("reader"):
                    pass
        finally:
            self._close()
        if self._error is not None:
            raise self._error
        assert self._ending is not None
        return self._ending

    def _take(self) -> bool:
        """Wait for the reader's turn; False once the reads have ended."""
        with self._mutex:
            while not self._ended:
                if self._owner is None and not self._pulling:
                    if self._reader_may_read():
                        self._owner = "reader"
                        return True
                    idle = time.monotonic() - self._last_pull
                    # Paced and a lead ahead (no room): the consumer reads on itself
                    # when it catches up, or a settle lets this thread read to the end.
                    self._cond.wait(LEASE if idle >= LEASE else LEASE - idle)
                else:
                    # An iterator's read is under way, or one waits for its turn: it
                    # does not wake this thread per read, so look again after a lease.
                    self._cond.wait(LEASE)
            return False

    def _reader_may_read(self) -> bool:
        # Under the lock, with the turn free and no iterator waiting for it.
        return self._writer.has_room() and (
            self._closed or time.monotonic() - self._last_pull >= LEASE
        )

    # -- an iterating consumer --------------------------------------------------

    def pull(self) -> bool:
        """One read on the calling (iterating) thread, or wait for the reader's to end.

        True when the caller should look for new chunks again; False when
        iterators may no longer read (the baton has left the Response: wait
        for chunks as usual).
        """
        with self._mutex:
            if self._closed:
                gone = True
            elif self._owner is not None:
                self._pulling += 1
                try:
                    self._cond.wait_for(lambda: self._owner is None or self._closed)
                finally:
                    self._pulling -= 1
                return True
            else:
                self._owner = "consumer"
                gone = False
        if gone:
            self._writer.detach_puller(self)
            return False
        self._step("consumer")
        return True

    def leave(self) -> None:
        """An iterator stopped (finished, broke out, or was closed): the reader reads on now."""
        with self._mutex:
            self._last_pull = -math.inf
            self._cond.notify_all()

    # -- both -------------------------------------------------------------------

    def _step(self, who: Literal["reader", "consumer"]) -> bool:
        """One read, its chunks published and the turn handed back in one critical section.

        True when the reader thread keeps the turn for its next read (nobody
        waits for it and it may read on): then it takes no lock to take it.
        """
        chunks: list[Chunk] | None = None
        keep = False
        try:
            chunks = next(self._reads)
        except StopIteration as stop:
            self._end(stop.value, None)
        except Exception as exc:
            self._end(None, exc)
        except BaseException:
            # Ctrl-C in the caller's own read: the generator cannot resume, so the
            # stream is over; cancel it (the socket is shut down) and let it propagate.
            self._end(CANCELLED_ENDING, None)
            self._writer.response.cancel()
            raise
        finally:
            with self._mutex:
                if chunks:
                    self._writer.publish_locked(chunks)
                if who == "consumer":
                    self._last_pull = time.monotonic()
                    if self._writer.response.finish_reason is not None:
                        self._closed = True  # the tail is the reader's (see the module doc)
                else:
                    keep = not (self._ended or self._pulling) and self._reader_may_read()
                if not keep:
                    self._owner = None
                    if self._closed or self._pulling:
                        self._cond.notify_all()
        return keep

    def _end(self, ending: Ending | None, error: Exception | None) -> None:
        with self._mutex:
            if self._ended:
                return
            self._ended = self._closed = True
            self._ending, self._error = ending, error
            self._cond.notify_all()

    def _close(self) -> None:
        with self._mutex:
            self._closed = True
            self._cond.notify_all()
        self._writer.detach_puller(self)
