"""A real transport whose response bodies a test can wrap (to watch or steer the reads)."""

from __future__ import annotations

from collections.abc import Mapping

from llmchat.transport import Exchange, RequestsTransport, Transport, TransportResponse


class WrappingTransport(Transport):
    """`RequestsTransport`, with every response handed to `wrap` before the caller sees it."""

    def __init__(self) -> None:
        self._inner = RequestsTransport()

    def wrap(self, body: TransportResponse) -> TransportResponse:
        return body

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
        inner = self._inner.open(
            method,
            url,
            headers,
            data,
            exchange,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        return self.wrap(inner)

    def close(self) -> None:
        self._inner.close()
