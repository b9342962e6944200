"""Pings for an Anthropic stream over an `Inference` chain, while the chain is still starting.

A chain's `run_stream` returns only once a backend has produced content
(fail-over happens before that), so for a chain the prefill is spent inside
`Upstream.start`. `Starting` runs that call on a thread; when it has not
returned within one ping interval, `ChainStartBody` sends ``message_start``
and pings until it does, then goes on as `PingingStreamBody`, or ends with an
``error`` event when the chain failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ....response import Response
from ...answers import Answer
from ...bodies import AccountedBody
from ...client_exchange import ClientExchange
from ...server.hangup import HangupWatch
from ...upstream import Call, Failure, Upstream
from .body import PingingStreamBody

__all__ = ["ChainStartBody", "Starting"]

log = logging.getLogger("llmchat.proxy")

_START_FAILED = Failure(500, "Internal proxy error", "proxy")


class Starting:
    """`upstream.start(body, call)` on its own thread; `done` is set when it returned or raised."""

    def __init__(self, upstream: Upstream, body: Mapping[str, Any], call: Call) -> None:
        self.call = call
        self.done = threading.Event()
        self._result: Response | Failure | None = None
        self._error: BaseException | None = None
        threading.Thread(
            target=self._run, args=(upstream, body), name="llmchat-proxy-start", daemon=True
        ).start()

    def _run(self, upstream: Upstream, body: Mapping[str, Any]) -> None:
        try:
            self._result = upstream.start(body, self.call)
        except BaseException as exc:  # handed to the request's thread by `result`
            self._error = exc
        finally:
            self.done.set()

    def result(self) -> Response | Failure:
        """What `start` returned; raises what it raised. Call once `done` is set."""
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class ChainStartBody(AccountedBody):
    """``message_start`` and pings while `starting` runs, then the stream it started."""

    def __init__(
        self,
        exchange: ClientExchange,
        starting: Starting,
        translator: Any,
        answer: Answer,
        watch: HangupWatch,
        *,
        interval: float,
    ) -> None:
        super().__init__(exchange, watch)
        self._starting = starting
        self._translator = translator
        self._answer = answer
        self._interval = interval
        self._inner: PingingStreamBody | None = None

    def _pieces(self) -> Iterator[bytes]:
        translator, starting = self._translator, self._starting
        yield translator.ping()
        while not starting.done.wait(self._interval):
            yield translator.ping()
        try:
            started = starting.result()
        except Exception as exc:  # not its text: it could quote a credential
            log.error("the upstream chain raised %s", type(exc).__name__)
            started = _START_FAILED
        if isinstance(started, Failure):
            if self._watch.hung_up.is_set() or started.error_class == "client_abort":
                return  # nobody is reading; close() records the abort
            self._event.error_type = started.error_class
            yield translator.error_event(started.status, started.message)
            self._completed = True
            return
        self._inner = PingingStreamBody(
            self._exchange,
            started,
            translator,
            self._answer,
            self._watch,
            interval=self._interval,
            silent_start=False,
        )
        yield from self._inner

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()  # the stream's own accounting, once
        else:
            super().close()

    def _release(self) -> None:
        # Still starting: the chain's cancel reaches the attempt, or the Response it returns.
        self._starting.call.cancel()
        if self._translator.errored:
            self._event.ok = False
