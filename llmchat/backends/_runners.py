"""The two runners: one exchange each, through the one pipeline, settled exactly once.

`run_blocking` reads one whole body; `start_stream` hands `stream_worker` to a
reader thread that feeds SSE frames through the stages. Both decode with the
same dialect decoder, accumulate with the same `Accumulator`, turn what
stopped the reading into a typed `Ending`, and settle through `settle`: the
judge's verdict, `_reconcile_finish_reason` once (with the provider's reason,
only when the provider's own end was reached), the completion hook only on
success. They read one `Call` (the request, the transport, limits and the
hooks, bound), never the backend. They live beside the backends, not in
`llmchat.pipeline`, because they own the transport exchange.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import Final

from ..chunk import Chunk
from ..completion import error_message, json_error_message
from ..dialects.base import Framing
from ..ndjson import NDJSONDecoder
from ..pipeline.accumulate import Accumulator
from ..pipeline.judge import (
    CANCELLED_ENDING,
    DONE_ENDING,
    EOF_ENDING,
    Ending,
)
from ..response import Response, writer_of
from ..response_writer import ResponseWriter
from ..sse import EventTooLarge, KeepAliveWatch, SSEDecoder
from ..transport import (
    Exchange,
    Timeouts,
    Transport,
    TransportResponse,
    parse_json,
)
from ..wirelog import WireLog
from ._baton import ReadBaton, Reads
from ._request import WireRequest
from ._reuse import drain
from ._settle import decide_finish, ending_of_abort, ending_of_failure, settle
from .call import Call, LiftUsage

log = logging.getLogger("llmchat")

__all__ = [
    "complete_body",
    "decide_finish",
    "pump_reads",
    "run_blocking",
    "settle",
    "start_stream",
    "stream_worker",
]

ERR_NOT_UTF8: Final = "Response body is not valid UTF-8"


# -- blocking ---------------------------------------------------------------------


def run_blocking(call: Call, response: Response) -> None:
    """One blocking completion: send, read the whole body, settle."""
    request = call.request
    writer = writer_of(response)
    exchange = _armed_exchange(call, writer)
    wirelog = WireLog(call.secrets)
    wirelog.request(request.method, request.url, request.headers, request.data)
    http = None
    try:
        http = open_request(call.transport, call.timeouts, request, exchange, wirelog)
        wirelog.response(http.status_code, http.headers)
        writer.note_headers(http.headers)
        data = read_all(http, wirelog, call.max_response_bytes)
    except Exception as exc:
        ending = ending_of_failure(
            call, exc, exchange, after_headers=http is not None, stream=False
        )
        settle(call, writer, ending, new_accumulator(call, keep_raw=True))
        wirelog.end(f"failed: {response.err}")
        return
    finally:
        exchange.finish()
        if http is not None:
            http.close()
    complete_body(call, response, http.status_code, data)
    wirelog.end("ok" if response.is_success else f"failed: {response.err}")


def complete_body(call: Call, response: Response, status: int, data: bytes) -> None:
    """A whole body (blocking, or a stream answered without SSE): a one-payload stream."""
    writer = writer_of(response)
    acc = new_accumulator(call, keep_raw=True)
    settle(call, writer, _read_body(call.lift_usage, writer, status, data, acc), acc)


def new_accumulator(call: Call, *, keep_raw: bool) -> Accumulator:
    """The accumulator of one completion, with a fresh decoder of the call's dialect."""
    return Accumulator(call.dialect(call.kind), keep_raw=keep_raw, think_tags=call.think_tags)


def _read_body(
    lift: LiftUsage, writer: ResponseWriter[Response], status: int, data: bytes, acc: Accumulator
) -> Ending:
    if status >= 300:  # a redirect still here was not followed (another origin)
        return _http_failure(writer, status, data)
    try:
        text = data.decode("utf-8-sig")  # a leading BOM is dropped
    except UnicodeDecodeError:
        return Ending("malformed", message=ERR_NOT_UTF8)
    if not text.strip():
        return Ending("malformed", message="Empty response body")
    payload = parse_json(text)
    response = writer.response
    chunks: list[Chunk] = []
    if isinstance(payload, list) and acc.dialect.array_body:
        # A stream sent as one JSON array (Gemini without alt=sse): its payloads in order.
        for item in payload:
            if isinstance(item, Mapping):
                lift(response, item)
                chunks += acc.feed_payload(item)
            else:
                acc.drop()
    elif isinstance(payload, Mapping):
        lift(response, payload)
        chunks = acc.feed_payload(payload, whole=True)
    else:
        return Ending("malformed", message=f"Response is not a JSON object: {_excerpt(text)}")
    _sync(writer, acc)
    writer.publish(chunks)
    return Ending("body", body=text)


