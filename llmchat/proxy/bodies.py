"""Streamed WSGI bodies that account for themselves when the server closes them.

WSGI servers call an iterable's `close()` however the response ended — it
finished, or a write to a client that hung up failed — so that is where the
upstream is cancelled if still live and the request's usage event is
recorded, exactly once. The first piece's time, when the server starts
iterating, is the request's time to first byte (`ClientExchange.first_byte`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from ..chunk import Chunk
from ..response import Response
from .answers import Answer
from .client_exchange import ClientExchange
from .server.hangup import HangupWatch
from .usage import CLIENT_ABORT_STATUS

__all__ = ["STREAM_HEADERS", "AccountedBody", "StreamBody", "begin_stream"]

STREAM_HEADERS = [("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")]
"""Headers of every streamed answer: no cache, and no buffering in an nginx in front."""


def begin_stream(exchange: ClientExchange, answer: Answer) -> Any:
    """Start a streamed 200 in `answer`'s format: its new translator, once the headers are set."""
    translator = answer.stream()
    exchange.begin(200, translator.content_type, STREAM_HEADERS)
    return translator


class AccountedBody:
    """A WSGI body whose `close()` stops the upstream and records the usage event once."""

    def __init__(self, exchange: ClientExchange, watch: HangupWatch) -> None:
        self._exchange = exchange
        self._event = exchange.event
        self._watch = watch
        watch.answering()  # no interim 100 may be written into the answer from here on
        self._completed = False
        """Set when the iteration wrote its last byte; unset, the client went away first."""
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        # The first non-empty piece is pulled here, as the server starts iterating, and
        # its time is the request's time to first byte; the rest pass through a C
        # iterator, so measuring costs nothing per streamed delta.
        chunks = self._pieces()
        for data in chunks:
            if data:
                self._exchange.first_byte()
                return itertools.chain((data,), chunks)
        return chunks

    def _pieces(self) -> Iterator[bytes]:
        """The body's pieces, as the server is to write them."""
        raise NotImplementedError

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watch.stop()
        self._release()
        event = self._event
        if not self._completed:
            event.ok = False
            if event.error_type is None:  # an upstream failure seen first stays the cause
                event.status, event.error_type = CLIENT_ABORT_STATUS, "client_abort"
        # A client leaving after the last byte is no abort: nothing more to judge.
        self._exchange.record()

    def _release(self) -> None:
        """Stop the upstream if still live and copy the counts onto the event."""
        raise NotImplementedError


class StreamBody(AccountedBody):
    """A translated stream as a WSGI iterable; `close()` is where it is accounted for.

    The upstream Response is read by batches as it arrives
    (`Response.iter_batches`): every chunk that arrived while the last piece
    was being written is translated at once and yielded as one piece, so a
    burst of tokens costs one send, not one per token. An upstream failure
    after output started ends the stream with the format's error, never with
    its success ending.
    """

    def __init__(
        self,
        exchange: ClientExchange,
        response: Response,
        translator: Any,
        answer: Answer,
        first: list[Chunk] | None,
        batches: Iterator[list[Chunk]],
        watch: HangupWatch,
    ) -> None:
        super().__init__(exchange, watch)
        self._response = response
        self._translator = translator
        self._answer = answer
        self._first = first
        self._batches = batches

    def _pieces(self) -> Iterator[bytes]:
        translator, response = self._translator, self._response
        head = translator.start()
        if head:
            yield head
        batch = self._first
        while batch is not None:
            data = self._answer.write_batch(translator, batch, response.id)
            if data:
                yield data
            if translator.errored:
                response.cancel()
                break
            batch = next(self._batches, None)
        yield from self._tail()

    def _tail(self) -> Iterator[bytes]:
        """The stream's last bytes once the upstream settled (none for a client that is gone)."""
        translator, response = self._translator, self._response
        if not translator.errored:
            response.wait()
            if self._watch.hung_up.is_set() or response.is_cancelled:
                return  # nobody is reading; close() records the abort
            if self._answer.complete(response):
                data = translator.finish(None, response.prompt_tokens, response.completion_tokens)
            else:
                failure = self._answer.failure(response)
                self._event.error_type = failure.error_class
                data = translator.error_event(failure.status, failure.message)
            if data:
                yield data
        self._completed = True

    def _release(self) -> None:
        response, event = self._response, self._event
        if not response.is_done:
            response.cancel()
        input_tokens, output_tokens, content_bytes = self._translator.usage()
        event.input_tokens = input_tokens if input_tokens is not None else response.prompt_tokens
        event.output_tokens = (
            output_tokens if output_tokens is not None else response.completion_tokens
        )
        # The translators keep no cache count: the Response's is the upstream's own.
        event.cached_tokens = response.cached_tokens
        event.cache_write_tokens = response.cache_write_tokens
        event.reasoning_tokens = response.reasoning_tokens
        event.content_bytes = content_bytes
        if response.model and not event.model:
            event.model = response.model
        if self._translator.errored:
            event.ok = False
            event.error_type = event.error_type or "stream"
