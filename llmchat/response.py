"""Response: the outcome of one completion, live while it streams, then settled.

A Response is created before the request goes out and settles exactly once,
in `_settle`, whatever ended it: success, a provider failure, a transport
error, a deadline, or a cancel. Nothing else sets terminal state.

Remote failures are states, not exceptions: read `is_success`,
`error_class` and `err`, or call `raise_for_error()`. Whatever arrived before
the end (text, reasoning, tool calls, usage) stays on the Response.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Protocol

from .chunk import Chunk
from .dialects.error_body import ErrorBody
from .errors import ErrorClass, remote_error_for
from .redact import Redactor
from .response_pace import Pacing
from .response_text import AnswerText
from .timing import Timing
from .tools import ToolCall

__all__ = ["Response", "Timing"]

log = logging.getLogger("llmchat")


class _Puller(Protocol):
    """What lets an iterator do a stream's reads itself (`backends._baton.ReadBaton`)."""

    def pull(self) -> bool: ...

    def leave(self) -> None: ...


class Response(AnswerText, Pacing):
    """The outcome of one completion; thread-safe; live while streaming.

    Iterate it for `Chunk`s (`for chunk in response`): every iterator replays
    what has arrived, then follows live, and ends when the Response settles —
    a failed stream ends iteration normally, so read `is_success` after.
    `wait()` blocks until it settles; `cancel()` stops it from any thread;
    ``with backend.chat_completion_stream(...) as r:`` cancels on exit if `r`
    is still live.
    """

    def __init__(self, request: Mapping[str, Any] | None = None, *, secrets: tuple[str, ...] = ()):
        self.request = request
        """The request body that was sent (the finished body); None if unknown."""
        self._redactor = Redactor.of(secrets)
        # `_cond`: waiters for the settle and the first content (`wait`,
        # `wait_for_content`). `_arrived`: iterators waiting for chunks, on the
        # same lock, so a read that adds chunks wakes only them (never a thread
        # parked in `wait()`), and only when one waits (`_waiting`, under the
        # lock); made by the first iterator that waits (a blocking call has none).
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._arrived: threading.Condition | None = None
        self._waiting = 0
        # While set, an iterator with nothing new reads the next bytes itself
        # instead of waiting for the reader thread (`backends/_baton.py`).
        self._puller: _Puller | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._chunks: list[Chunk] = []
        self._aborter: Callable[[], None] | None = None
        self._cancel_hooks: list[Callable[[], None]] = []
        self._started = time.monotonic()

        self.tool_calls: list[ToolCall] = []
        """Completed tool calls, in the order the model made them."""
        self.citations: list[Any] | None = None
        """Source citations from a search-augmented provider; None when none came."""
        self.reasoning_parts: list[dict[str, Any]] | None = None
        """Opaque reasoning parts of the answer, tagged with their dialect (Anthropic
        thinking blocks with signatures, Gemini thought signatures); None when none."""
        self.model: str | None = None
        """The model the provider says answered; None when it did not say."""
        self.id: str | None = None
        """The provider's completion id; None when it sent none."""
        self.usage: dict[str, Any] | None = None
        """The provider's raw usage block; None when it sent none."""
        self.prompt_tokens: int | None = None
        """Prompt tokens; None = not reported (0 is a real value)."""
        self.completion_tokens: int | None = None
        """Generated tokens, reasoning included; None = not reported."""
        self.total_tokens: int | None = None
        """Prompt plus completion tokens; None = not reported."""
        self.reasoning_tokens: int | None = None
        """Reasoning tokens, where the provider breaks them out; None = not reported."""
        self.cached_tokens: int | None = None
        """Prompt tokens served from the prefix cache; None = not reported."""
        self.finish_reason: str | None = None
        """The finish reason the Response acted on (after reconciliation); None = none came."""
        self.provider_finish_reason: str | None = None
        """The finish reason exactly as the provider sent it; None = none came."""
        self.finish_reason_evidence: Any = None
        """Whatever `_reconcile_finish_reason` recorded about its decision; None by default."""
        self.dropped_frames: int = 0
        """Stream frames that could not be parsed and were skipped."""
        self.last_activity_at: float | None = None
        """`time.monotonic()` of the last bytes from the server (pings count); None before."""
        self.timing = Timing()
        """Time to first token and total time."""

        self.is_done: bool = False
        """True once the Response has settled (success, failure or cancel)."""
        self.is_success: bool = False
        """True when the provider finished normally; False while live or after any failure."""
        self.is_cancelled: bool = False
        """True when the caller cancelled it (a cancel is not a failure)."""
        self.cancel_requested: bool = False
        """True once `cancel()` was called while the Response was live (a late one: no-op)."""
        self.err: str | None = None
        """What went wrong, for people; None on success. ``"Cancelled by user"`` on cancel."""
        self.error_class: ErrorClass | None = None
        """``http``, ``timeout``, ``connection``, ``response`` or ``unknown``; None on
        success and on cancel."""
        self.error_status: int | None = None
        """The HTTP status of an ``http`` failure; None otherwise."""
        self.parsed: Any = None
        """What `llmchat.retry.Inference`'s parser made of the answer; None otherwise."""
        self.retry_after: str | None = None
        """The server's ``Retry-After`` header as sent (seconds or an HTTP date);
        None when it sent none. `llmchat.retry` honours it."""
        self._content_type: str | None = None
        # The response's Content-Type, and for an ``http`` failure what its body was:
        # internal, for a log line that must not quote an arbitrary body (the proxy's).
        self._error_body: ErrorBody | None = None

    def __repr__(self) -> str:
        state = (
            "live"
            if not self.is_done
            else "cancelled"
            if self.is_cancelled
            else "ok"
            if self.is_success
            else f"failed {self.error_class}"
        )
        return f"<Response {state} finish={self.finish_reason!r} chars={len(self.msg)}>"

    # -- waiting, iterating, cancelling ------------------------------------

    def wait(self, timeout: float | None = None) -> Response:
        """Block until the Response settles or `timeout` seconds pass; return self."""
        with self._cond:
            self._cond.wait_for(lambda: self.is_done, timeout)
        return self

    def __iter__(self) -> Iterator[Chunk]:
        index = 0
        puller: _Puller | None = None
        used: _Puller | None = None
        try:
            while True:
                with self._cond:
                    while index >= len(self._chunks) and not self.is_done:
                        puller = self._puller
                        if puller is not None:
                            break  # read the next bytes on this thread, outside the lock
                        arrived = self._arrived
                        if arrived is None:
                            arrived = self._arrived = threading.Condition(self._mutex)
                        self._waiting += 1
                        try:
                            arrived.wait()
                        finally:
                            self._waiting -= 1
                    batch = self._chunks[index:]  # everything that has arrived, in one lock
                if not batch and puller is not None and not self.is_done:
                    used = puller
                    puller.pull()
                    puller = None
                    continue
                if not batch:
                    return
                index += len(batch)
                self._taken = max(self._taken, index)
                yield from batch
        finally:
            if used is not None:
                used.leave()

    @property
    def elapsed_seconds(self) -> float:
        """Seconds since the request was made (until it settled, once it has)."""
        total = self.timing.total_seconds
        return time.monotonic() - self._started if total is None else total

    def wait_for_content(self, timeout: float | None = None) -> bool:
        """Block until the first content, reasoning or tool-call chunk, or until settled.

        Returns False when `timeout` seconds passed first.
        """
        with self._cond:
            return self._cond.wait_for(
                lambda: self.is_done or self.timing.ttft_seconds is not None, timeout
            )

    def iter_text(self) -> Iterator[str]:
        """Yield only the non-empty content strings, as they arrive."""
        for chunk in self:
            if chunk.content:
                yield chunk.content

    def cancel(self) -> None:
        """Stop this completion now; thread-safe, returns at once, never raises.

        The Response settles as cancelled before the network is touched (text
        so far is kept); then the connection is dropped, which is how an
        OpenAI-compatible server learns to stop generating. A cancel after the
        Response settled changes nothing.
        """
        with self._cond:
            if self.is_done:  # a late or duplicate cancel changes nothing
                return
            self.cancel_requested = True
            self._settle_locked(cancelled=True, err="Cancelled by user")
            aborter, self._aborter = self._aborter, None
            hooks, self._cancel_hooks = self._cancel_hooks, []
        _run_aborter(aborter)
        for hook in hooks:
            _run_aborter(hook)

    def __enter__(self) -> Response:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.is_done:
            self.cancel()

    def raise_for_error(self) -> Response:
        """Raise the `RemoteError` subclass for a failed Response; return self otherwise.

        Waits for a live Response to settle first. A cancelled Response is not
        a failure and raises nothing. The exception keeps this Response on
        `.response`, so its partial text and usage are not lost.
        """
        self.wait()
        if self.error_class is None:
            return self
        cls = remote_error_for(self.error_class)
        raise cls(self.err or self.error_class, response=self, status=self.error_status)

    # -- used by backends (llmchat calls these; user code does not) --------

    def _attach_aborter(self, aborter: Callable[[], None]) -> None:
        """Register how to tear down the transport; runs at once if already cancelled."""
        with self._cond:
            if not self.is_done:
                self._aborter = aborter
                return
        if self.is_cancelled:
            _run_aborter(aborter)

    def _attach_puller(self, puller: _Puller) -> bool:
        """Let iterators do the reads through `puller`; True if one is waiting now."""
        with self._cond:
            if self.is_done:
                return False
            self._puller = puller
            if self._waiting and self._arrived is not None:
                self._arrived.notify_all()
                return True
            return False

    def _detach_puller(self, puller: _Puller) -> None:
        with self._cond:
            if self._puller is puller:
                self._puller = None

    def _add_cancel_hook(self, hook: Callable[[], None]) -> None:
        """Run `hook` after a cancel tears the transport down (a provider's abort call).

        It runs in the cancelling thread, after the Response is settled; it must
        return quickly (start a thread for network work) and its errors are
        logged and swallowed. Dropped when the Response settles any other way.
        """
        with self._cond:
            if not self.is_done:
                self._cancel_hooks.append(hook)

    def _add_text(self, text: str) -> None:
        self._add_to(self._text, text)

    def _add_reasoning(self, text: str) -> None:
        self._add_to(self._reasoning, text)

    def _add_refusal(self, text: str) -> None:
        self._add_to(self._refusal, text)

    def _add_to(self, parts: list[str], text: str) -> None:
        # The runners write through `_publish`; these single-field writers are
        # for code that builds a Response by hand (tests, a subclass's hook).
        with self._cond:
            if text and not self.is_done:  # nothing grows after settle
                parts.append(text)

    def _publish(self, chunks: list[Chunk]) -> None:
        """The runner's one writer: `chunks` and what they add (text, reasoning,
        refusal, tool calls), under one lock and one wake-up; nothing after settle."""
        if not chunks:
            return
        with self._cond:
            if self.is_done:
                return
            ttft = had_ttft = self.timing.ttft_seconds is not None
            for chunk in chunks:
                if chunk.content:
                    self._text.append(chunk.content)
                    ttft = ttft or self._first_content()
                if chunk.thinking:
                    self._reasoning.append(chunk.thinking)
                    ttft = ttft or self._first_content()
                if chunk.refusal:
                    self._refusal.append(chunk.refusal)
                if chunk.tool_calls:
                    self.tool_calls.extend(chunk.tool_calls)
                    ttft = ttft or self._first_content()
            self._chunks.extend(chunks)
            if self._waiting and self._arrived is not None:
                self._arrived.notify_all()
            if ttft and not had_ttft:
                self._cond.notify_all()  # `wait_for_content`

    def _first_content(self) -> bool:
        self.timing.ttft_seconds = time.monotonic() - self._started
        return True

    def _record(self, **fields: Any) -> None:
        """Set public fields while the Response is live (the runner's other writer)."""
        with self._cond:
            if not self.is_done:
                for name, value in fields.items():
                    setattr(self, name, value)

    def _add_chunk(self, chunk: Chunk) -> None:
        self._add_chunks([chunk])

    def _add_chunks(self, chunks: list[Chunk]) -> None:
        """Publish chunks to every iterator: one lock and one wake-up for the lot."""
        if not chunks:
            return
        with self._cond:
            if self.is_done:
                return
            if self.timing.ttft_seconds is None and any(
                chunk.content or chunk.thinking or chunk.tool_calls for chunk in chunks
            ):
                self.timing.ttft_seconds = time.monotonic() - self._started
                self._cond.notify_all()  # `wait_for_content`
            self._chunks.extend(chunks)
            if self._waiting and self._arrived is not None:
                self._arrived.notify_all()

    def _settle(
        self,
        *,
        error_class: ErrorClass | None = None,
        err: str | None = None,
        error_status: int | None = None,
    ) -> bool:
        """Settle once: success when `error_class` is None. Returns False if already done."""
        with self._cond:
            if self.is_done:
                return False
            self._settle_locked(error_class=error_class, err=err, error_status=error_status)
            self._aborter = None
            self._cancel_hooks = []
            return True

    def _settle_locked(
        self,
        *,
        error_class: ErrorClass | None = None,
        err: str | None = None,
        error_status: int | None = None,
        cancelled: bool = False,
    ) -> None:
        self.is_cancelled = cancelled
        self.is_success = error_class is None and not cancelled
        self.error_class = error_class
        self.error_status = error_status
        self.err = self._scrub(err)
        self.timing.total_seconds = time.monotonic() - self._started
        self.is_done = True
        self._cond.notify_all()
        if self._arrived is not None:
            self._arrived.notify_all()

    def _scrub(self, text: str | None) -> str | None:
        """Remove every form of the secrets from text a server may have echoed them into."""
        return None if text is None else self._redactor.text(text)


def _run_aborter(aborter: Callable[[], None] | None) -> None:
    if aborter is None:
        return
    try:
        aborter()
    except Exception:  # teardown is best effort; the cancel has already happened
        log.debug("transport teardown after cancel failed", exc_info=True)