def _http_failure(writer: ResponseWriter[Response], status: int, data: bytes) -> Ending:
    # Only for the message: an error body is read whatever its bytes are.
    text = data.decode("utf-8-sig", "replace")
    payload = parse_json(text)
    writer.note_error_body(len(data), json_error_message(payload))
    return Ending("http", message=error_message(payload, text, status), status=status)


# -- streamed ---------------------------------------------------------------------


def start_stream(call: Call, response: Response) -> None:
    """Start the reader thread for a streamed completion; returns at once."""
    exchange = _armed_exchange(call, writer_of(response))
    threading.Thread(
        target=stream_worker,
        args=(call, response, exchange),
        name="llmchat-stream",
        daemon=True,
    ).start()


def stream_worker(call: Call, response: Response, exchange: Exchange) -> None:
    """The reader thread: one exchange, then exactly one settle, then maybe the drain.

    After the dialect's explicit end the Response settles first (the caller
    has its answer at once); only then is the rest of the body read, so that
    its connection can go back to the pool (`_reuse.drain`).
    """
    request = call.request
    writer = writer_of(response)
    wirelog = WireLog(call.secrets)
    wirelog.request(request.method, request.url, request.headers, request.data)
    acc = new_accumulator(call, keep_raw=call.keep_raw)
    http = None
    ending: Ending | None = None
    try:
        try:
            http = open_request(call.transport, call.timeouts, request, exchange, wirelog)
            wirelog.response(http.status_code, http.headers)
            writer.note_headers(http.headers)
            if _is_stream(http, acc.dialect.framing):
                reads = pump_reads(call, http, writer, acc, exchange, wirelog)
                ending = ReadBaton(reads, writer).run()
            else:
                # An error status, or a server that ignored "stream": a whole body.
                data = read_all(http, wirelog, call.max_response_bytes)
                complete_body(call, response, http.status_code, data)
        except Exception as exc:
            ending = ending_of_failure(
                call, exc, exchange, after_headers=http is not None, stream=True
            )
            if ending.kind in ("transport", "cut") and acc.finished and exchange.aborted is None:
                ending = EOF_ENDING  # a connection lost after the finish chunk is a close
        grace = call.timeouts.reuse_grace or 0.0
        said_more = ending is DONE_ENDING and acc.after_end  # the drain would have read it
        draining = http if ending is DONE_ENDING and grace > 0 and not said_more else None
        if draining is not None:
            draining.will_drain()
        else:
            _close(exchange, http)
        try:
            if ending is not None:
                settle(call, writer, ending, acc)
        finally:
            if not response.is_done:  # a bug in a hook must not leave a Response live
                writer.settle("unknown", "The stream reader failed")
            wirelog.end("cancelled" if response.is_cancelled else response.err or "ok")
        if draining is not None:
            wirelog.connection(drain(draining, exchange, grace))
        elif said_more and grace > 0:
            wirelog.connection("closed: bytes after the end")
    finally:
        _close(exchange, http)


def _close(exchange: Exchange, http: TransportResponse | None) -> None:
    exchange.finish()
    if http is not None:
        http.close()


def pump_reads(
    call: Call,
    http: TransportResponse,
    writer: ResponseWriter[Response],
    acc: Accumulator,
    exchange: Exchange,
    wirelog: WireLog,
) -> Reads:
    """Feed body bytes through the stages until ``[DONE]`` or the end of the body.

    One step per read, so the reader thread or an iterating consumer can
    advance it (`ReadBaton`). Each step yields the chunks of its read, which
    the baton publishes together as it hands the turn back: one lock and one
    wake-up per read rather than per frame. The last step publishes its own
    (the generator returns the Ending instead). The finish chunk is recorded,
    not acted on: reading goes on for the usage frame, for `stream_finish_grace`.
    """
    decoder: SSEDecoder | NDJSONDecoder = (
        NDJSONDecoder(call.max_event_bytes)
        if acc.dialect.framing == "ndjson"
        else SSEDecoder(call.max_event_bytes, stray_json=acc.dialect.stray_json)
    )
    grace = call.timeouts.finish_grace
    response = writer.response
    lift = functools.partial(call.lift_usage, response)
    named = response if call.lifts_model_only else None
    # The read timeout bounds a silence; this bounds keep-alive pings that never end.
    pings = KeepAliveWatch(call.timeouts.headers, time.monotonic())
    first = True
    for data in http.iter_bytes(call.max_response_bytes):
        if first:
            wirelog.first_byte()
            first = False
        response.last_activity_at = now = time.monotonic()
        finished = acc.finish_reason is not None
        try:
            events = decoder.feed_data(data)
        except EventTooLarge as exc:  # publish what came before it, then fail
            chunks = acc.feed_events(exc.events, lift, named)
            _publish(writer, acc, exchange, grace, chunks, finished)
            raise
        if events and type(events[0]) is str:
            pings.last = now  # a plain event, never a comment: what `seen` would find
        else:
            pings.seen(events, now)
        chunks = acc.feed_events(events, lift, named)
        if (
            acc.finish_reason is not None
            or acc.dropped != response.dropped_frames
            or acc.citations is not None
            or (response.id is None and acc.id is not None)
        ):
            # Only when a field may have changed: the plain frame changes none.
            _record(writer, acc, exchange, grace, finished)
        if acc.done:
            # What this read held past the end, still unfinished, is said after it too.
            acc.feed_events(decoder.flush())
            writer.publish(chunks)
            return CANCELLED_ENDING if exchange.aborted == "cancel" else DONE_ENDING
        yield chunks
    finished = acc.finish_reason is not None
    chunks = acc.feed_events(decoder.flush(), lift, named)
    if not acc.done and acc.finish_reason is None:
        chunks += acc.flush_text()  # the body ended mid-answer: keep what the filter held
    _publish(writer, acc, exchange, grace, chunks, finished)
    if acc.done and exchange.aborted != "cancel":
        return DONE_ENDING
    # A body that ends after an abort is never a clean end.
    return ending_of_abort(call.timeouts, exchange) or EOF_ENDING


