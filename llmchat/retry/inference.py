"""Retries and fallback chains: one request, several backends, bounded effort.

`Inference` runs a chat completion against a list of backends in order. Each
failed attempt is sorted into one of three buckets by `classify`:

``abort``
    a caller mistake the next backend would repeat (HTTP 400/401/402/403/404):
    stop at once and raise `Exhausted`.
``retry-same``
    a transient fault (HTTP 5xx, a connection failure, anything unknown): sleep
    `backoff(n)` (or the server's ``Retry-After``) and try the same backend
    again, up to `max_retries` times, then move on.
``advance``
    this backend cannot help now (HTTP 429, a timeout, an unusable answer, a
    parser failure): move to the next backend.

When every backend is used up, `run` raises `TimedOut` if the last failure was
a timeout, `Truncated` if it was a ``length`` finish, else `Exhausted`. Every
attempt is kept on the exception's `attempts` (and passed to `on_attempt`), and
`cancel()` from any thread stops the run promptly with `Cancelled`.

How long a run takes (spec: RUN DEADLINE): `timeout` bounds each attempt;
`deadline`, when given, bounds the whole run, and each attempt gets at most
the time left. No wait before a retry (backoff or ``Retry-After``) is longer
than `timeout` or ends past the deadline: such a wait is not taken, the run
moves on to the next backend at once, or, with none left, gives up with the
last failure and says so in the exception's message.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidArgumentError, InvalidTypeError
from ..response import Response
from .attempts import Attempt, Cancelled, Exhausted, TimedOut, Truncated
from .policy import backoff, classify, sleep_unless_cancelled

__all__ = ["Inference"]

log = logging.getLogger("llmchat")


class _Outcome:
    """What one attempt produced, internally."""

    __slots__ = ("cancelled", "limit", "parsed", "parser_failed", "response", "timed_out")

    def __init__(self, response: Response, limit: str) -> None:
        self.response = response
        self.limit = limit
        """What bounded the attempt, for the timeout message: the timeout or the deadline."""
        self.timed_out = False
        self.cancelled = False
        self.parser_failed: str | None = None
        self.parsed: Any = None


class Inference:
    """Run a completion over a fallback chain of backends, with retries and a per-attempt timeout.

        inference = Inference([local, OpenRouter(model="...")], timeout=60)
        r = inference.run([{"role": "user", "content": "Hi"}])
        print(r.msg)

    `max_retries` is how many extra attempts a backend gets after ``retry-same``
    failures. `timeout` (seconds, or None for none) bounds each attempt: past it
    the generation is cancelled and the attempt counts as a ``timeout``.
    `deadline` (seconds, or None for none, the default) bounds the whole run:
    each attempt gets at most the time left, and a retry wait (backoff or
    ``Retry-After``) that would end past it is not waited. No retry wait is
    longer than `timeout` either: the run moves on (next backend, or gives up
    with the last failure, saying why) instead of sleeping past what one
    attempt may take.
    `parser(response)` turns a successful Response into a value (set on
    `response.parsed`); if it raises, the attempt fails and the next backend is
    tried. `on_attempt(attempt)` is called after every attempt; its exceptions
    are logged and swallowed. One run at a time per instance.
    """

    def __init__(
        self,
        backends: Sequence[Any],
        max_retries: int = 3,
        timeout: float | None = 120.0,
        parser: Callable[[Response], Any] | None = None,
        on_attempt: Callable[[Attempt], Any] | None = None,
        *,
        deadline: float | None = None,
    ) -> None:
        if isinstance(backends, (str, bytes)) or not isinstance(backends, Sequence):
            raise InvalidTypeError("backends must be a list of backends")
        if not backends:
            raise InvalidArgumentError("backends must hold at least one backend")
        for i, backend in enumerate(backends):
            if not callable(getattr(backend, "chat_completion_stream", None)):
                raise InvalidTypeError(
                    f"backends[{i}] has no chat_completion_stream(); got {type(backend).__name__}"
                )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int):
            raise InvalidTypeError(f"max_retries must be an int, got {max_retries!r}")
        if max_retries < 0:
            raise InvalidArgumentError(f"max_retries must be >= 0, got {max_retries}")
        _check_seconds("timeout", timeout)
        _check_seconds("deadline", deadline)
        if parser is not None and not callable(parser):
            raise InvalidTypeError("parser must be a callable taking a Response, or None")
        if on_attempt is not None and not callable(on_attempt):
            raise InvalidTypeError("on_attempt must be a callable taking an Attempt, or None")
        self.backends = list(backends)
        self.max_retries = max_retries
        self.timeout = None if timeout is None else float(timeout)
        self.deadline = None if deadline is None else float(deadline)
        self.parser = parser
        self.on_attempt = on_attempt
        self._lock = threading.Lock()
        self._cancel_event = threading.Event()
        self._live: Response | None = None

    def __repr__(self) -> str:
        return (
            f"Inference({len(self.backends)} backends, max_retries={self.max_retries}, "
            f"timeout={self.timeout}, deadline={self.deadline})"
        )

    # -- public -------------------------------------------------------------

    def run(
        self,
        messages: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        settings: Any = None,
    ) -> Response:
        """Return the first successful (and parsed) Response; raise when none comes.

        Raises `Exhausted` (or `Truncated` / `TimedOut`) with every attempt,
        or `Cancelled` after `cancel()`.
        """
        return self._run(messages, tools, settings, stream=False)

    def run_stream(
        self,
        messages: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        settings: Any = None,
    ) -> Response:
        """Like `run`, but return the live Response as soon as content starts.

        Fail-over happens only before the first content, reasoning or tool-call
        chunk (`timeout` bounds the wait for it). Once content has started the
        Response is returned as is, still streaming: a later failure is a state
        of that Response, not retried. The parser is not used (it needs a
        finished answer); a parser on the Inference raises `ValueError` here.
        """
        if self.parser is not None:
            raise InvalidArgumentError("run_stream() does not use a parser; use run()")
        return self._run(messages, tools, settings, stream=True)

    def cancel(self) -> None:
        """Stop the run in progress from any thread: the live attempt and any backoff sleep.

        `run` then raises `Cancelled`. Returns at once; never raises.
        """
        self._cancel_event.set()
        with self._lock:
            live = self._live
        if live is not None:
            live.cancel()

    # -- the loop -----------------------------------------------------------

    def _run(self, messages: Any, tools: Any, settings: Any, *, stream: bool) -> Response:
        self._cancel_event.clear()
        attempts: list[Attempt] = []
        last: _Outcome | None = None
        ends_at = None if self.deadline is None else time.monotonic() + self.deadline
        why: str | None = None  # why the run stopped short of its retries, when it did
        for index, backend in enumerate(self.backends):
            retries = 0
            while True:
                if self._cancel_event.is_set():
                    raise Cancelled(attempts)
                left = None if ends_at is None else ends_at - time.monotonic()
                if left is not None and left <= 0 and last is not None:
                    return self._give_up(
                        attempts, last, f"the run deadline ({self.deadline:g}s) passed"
                    )
                limit, bound = self.timeout, f"Inference timeout ({_secs(self.timeout)})"
                if left is not None and (limit is None or left < limit):
                    limit = max(left, 0.0)
                    bound = f"the Inference run deadline ({self.deadline:g}s)"
                outcome = self._attempt(
                    backend, messages, tools, settings, stream=stream, limit=limit, bound=bound
                )
                why = None
                response = outcome.response
                if outcome.cancelled:
                    self._record(attempts, index, backend, outcome, decision=None)
                    raise Cancelled(attempts)
                if (
                    outcome.parser_failed is None
                    and not outcome.timed_out
                    and (response.is_success or (stream and not response.is_done))
                ):
                    self._record(attempts, index, backend, outcome, decision=None)
                    if self.parser is not None:
                        response.parsed = outcome.parsed
                    return response
                last = outcome
                if outcome.timed_out:
                    decision = classify("timeout", None)
                else:
                    decision = classify(
                        response.error_class,
                        response.error_status,
                        parser_failed=outcome.parser_failed is not None,
                    )
                self._record(attempts, index, backend, outcome, decision=decision)
                if decision == "abort":
                    raise Exhausted(attempts, f"aborted after {len(attempts)} attempt(s)")
                if decision == "retry-same" and retries < self.max_retries:
                    retry_after = getattr(response, "retry_after", None)
                    delay = backoff(retries + 1, retry_after)
                    why = self._too_long(delay, retry_after, ends_at)
                    if why is None:
                        retries += 1
                        if sleep_unless_cancelled(delay, self._cancel_event):
                            raise Cancelled(attempts)
                        continue
                break
        assert last is not None
        return self._give_up(attempts, last, why)

    def _too_long(self, delay: float, retry_after: Any, ends_at: float | None) -> str | None:
        """Why a retry wait of `delay` seconds is not taken; None when it is."""
        asked = "Retry-After" if retry_after is not None else "backoff"
        if self.timeout is not None and delay > self.timeout:
            return (
                f"not waiting {delay:g}s ({asked}) to retry: longer than the "
                f"attempt timeout ({self.timeout:g}s)"
            )
        if ends_at is not None and time.monotonic() + delay >= ends_at:
            return (
                f"not waiting {delay:g}s ({asked}) to retry: past the run "
                f"deadline ({self.deadline:g}s)"
            )
        return None

    def _attempt(
        self,
        backend: Any,
        messages: Any,
        tools: Any,
        settings: Any,
        *,
        stream: bool,
        limit: float | None,
        bound: str,
    ) -> _Outcome:
        response = backend.chat_completion_stream(messages, tools=tools, settings=settings)
        outcome = _Outcome(response, bound)
        with self._lock:
            self._live = response
        try:
            if self._cancel_event.is_set():  # cancel() came before _live was set
                response.cancel()
            if stream:
                settled = _wait_first_content(response, limit)
            else:
                settled = response.wait(limit).is_done
            if not settled:
                response.cancel()
                if self._cancel_event.is_set():
                    outcome.cancelled = True
                else:
                    outcome.timed_out = True
                return outcome
        finally:
            with self._lock:
                self._live = None
        if response.is_cancelled or self._cancel_event.is_set():
            outcome.cancelled = True
            response.cancel()
            return outcome
        if response.is_success and self.parser is not None:
            try:
                outcome.parsed = self.parser(response)
            except Exception as exc:
                outcome.parser_failed = f"parser failed: {type(exc).__name__}: {exc}"
        return outcome

    def _record(
        self,
        attempts: list[Attempt],
        index: int,
        backend: Any,
        outcome: _Outcome,
        *,
        decision: str | None,
    ) -> None:
        r = outcome.response
        if outcome.timed_out:
            error_class: str | None = "timeout"
            status = None
            message: str | None = f"No answer within {outcome.limit}"
        elif outcome.parser_failed is not None:
            error_class, status, message = "parser", None, outcome.parser_failed
        else:
            error_class, status, message = r.error_class, r.error_status, r.err
        total = r.elapsed_seconds
        success = error_class is None and not outcome.cancelled and (r.is_success or not r.is_done)
        record = Attempt(
            number=len(attempts) + 1,
            backend_index=index,
            model=r.model or getattr(backend, "model", None),
            error_class=error_class,
            error_status=status,
            message=message,
            latency_seconds=total,
            success=success,
            finish_reason=r.finish_reason,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            cost=getattr(r, "cost", None),
            decision=decision,
        )
        attempts.append(record)
        if self.on_attempt is not None:
            try:
                self.on_attempt(record)
            except Exception:
                log.exception("Inference on_attempt callback raised; ignored")

    def _give_up(self, attempts: list[Attempt], last: _Outcome, why: str | None = None) -> Response:
        r = last.response
        note = f"; {why}" if why else ""
        if last.timed_out or (last.parser_failed is None and r.error_class == "timeout"):
            raise TimedOut(
                attempts, f"all {len(attempts)} attempt(s) failed; the last timed out{note}"
            )
        if last.parser_failed is None and r.finish_reason == "length":
            raise Truncated(
                attempts,
                f"the answer was cut off (finish_reason 'length'){note}" if why else None,
                partial_text=r.latest,
                usage=r.usage,
                completion_tokens=r.completion_tokens,
            )
        raise Exhausted(attempts, f"all {len(attempts)} attempt(s) failed{note}" if why else None)


def _secs(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g}s"


def _check_seconds(name: str, value: Any) -> None:
    """A number of seconds > 0, or None; TypeError/ValueError naming `name` otherwise."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{name} must be a number of seconds or None: {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"{name} must be > 0 seconds, got {value!r}")


def _wait_first_content(response: Response, timeout: float | None) -> bool:
    """Wait until `response` has content (or settles); False if `timeout` passed first."""
    return response.wait_for_content(timeout)
