"""The Anthropic face's streamed body: `StreamBody` with ``ping`` events while upstream is silent.

A client with an idle timeout (Claude Code's) gives up on a stream that sends
nothing for a while, and an upstream is silent for long stretches: prefill of
a long prompt, reasoning the client asked not to see, a tool call whose
arguments are assembled whole before they are shown. So the Response is read
by a small pump thread into a queue, and whenever `interval` seconds pass with
nothing written the body writes a ``ping`` (after ``message_start``, if none
went out yet). Accounting, hang-up handling and the ending are `StreamBody`'s.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from ..response import Response
from .answers import Answer
from .bodies import StreamBody
from .hangup import HangupWatch
from .usage import UsageEvent

__all__ = ["PingingStreamBody"]

_END: Final = object()


class PingingStreamBody(StreamBody):
    """A translated Anthropic stream that pings its client every `interval` seconds of silence.

    `silent_start` says the headers go out before any upstream output: the
    body then opens with ``message_start`` and a ``ping`` at once.
    """

    def __init__(
        self,
        event: UsageEvent,
        record: Callable[[], None],
        response: Response,
        translator: Any,
        answer: Answer,
        watch: HangupWatch,
        *,
        interval: float,
        silent_start: bool,
    ) -> None:
        super().__init__(event, record, response, translator, answer, None, iter(()), watch)
        self._interval = interval
        self._silent_start = silent_start

    def __iter__(self) -> Iterator[bytes]:
        translator, response, interval = self._translator, self._response, self._interval
        arrived: queue.SimpleQueue[Any] = queue.SimpleQueue()
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
            try:
                chunk = arrived.get(timeout=wait)
            except queue.Empty:
                continue  # silent for the whole interval: the next turn pings
            if chunk is _END:
                break
            data = translator.delta(self._answer.chunk(chunk, response.id))
            if data:
                written = time.monotonic()
                yield data
            if translator.errored:
                response.cancel()
                break
        yield from self._tail()


def _pump(response: Response, arrived: queue.SimpleQueue[Any]) -> None:
    """Move `response`'s chunks into `arrived` as they come, then `_END`.

    The Response ends its iteration when it settles however it settles (a
    hang-up's cancel, `close()`'s), so this thread never outlives the request.
    """
    try:
        for chunk in response:
            arrived.put(chunk)
    finally:
        arrived.put(_END)