def _publish(
    writer: ResponseWriter[Response],
    acc: Accumulator,
    exchange: Exchange,
    grace: float | None,
    chunks: list[Chunk],
    finished_before: bool,
) -> None:
    """One read's effect on the Response: the finish stamp, the fields, the chunks."""
    _record(writer, acc, exchange, grace, finished_before)
    writer.publish(chunks)


def _record(
    writer: ResponseWriter[Response],
    acc: Accumulator,
    exchange: Exchange,
    grace: float | None,
    finished_before: bool,
) -> None:
    """One read's effect on the Response's fields (its chunks come after): the finish, the id …"""
    if not finished_before and acc.finish_reason is not None:
        # Recorded, not acted on: read on for the usage frame, but not forever.
        _record_finish(writer, acc)
        if acc.dialect.finish_is_last:
            exchange.schedule_abort(grace, "grace")
    _sync(writer, acc)


def _sync(writer: ResponseWriter[Response], acc: Accumulator) -> None:
    response = writer.response
    if response.id is None and acc.id is not None:
        response.id = acc.id
    if acc.citations is not None and response.citations is not acc.citations:
        response.citations = acc.citations
    if response.dropped_frames != acc.dropped:
        response.dropped_frames = acc.dropped
    if acc.finish_reason is not None and response.provider_finish_reason is None:
        _record_finish(writer, acc)


def _record_finish(writer: ResponseWriter[Response], acc: Accumulator) -> None:
    writer.record(finish_reason=acc.finish_reason, provider_finish_reason=acc.provider_reason)


def _armed_exchange(call: Call, writer: ResponseWriter[Response]) -> Exchange:
    """A new exchange with the whole-request deadline armed, torn down by a cancel."""
    exchange = Exchange()
    exchange.arm_deadline(call.timeouts.request)
    writer.attach_aborter(lambda: exchange.abort("cancel"))
    return exchange


# -- the exchange -------------------------------------------------------------------


def open_request(
    transport: Transport,
    timeouts: Timeouts,
    request: WireRequest,
    exchange: Exchange,
    wirelog: WireLog | None = None,
) -> TransportResponse:
    """Send `request` on `exchange` through `transport`, with the connect and headers timeouts.

    A resend after a dead pooled connection (`Exchange.resends`) goes to `wirelog`.
    """
    try:
        return transport.open(
            request.method,
            request.url,
            request.headers,
            request.data,
            exchange,
            connect_timeout=timeouts.connect,
            read_timeout=timeouts.headers,
        )
    finally:
        if exchange.resends and wirelog is not None:
            wirelog.resent()


def read_all(http: TransportResponse, wirelog: WireLog, limit: int | None) -> bytes:
    parts = []
    for data in http.iter_bytes(limit):
        wirelog.first_byte()
        parts.append(data)
    return b"".join(parts)


def _is_stream(http: TransportResponse, framing: Framing) -> bool:
    """True when a 2xx answer is framed as a stream, not one whole JSON body."""
    content_type = http.headers.get("Content-Type", "").lower()
    if http.status_code >= 300:
        return False
    if "json" not in content_type or "event-stream" in content_type:
        return True
    return framing == "ndjson" and "ndjson" in content_type


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
