"""The Anthropic face's streamed body: `StreamBody` with ``ping`` events while upstream is silent.

A client with an idle timeout (Claude Code's) gives up on a stream that sends
nothing for a while, and an upstream is silent for long stretches: prefill of
a long prompt, reasoning the client asked not to see, a tool call whose
arguments are assembled whole before they are shown. So the Response is read
by a small pump thread into a queue, and whenever `interval` seconds pass with
nothing written the body writes a ``ping`` (after ``message_start``, if none
went out yet). Accounting, hang-up handling and the ending are `StreamBody`'s.

The queue is bounded (`Handoff`): a client that stops reading stops the
pump, so the paced Response stops reading the upstream too. The body takes
every chunk queued at once and writes what they become as one piece, so a
burst of tokens costs one send, not one per token. `close()` ends
the handoff, so a pump blocked on a full queue leaves at once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any, Final

from ....response import Response
from ...answers import Answer
from ...bodies import StreamBody
from ...client_exchange import ClientExchange
from ...server.hangup import HangupWatch

__all__ = ["PingingStreamBody"]

_END: Final = object()
_EMPTY: Final = object()
HANDOFF_SIZE: Final = 8
"""Chunks the pump may hold for a body that is busy writing, before it waits (a burst
read at once goes in whole: the queue then holds it and up to 7 before it)."""


class PingingStreamBody(StreamBody):
    """A translated Anthropic stream that pings its client every `interval` seconds of silence.

    `silent_start` says the headers go out before any upstream output: the
    body then opens with ``message_start`` and a ``ping`` at once.
    """

    def __init__(
        self,
        exchange: ClientExchange,
        response: Response,
        translator: Any,
        answer: Answer,
        watch: HangupWatch,
        *,
        interval: float,
        silent_start: bool,
    ) -> None:
        super().__init__(exchange, response, translator, answer, None, iter(()), watch)
        self._interval = interval
        self._silent_start = silent_start
        self._handoff = Handoff(HANDOFF_SIZE)

    def _pieces(self) -> Iterator[bytes]:
        translator, response, interval = self._translator, self._response, self._interval
        arrived = self._handoff
        threading.Thread(
            target=_pump, args=(response, arrived), name="llmchat-proxy-pump", daemon=True
        ).start()
        if self._silent_start:
            yield translator.ping()
        written = time.monotonic()
        while True:
            wait = written + interval - time.monotonic()
            if wait <= 0:
                data = translator.ping()
                written = time.monotonic()
                if data:
                    yield data
                continue
            batch = arrived.take(wait)
            if batch is _EMPTY:
                continue  # silent for the whole interval: the next turn pings
            if batch is _END:
                break
            # Every chunk that arrived while the last piece was being written goes out
            # as one piece: one send for them all, not one per token. `_END` can only
            # be last: the pump puts nothing after it.
            ended = batch[-1] is _END
            if ended:
                batch.pop()
            data = self._answer.write_batch(translator, batch, response.id) if batch else b""
            if data:
                written = time.monotonic()
                yield data
            if translator.errored:
                response.cancel()
                break
            if ended:
                break
        yield from self._tail()

    def _release(self) -> None:
        self._handoff.close()  # a pump waiting for room leaves now
        super()._release()


class Handoff:
    """A bounded queue from the pump to the body, which `close()` ends for both sides."""

    def __init__(self, size: int) -> None:
        self._items: deque[Any] = deque()
        self._size = size
        self._cond = threading.Condition(threading.Lock())
        self._closed = False

    def put(self, item: Any, *, last: bool = False) -> bool:
        """Wait for room, then add `item` (`last`: even past the bound); False once closed."""
        return self.put_all([item], last=last)

    def put_all(self, items: list[Any], *, last: bool = False) -> bool:
        """Wait for room, then add every one of `items` at once, under one lock (the
        queue may then pass its bound by ``len(items) - 1``; `last`: even when full);
        False once closed."""
        with self._cond:
            while not last and len(self._items) >= self._size and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._items.extend(items)
            self._cond.notify_all()
            return True

    def take(self, timeout: float) -> Any:
        """Every item queued, as a list, once there is one; `_EMPTY` after `timeout`
        seconds with none, `_END` once closed. One lock hand-over for the lot."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self._closed, timeout):
                return _EMPTY
            if not self._items:
                return _END
            items = list(self._items)
            self._items.clear()
            self._cond.notify_all()
            return items

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._items.clear()
            self._cond.notify_all()


def _pump(response: Response, arrived: Handoff) -> None:
    """Move `response`'s chunks into `arrived` as the body takes them, then `_END`.

    The Response ends its iteration when it settles however it settles (a
    hang-up's cancel, `close()`'s), and a closed handoff ends the loop, so
    this thread never outlives the request.
    """
    try:
        # A burst goes in whole: one lock hand-over for all it holds, not one per chunk.
        for batch in response.iter_batches():
            if not arrived.put_all(batch):
                return
    finally:
        arrived.put(_END, last=True)
