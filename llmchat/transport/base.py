"""The transport seam: what a backend needs from the network, as two small interfaces.

A `Transport` opens one request on an `Exchange` and returns once the
response headers arrived; the `TransportResponse` then yields the decoded
body bytes and is closed. Everything above it (framing, decoding, judging,
settling) is the same whichever transport carries the bytes, so a test double
plugs in here (`MockTransport`) instead of re-implementing the pipeline.
Implementations may raise any exception from `open` or `iter_bytes`; the
caller passes it to `classify_exception`, the one place it is translated.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping

from .exchange import Exchange

__all__ = ["BodyTooLarge", "Transport", "TransportResponse", "bounded"]

READ_SIZE = 65536
"""The most decoded bytes one read hands over."""


class TransportResponse(ABC):
    """One response whose headers have arrived and whose body is still unread."""

    status_code: int
    """The HTTP status."""
    headers: Mapping[str, str]
    """The response headers, looked up without regard to case."""

    @abstractmethod
    def iter_bytes(self, limit: int | None = None) -> Iterator[bytes]:
        """Yield the body decoded from its Content-Encoding, as it arrives.

        Past `limit` decoded bytes, yield what fits and raise `BodyTooLarge`.
        An abort of the exchange ends it with an exception (never a clean end).
        """

    @abstractmethod
    def close(self) -> None:
        """Release the connection; idempotent, never raises.

        A body read to its clean end leaves its connection pooled for reuse;
        any other close drops the connection.
        """

    def will_drain(self) -> None:  # noqa: B027  (a transport without a pool needs nothing)
        """Say that the rest of the body is about to be read to its end, then closed.

        Called after a stream's explicit end, before the Response settles: a
        pooling transport lets the next request wait briefly for this
        connection instead of opening a new one.
        """

    def read(self, limit: int | None = None) -> bytes:
        """The whole decoded body (see `iter_bytes`)."""
        return b"".join(self.iter_bytes(limit))


class Transport(ABC):
    """Carries one backend's requests. Thread-safe: one instance serves every call."""

    @abstractmethod
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
        """Send the request; return once the response headers arrived.

        `connect_timeout` bounds connecting and `read_timeout` the wait for
        headers and every silence in the body (None: no limit). The exchange
        may be aborted from another thread at any moment, in prefill too:
        `open` or a later read must then end with an exception.
        """

    def close(self) -> None:  # noqa: B027  (a transport without resources needs nothing)
        """Release pooled connections."""


class BodyTooLarge(Exception):
    """A body's decoded bytes passed `max_response_bytes`; the reader stops at once."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Response body larger than max_response_bytes ({limit} bytes)")
        self.limit = limit


def bounded(pieces: Iterator[bytes], limit: int | None) -> Iterator[bytes]:
    """`pieces` up to `limit` bytes in all; the piece that passes it is cut and raises.

    The bytes up to the limit are yielded, so a stream keeps the frames they
    complete whatever the read sizes were.
    """
    if limit is None:
        yield from pieces
        return
    total = 0
    for data in pieces:
        total += len(data)
        if total > limit:
            yield from over_limit(data, total, limit)
        yield data


def over_limit(data: bytes, total: int, limit: int) -> Iterator[bytes]:
    """The part of `data` within `limit` (`total`: the bytes so far, `data`'s counted),
    then `BodyTooLarge`: what `bounded` does with the piece that passes it."""
    keep = len(data) - (total - limit)
    if keep > 0:
        yield data[:keep]
    raise BodyTooLarge(limit)
