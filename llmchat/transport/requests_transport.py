"""RequestsTransport: the real transport, over a pooled `requests.Session`.

Reads use urllib3's ``read1`` (bytes as they arrive, never waiting to fill a
buffer), decoded from their Content-Encoding by urllib3's own incremental
decoders; from urllib3 2.6 one read's decompressed output is bounded, so a
decompression bomb meets the size limit instead of filling memory.

A body with nothing to decode and no Content-Length (a chunked or
close-delimited stream, which is what servers stream) is read one level
lower, from `http.client`'s ``read1``, with urllib3's `_error_catcher` entered
only when a read fails and at the end rather than around every read: the same
bytes, the same exceptions (urllib3's), the same release of the connection at
the end, about 2.6 µs less per read. A chunked body's read hands over every
chunk already received (`chunked.chunked_read1`), not http.client's one chunk
per read: with one HTTP chunk per SSE event, a read that found ten events
waiting costs one read, not ten.

A request whose reused pooled connection turns out dead before any response
byte (`pool.StaleConnection`: the server closed it while idle) is sent once
more on a new connection; `Exchange.resends` counts it for the wire log.
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

import requests

from . import environment
from .adapter import DEFAULT_POOL_SIZE, new_session
from .base import READ_SIZE, Transport, TransportResponse, bounded, over_limit
from .chunked import chunked_read1
from .exceptions import exception_chain
from .exchange import Exchange, sending
from .pool import StaleConnection

__all__ = ["RequestsTransport"]


class RequestsTransport(Transport):
    """Sends requests over one pooled session (`CancellableAdapter` unless you bring your own)."""

    def __init__(
        self, session: requests.Session | None = None, *, pool_size: int = DEFAULT_POOL_SIZE
    ) -> None:
        self.session = session if session is not None else new_session(pool_size)

    def open(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        data: bytes | None,
        exchange: Exchange,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
    ) -> TransportResponse:
        if exchange.aborted is not None:  # cancelled before the request even started
            raise _Aborted(exchange.aborted)
        send = (method, url, dict(headers), data, (connect_timeout, read_timeout))
        try:
            response = self._send(exchange, *send, fresh=False)
        except Exception as exc:
            # Only when the server never answered on a reused connection, and
            # never after an abort: a cancel or deadline shuts the socket down
            # too, which reads just like a server's close.
            if exchange.aborted is not None or not _is_stale(exc):
                raise
            exchange.resends += 1
            response = self._send(exchange, *send, fresh=True)
        exchange.attach_response(response)
        if exchange.aborted is not None:
            raise _Aborted(exchange.aborted)
        return _RequestsResponse(response)

    def _send(
        self,
        exchange: Exchange,
        method: str,
        url: str,
        headers: dict[str, str],
        data: bytes | None,
        timeout: tuple[float | None, float | None],
        *,
        fresh: bool,
    ) -> requests.Response:
        with sending(exchange, fresh=fresh):
            return environment.send(self.session, method, url, headers, data, timeout)

    def close(self) -> None:
        self.session.close()


class _RequestsResponse(TransportResponse):
    def __init__(self, response: requests.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers
        self._draining: Any = None
        self._drained_conn: Any = None

    def iter_bytes(self, limit: int | None = None) -> Iterator[bytes]:
        plain = _plain_body(self._response.raw)
        if plain is not None:
            return _read1_plain(*plain, limit)  # bounded itself: one generator per read
        return bounded(_read1_urllib3(self._response.raw), limit)

    def will_drain(self) -> None:
        conn = self._response.raw.connection
        draining = getattr(getattr(conn, "llmchat_pool", None), "draining", None)
        if draining is not None and self._draining is None:
            draining.start()
            self._draining, self._drained_conn = draining, conn

    def close(self) -> None:
        # After a body read to its end urllib3 has released the connection to
        # the pool already, and closing the response leaves it there.
        raw = self._response.raw
        kept = raw.connection is None and getattr(self._drained_conn, "sock", None) is not None
        with contextlib.suppress(Exception):
            self._response.close()
        draining, self._draining, self._drained_conn = self._draining, None, None
        if draining is not None:
            draining.end(kept=kept)


def _read1_urllib3(raw: Any) -> Iterator[bytes]:
    read = raw.read1
    while True:
        data = read(READ_SIZE, decode_content=True)
        if not data:
            return
        yield data


_ErrorCatcher = Callable[[], AbstractContextManager[None]]


def _plain_body(raw: Any) -> tuple[http.client.HTTPResponse, _ErrorCatcher] | None:
    """`raw`'s http.client response and error catcher when urllib3 would pass its bytes through.

    That is: nothing to decode, no Content-Length for urllib3 to enforce,
    nothing read yet. None otherwise, or when urllib3's internals are not the
    ones this was written against (then its public ``read1`` is used).

    The one place llmchat reads urllib3's private attributes: the fast path
    needs its undecoded body and its error catcher, which it does not expose,
    and the checks fall back to the public path whenever they are not there.
    """
    try:
        fp = raw._fp
        if not isinstance(fp, http.client.HTTPResponse) or raw.length_remaining is not None:
            return None
        raw._init_decoder()
        if raw._decoder is not None or raw._has_decoded_content or len(raw._decoded_buffer):
            return None
        error_catcher = raw._error_catcher
        if not callable(error_catcher):
            return None
    except (AttributeError, TypeError):
        return None
    return fp, error_catcher


def _read1_plain(
    fp: http.client.HTTPResponse, error_catcher: _ErrorCatcher, limit: int | None
) -> Iterator[bytes]:
    """What `bounded(_read1_urllib3(...), limit)` yields, read from `fp` with urllib3's
    error handling.

    A read that raises is re-raised inside urllib3's own error catcher, which
    turns socket, TLS and framing errors into urllib3's exceptions and closes
    the connection, as it does around each of its reads; the end of the body
    goes through the catcher too, which releases the connection to the pool.
    Between reads nothing is held open, so a reader may stop (a stream's
    explicit end) and read on later with another iterator (keep-alive's drain).
    A chunked body is read with `chunked_read1`: every chunk already received
    per read, the framing state kept in `fp` between reads.
    """
    read = chunked_read1(fp) or fp.read1
    total = 0
    while True:
        try:
            data = read(READ_SIZE)
        except Exception:
            with error_catcher():
                raise
        if not data:
            with error_catcher():
                fp.close()  # as urllib3 does when a read returns nothing
            return
        if limit is not None:
            total += len(data)
            if total > limit:
                yield from over_limit(data, total, limit)
        yield data


def _is_stale(exc: BaseException) -> bool:
    return any(isinstance(item, StaleConnection) for item in exception_chain(exc))


class _Aborted(Exception):
    """The exchange was aborted while `requests` returned normally."""
