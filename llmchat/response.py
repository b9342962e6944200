"""Response: the outcome of one completion, live while it streams, then settled.

A Response is created before the request goes out and settles exactly once,
in `ResponseWriter.settle`, whatever ended it: success, a provider failure, a transport
error, a deadline, or a cancel. Nothing else sets terminal state.

Remote failures are states, not exceptions: read `is_success`,
`error_class` and `err`, or call `raise_for_error()`. Whatever arrived before
the end (text, reasoning, tool calls, usage) stays on the Response.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from itertools import chain
from typing import Any

from .chunk import Chunk
from .dialects.error_body import ErrorBody
from .errors import ErrorClass, remote_error_for
from .response_pace import Pacing
from .response_text import AnswerText
from .response_writer import Puller, ResponseWriter, run_aborter
from .timing import Timing
from .tools import ToolCall

__all__ = ["Response", "Timing"]


class Response(AnswerText, Pacing):
    """The outcome of one completion; thread-safe; live while streaming.

    Iterate it for `Chunk`s (`for chunk in response`): every iterator replays
    what has arrived, then follows live, and ends when the Response settles —
    a failed stream ends iteration normally, so read `is_success` after.
    `iter_batches()` gives the same chunks as lists, each burst in one.
    `wait()` blocks until it settles; `cancel()` stops it from any thread;
    ``with backend.chat_completion_stream(...) as r:`` cancels on exit if `r`
    is still live.
    """

    def __init__(self, request: Mapping[str, Any] | None = None, *, secrets: tuple[str, ...] = ()):
        self.request = request
        """The request body that was sent (the finished body); None if unknown."""
        # The live state and its write operations are the writer's (the runners'
        # handle); the parts that never change identity are aliased here for the
        # read path and the `AnswerText` views.
        self._writer: ResponseWriter[Response] = ResponseWriter(self, secrets)
        writer = self._writer
        self._mutex = writer.mutex
        self._cond = writer.cond
        self._text = writer.text
        self._reasoning = writer.reasoning
        self._refusal = writer.refusal
        self._chunks = writer.chunks

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
        self.cache_write_tokens: int | None = None
        """Prompt tokens written to the provider's prompt cache (Anthropic's
        ``cache_creation_input_tokens``); None = not reported."""
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
        # The batches, flattened by a C iterator: a chunk costs no Python frame here.
        return chain.from_iterable(self.iter_batches())

    def iter_batches(self) -> Iterator[list[Chunk]]:
        """Yield the chunks as lists: every chunk that arrived since the last list.

        The same chunks in the same order as iterating the Response, grouped as
        they were waiting: it blocks only while none has arrived, and ends
        exactly when iterating ends (when the Response settles, however it
        settled: read `is_success` after). A consumer that handles a burst at
        once (one write for many tokens) takes it with one call. Each list is
        new and the caller's. A paced Response (`Pacing`) counts a list's chunks
        as taken when it is yielded, as iterating does when it reaches them.
        """
        live = self._writer
        chunks = self._chunks
        index = 0
        used: Puller | None = None
        try:
            while True:
                if index < len(chunks):
                    # No lock: chunks are only appended, all of one publish in one
                    # `extend` (atomic for the interpreter), so this is a prefix of what
                    # every iterator sees, and `is_done` is not read here.
                    batch = chunks[index:]
                    index += len(batch)
                    if live.taken < index:
                        live.taken = index
                    yield batch
                    continue
                puller = live.puller
                if puller is not None and not self.is_done:
                    # Read the next bytes on this thread (it takes its own locks).
                    used = puller
                    puller.pull()
                    continue
                with self._mutex:  # the lock itself; `arrived` waits on it
                    while index >= len(chunks) and not self.is_done and live.puller is None:
                        arrived = live.arrived
                        if arrived is None:
                            arrived = live.arrived = threading.Condition(self._mutex)
                        live.waiting += 1
                        try:
                            arrived.wait()
                        finally:
                            live.waiting -= 1
                    if index >= len(chunks) and self.is_done:
                        return  # settled, and every chunk published before it was taken
        finally:
            if used is not None:
                used.leave()

    @property
    def elapsed_seconds(self) -> float:
        """Seconds since the request was made (until it settled, once it has)."""
        total = self.timing.total_seconds
        return time.monotonic() - self._writer.started if total is None else total

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
            live = self._writer
            live.settle_locked(None, "Cancelled by user", None, True)
            aborter, live.aborter = live.aborter, None
            hooks, live.cancel_hooks = live.cancel_hooks, []
        run_aborter(aborter)
        for hook in hooks:
            run_aborter(hook)
        if live.settle_hooks:
            live.run_settle_hooks()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc_info: object) -> None:
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

    # -- the write side, for code that holds a Response (tests, a subclass's hook) --
    # llmchat's runners write through `ResponseWriter` (`response_writer.py`);
    # these delegate to it and stay for code written against them.

    @property
    def _content_type(self) -> str | None:
        return self._writer.content_type

    @property
    def _error_body(self) -> ErrorBody | None:
        """What an ``http`` failure's body was (the proxy's log line); None otherwise."""
        return self._writer.error_body

    def _attach_aborter(self, aborter: Callable[[], None]) -> None:
        self._writer.attach_aborter(aborter)

    def _attach_puller(self, puller: Puller) -> bool:
        return self._writer.attach_puller(puller)

    def _detach_puller(self, puller: Puller) -> None:
        self._writer.detach_puller(puller)

    def _add_cancel_hook(self, hook: Callable[[], None]) -> None:
        self._writer.add_cancel_hook(hook)

    def _add_settle_hook(self, hook: Callable[[], None]) -> bool:
        """`ResponseWriter.add_settle_hook`: run `hook` once at the settle (False: settled)."""
        return self._writer.add_settle_hook(hook)

    def _add_text(self, text: str) -> None:
        self._writer.add_to(self._text, text)

    def _add_reasoning(self, text: str) -> None:
        self._writer.add_to(self._reasoning, text)

    def _add_refusal(self, text: str) -> None:
        self._writer.add_to(self._refusal, text)

    def _publish(self, chunks: list[Chunk]) -> None:
        self._writer.publish(chunks)

    def _record(self, **fields: Any) -> None:
        self._writer.record(**fields)

    def _add_chunk(self, chunk: Chunk) -> None:
        self._writer.add_chunks([chunk])

    def _add_chunks(self, chunks: list[Chunk]) -> None:
        self._writer.add_chunks(chunks)

    def _settle(self, **ending: Any) -> bool:
        """`ResponseWriter.settle` (keywords `error_class`, `err`, `error_status`)."""
        return self._writer.settle(
            ending.get("error_class"), ending.get("err"), ending.get("error_status")
        )

    def _scrub(self, text: str | None) -> str | None:
        return self._writer.scrub(text)


def writer_of(response: Response) -> ResponseWriter[Response]:
    """The write handle of `response`: the runners' one way in (llmchat calls this)."""
    return response._writer  # the Response's own part: the one read across the seam
