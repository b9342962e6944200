"""ResponseWriter: the write side of one `Response`, the runners' narrow handle.

A Response is read by its caller and written by exactly one runner. The
writer holds the Response's live state (its lock, the chunks and text parts,
who waits, what tears the transport down) and the only operations that
change it: publish chunks, record fields, attach the aborter and the read
baton, note the headers, settle once. The Response reads the same state
under the same lock; nothing else writes it. Each write is a no-op once the
Response has settled, so a late read can never change a settled Response.

The runners get the writer with `response.writer_of(response)` and pass
`writer.response` to the hooks, which see only the public Response. This
module knows the Response only by the fields it sets (`Written`), so that
`response.py` imports it and not the other way round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from .chunk import Chunk
from .dialects.error_body import ErrorBody
from .errors import ErrorClass
from .redact import Redactor
from .timing import Timing
from .tools import ToolCall

__all__ = ["Puller", "ResponseWriter", "Written"]

log = logging.getLogger("llmchat")


class Puller(Protocol):
    """What lets an iterator do a stream's reads itself (`backends._baton.ReadBaton`)."""

    def pull(self) -> bool: ...

    def leave(self) -> None: ...


class Written(Protocol):
    """The fields a writer sets on its Response (`llmchat.response.Response`'s own)."""

    is_done: bool
    is_success: bool
    is_cancelled: bool
    err: str | None
    error_class: ErrorClass | None
    error_status: int | None
    retry_after: str | None
    finish_reason: str | None
    tool_calls: list[ToolCall]
    timing: Timing


R = TypeVar("R", bound=Written, covariant=True)


