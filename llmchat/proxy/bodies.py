"""Streamed WSGI bodies that account for themselves when the server closes them.

WSGI servers call an iterable's `close()` however the response ended — it
finished, or a write to a client that hung up failed — so that is where the
upstream is cancelled if still live and the request's usage event is
recorded, exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..response import Response
from .answers import Answer
from .hangup import HangupWatch
from .relay_meter import RelayMeter
from .upstream import Relay, RelayBroken, failure_of, is_truncation
from .usage import CLIENT_ABORT_STATUS, UsageEvent

__all__ = ["RelayBody", "StreamBody"]


class StreamBody:
    """A translated stream as a WSGI iterable; `close()` is where it is accounted for.

    WSGI servers call `close()` however the response ended — finished, or a
    write to a gone client failed — so the upstream is cancelled and the
    usage event emitted there, exactly once.
    """

    def __init__(
        self,
        event: UsageEvent,
        record: Callable[[], None],
        response: Response,
        translator: Any,
        answer: Answer,
        first: Any,
        chunks: Iterator[Any],
        watch: HangupWatch,
    ) -> None:
        self._event = event
        self._record = record
        self._response = response
        self._translator = translator
        self._answer = answer
        self._first = first
        self._chunks = chunks
        self._watch = watch
        self._completed = False
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        translator, response = self._translator, self._response
        head = translator.start()
        if head:
            yield head
        chunk = self._first
        while chunk is not None:
            data = translator.delta(self._answer.chunk(chunk))
            if data:
                yield data
            if translator.errored:
                response.cancel()
                break
            chunk = next(self._chunks, None)
        if not translator.errored:
            response.wait()
            if self._watch.hung_up.is_set() or response.is_cancelled:
                return  # nobody is reading; close() records the abort
            if response.is_success or is_truncation(response):
                data = translator.finish(None, response.prompt_tokens, response.completion_tokens)
            else:
                failure = failure_of(response)
                self._event.error_type = failure.error_class
                data = translator.error_event(failure.status, failure.message)
            if data:
                yield data
        self._completed = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watch.stop()
        response, event = self._response, self._event
        if not response.is_done:
            response.cancel()
        input_tokens, output_tokens, content_bytes = self._translator.usage()
        event.input_tokens = input_tokens if input_tokens is not None else response.prompt_tokens
        event.output_tokens = (
            output_tokens if output_tokens is not None else response.completion_tokens
        )
        event.content_bytes = content_bytes
        if response.model and not event.model:
            event.model = response.model
        if not self._completed:  # a client leaving after the last byte is no abort
            event.status, event.ok, event.error_type = CLIENT_ABORT_STATUS, False, "client_abort"
        elif self._translator.errored:
            event.ok = False
            event.error_type = event.error_type or "stream"
        self._record()


class RelayBody:
    """The OpenAI face's relayed body; like `StreamBody`, accounted for in `close()`."""

    def __init__(
        self,
        event: UsageEvent,
        record: Callable[[], None],
        relay: Relay,
        meter: RelayMeter,
        watch: HangupWatch,
    ) -> None:
        self._event = event
        self._record = record
        self._relay = relay
        self._meter = meter
        self._watch = watch
        self._completed = False
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        meter = self._meter
        try:
            for data in self._relay.chunks():
                meter.feed(data)
                yield data
        except RelayBroken:
            self._event.ok = False
            self._event.error_type = "connection"
            return  # the client sees the body stop short, as it would from the upstream
        meter.close()
        self._completed = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watch.stop()
        self._relay.cancel()
        self._relay.close()
        event, meter = self._event, self._meter
        event.input_tokens = meter.input_tokens
        event.output_tokens = meter.output_tokens
        event.content_bytes = meter.content_bytes
        if meter.model and not event.model:
            event.model = meter.model
        if not self._completed:  # a client leaving after the last byte is no abort
            if event.error_type is None:
                event.status, event.ok, event.error_type = (
                    CLIENT_ABORT_STATUS,
                    False,
                    "client_abort",
                )
        elif event.ok and meter.event_stream and not meter.finished:
            event.ok, event.error_type = False, "response"
        self._record()
