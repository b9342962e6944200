"""RequestsTransport: the real transport, over a pooled `requests.Session`.

Reads use urllib3's ``read1`` (bytes as they arrive, never waiting to fill a
buffer), decoded from their Content-Encoding by urllib3's own incremental
decoders; from urllib3 2.6 one read's decompressed output is bounded, so a
decompression bomb meets the size limit instead of filling memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import requests

from .adapter import DEFAULT_POOL_SIZE, new_session
from .base import READ_SIZE, Transport, TransportResponse, bounded
from .exchange import Exchange, _current

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
        _current.exchange = exchange
        try:
            response = self.session.request(
                method,
                url,
                headers=dict(headers),
                data=data,
                stream=True,
                timeout=(connect_timeout, read_timeout),
            )
        finally:
            _current.exchange = None
        exchange.attach_response(response)
        if exchange.aborted is not None:
            raise _Aborted(exchange.aborted)
        return _RequestsResponse(response)

    def close(self) -> None:
        self.session.close()


class _RequestsResponse(TransportResponse):
    def __init__(self, response: requests.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers

    def iter_bytes(self, limit: int | None = None) -> Iterator[bytes]:
        return bounded(_read1(self._response.raw), limit)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._response.close()


def _read1(raw: Any) -> Iterator[bytes]:
    read = raw.read1
    while True:
        data = read(READ_SIZE, decode_content=True)
        if not data:
            return
        yield data


class _Aborted(Exception):
    """The exchange was aborted while `requests` returned normally."""