class ResponseWriter(Generic[R]):
    """The write operations on one Response, and the live state they share with it.

    Made by the Response itself (one each); llmchat's runners call the
    methods, user code does not. The attributes are the state the Response
    reads under `cond`; only these methods and `Response.cancel` change them.
    """

    def __init__(self, response: R, secrets: tuple[str, ...]) -> None:
        self.response: R = response
        self.redactor = Redactor.of(secrets)
        # `cond`: waiters for the settle and the first content (`wait`,
        # `wait_for_content`). `arrived`: iterators waiting for chunks, on the
        # same lock, so a read that adds chunks wakes only them (never a thread
        # parked in `wait()`), and only when one waits (`waiting`, under the
        # lock); made by the first iterator that waits (a blocking call has none).
        self.mutex = threading.Lock()
        self.cond = threading.Condition(self.mutex)
        self.arrived: threading.Condition | None = None
        self.waiting = 0
        # While set, an iterator with nothing new reads the next bytes itself
        # instead of waiting for the reader thread (`backends/_baton.py`).
        self.puller: Puller | None = None
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.chunks: list[Chunk] = []
        self.aborter: Callable[[], None] | None = None
        self.cancel_hooks: list[Callable[[], None]] = []
        self.settle_hooks: list[Callable[[], None]] = []
        self.started = time.monotonic()
        self.lead: int | None = None
        """Pacing: chunks the reader may publish past the furthest iterator; None: unpaced."""
        self.taken = 0
        """How many chunks the furthest iterator has taken (set by `Response.__iter__`)."""
        self.content_type: str | None = None
        # The response's Content-Type, and for an ``http`` failure what its body was:
        # internal, for a log line that must not quote an arbitrary body (the proxy's).
        self.error_body: ErrorBody | None = None

    # -- the transport and the reads --------------------------------------------

    def attach_aborter(self, aborter: Callable[[], None]) -> None:
        """Register how to tear down the transport; runs at once if already cancelled."""
        with self.cond:
            if not self.response.is_done:
                self.aborter = aborter
                return
        if self.response.is_cancelled:
            run_aborter(aborter)

    def add_cancel_hook(self, hook: Callable[[], None]) -> None:
        """Run `hook` after a cancel tears the transport down (a provider's abort call).

        It runs in the cancelling thread, after the Response is settled; it must
        return quickly (start a thread for network work) and its errors are
        logged and swallowed. Dropped when the Response settles any other way.
        """
        with self.cond:
            if not self.response.is_done:
                self.cancel_hooks.append(hook)

    def add_settle_hook(self, hook: Callable[[], None]) -> bool:
        """Run `hook` once when the Response settles, whatever ended it (a cancel included).

        It runs in the settling thread, outside the lock; it must return
        quickly and its errors are logged and swallowed. False (and nothing
        registered) when the Response has settled already: the caller runs it.
        """
        with self.cond:
            if self.response.is_done:
                return False
            self.settle_hooks.append(hook)
            return True

    def run_settle_hooks(self) -> None:
        """Run the settle hooks, once: after `settle_locked`, outside the lock."""
        with self.cond:
            hooks, self.settle_hooks = self.settle_hooks, []
        for hook in hooks:
            run_aborter(hook)

    def attach_puller(self, puller: Puller) -> bool:
        """Let iterators do the reads through `puller`; True if one is waiting now."""
        with self.cond:
            if self.response.is_done:
                return False
            self.puller = puller
            if self.waiting and self.arrived is not None:
                self.arrived.notify_all()
                return True
            return False

    def detach_puller(self, puller: Puller) -> None:
        """Iterators wait for the reader thread again (if `puller` is still the one)."""
        with self.cond:
            if self.puller is puller:
                self.puller = None

    def has_room(self) -> bool:
        """Whether the reader thread may read on (always, unless paced and `lead` ahead)."""
        lead = self.lead
        response = self.response
        if lead is None or response.is_done or response.finish_reason is not None:
            return True
        return len(self.chunks) - self.taken < lead

    def note_headers(self, headers: Mapping[str, str]) -> None:
        """Keep what the response headers say that the Response reports (`Retry-After`)."""
        self.response.retry_after = headers.get("Retry-After")
        self.content_type = headers.get("Content-Type")

    def note_error_body(self, size: int, message: str | None) -> None:
        """Describe an ``http`` failure's body (its size, type and scrubbed message)."""
        self.error_body = ErrorBody(size, self.content_type, self.scrub(message))

    # -- what arrived -----------------------------------------------------------

    def publish(self, chunks: list[Chunk]) -> None:
        """The runner's one writer: `chunks` and what they add (text, reasoning,
        refusal, tool calls), under one lock and one wake-up; nothing after settle."""
        if chunks:
            with self.mutex:  # the lock itself: `cond`'s Python-level __enter__ costs a call
                self.publish_locked(chunks)

    def publish_locked(self, chunks: list[Chunk]) -> None:
        """`publish` for a caller that holds `mutex` (the read baton, ending its turn)."""
        response = self.response
        if response.is_done:
            return
        text = self.text
        ttft = had_ttft = response.timing.ttft_seconds is not None
        for chunk in chunks:
            # The common chunk is content alone: one test for the other three fields.
            parts = chunk.thinking or chunk.refusal or chunk.tool_calls
            if chunk.content:
                text.append(chunk.content)
                if parts:
                    self._add_parts(chunk)
            elif not (parts and self._add_parts(chunk)):
                continue  # nothing that counts as the first content
            if not ttft:
                ttft = self._first_content()
        # `_wake`, in line (once per read): add the chunks, wake who waits for them.
        self.chunks.extend(chunks)
        if self.waiting and self.arrived is not None:
            self.arrived.notify_all()
        if ttft and not had_ttft:
            self.cond.notify_all()  # `wait_for_content`

    def _add_parts(self, chunk: Chunk) -> bool:
        # What a chunk adds besides its content, under `mutex`; True when it counts
        # as content for the time to first token (reasoning, tool calls; not a refusal).
        if chunk.thinking:
            self.reasoning.append(chunk.thinking)
        if chunk.refusal:
            self.refusal.append(chunk.refusal)
        if chunk.tool_calls:
            self.response.tool_calls.extend(chunk.tool_calls)
        return bool(chunk.thinking or chunk.tool_calls)

    def add_chunks(self, chunks: list[Chunk]) -> None:
        """Publish chunks alone (their text added separately): one lock, one wake-up."""
        if not chunks:
            return
        timing = self.response.timing
        with self.cond:
            if self.response.is_done:
                return
            first = timing.ttft_seconds is None and any(
                chunk.content or chunk.thinking or chunk.tool_calls for chunk in chunks
            )
            if first:
                self._first_content()
            self._wake(chunks, first)

    def add_to(self, parts: list[str], text: str) -> None:
        """Append `text` to one of the text parts while live."""
        with self.cond:
            if text and not self.response.is_done:  # nothing grows after settle
                parts.append(text)

    def _wake(self, chunks: list[Chunk], first_content: bool) -> None:
        # Under `cond`: add `chunks` and wake who waits for them.
        self.chunks.extend(chunks)
        if self.waiting and self.arrived is not None:
            self.arrived.notify_all()
        if first_content:
            self.cond.notify_all()  # `wait_for_content`

    def _first_content(self) -> bool:
        self.response.timing.ttft_seconds = time.monotonic() - self.started
        return True

    def record(self, **fields: Any) -> None:
        """Set public fields while the Response is live (the runner's other writer)."""
        response = self.response
        with self.cond:
            if not response.is_done:
                for name, value in fields.items():
                    setattr(response, name, value)

    # -- the end ----------------------------------------------------------------

    def settle(
        self, failure: ErrorClass | None = None, err: str | None = None, status: int | None = None
    ) -> bool:
        """Settle once: success when `failure` is None. Returns False if already done.

        `failure`, `err` and `status` become `Response.error_class`, `err` and
        `error_status` (the HTTP status of an ``http`` failure).
        """
        with self.cond:
            if self.response.is_done:
                return False
            self.settle_locked(failure, err, status, False)
            self.aborter = None
            self.cancel_hooks = []
        if self.settle_hooks:
            self.run_settle_hooks()
        return True

    def settle_locked(
        self, error_class: ErrorClass | None, err: str | None, status: int | None, cancelled: bool
    ) -> None:
        """The terminal state, under `cond` (`settle`, and `Response.cancel`)."""
        response = self.response
        response.is_cancelled = cancelled
        response.is_success = error_class is None and not cancelled
        response.error_class = error_class
        response.error_status = status
        response.err = self.scrub(err)
        response.timing.total_seconds = time.monotonic() - self.started
        response.is_done = True
        self.cond.notify_all()
        if self.arrived is not None:
            self.arrived.notify_all()

    def scrub(self, text: str | None) -> str | None:
        """Remove every form of the secrets from text a server may have echoed them into."""
        return None if text is None else self.redactor.text(text)


def run_aborter(aborter: Callable[[], None] | None) -> None:
    """Run a teardown after a cancel: best effort, its errors logged and swallowed."""
    if aborter is None:
        return
    try:
        aborter()
    except Exception:  # teardown is best effort; the cancel has already happened
        log.debug("transport teardown after cancel failed", exc_info=True)
