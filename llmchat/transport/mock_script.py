"""What a `MockTransport` plays: the request it hands a handler, the response a
handler returns, and the steps a response's bytes are interleaved with.

All of it is frozen data, so one `MockResponse` can answer any number of
requests, and a test reads as the exact bytes and timing it scripts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "Cut",
    "MockAborted",
    "MockRequest",
    "MockResponse",
    "Pause",
    "Piece",
    "Raise",
    "Stall",
    "Step",
    "TimedOut",
]


# -- steps -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pause:
    """Send nothing for `seconds` (before the headers: the server's prefill).

    The silence counts against the reader's `read_timeout` like a real
    socket's: a pause longer than what is left of it raises the read timeout
    when it runs out. An abort of the exchange ends it at once.
    """

    seconds: float

    def __post_init__(self) -> None:
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidTypeError(f"Pause seconds must be a number, got {seconds!r}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidArgumentError(
                f"Pause seconds must be a finite number >= 0, got {seconds!r}"
            )


@dataclass(frozen=True, slots=True)
class Stall:
    """A black hole: send nothing, ever.

    Ends only when the reader's `read_timeout` runs out (before the headers:
    ``No response headers within …``; in the body: ``Body silent for more
    than …``) or the exchange is aborted (cancel, deadline, finish grace).
    With no read timeout, only an abort ends it.
    """


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The read timeout fires at once, as if the server had stayed silent for `read_timeout`.

    A `Stall` without the wait, for fast tests of timeout handling. With no
    read timeout it behaves as a `Stall`.
    """


@dataclass(frozen=True, slots=True)
class Cut:
    """The connection is reset here (the peer sent RST).

    Before the headers it classifies as ``Connection reset before a response``
    (class ``connection``); in the body as ``Body cut off: …`` (class
    ``response``; a stream names it ``Stream closed without [DONE] …``).
    """


@dataclass(frozen=True, slots=True)
class Raise:
    """Raise `error` here, for failures no other step names.

    ``Raise(ConnectionRefusedError())`` before the headers is a refused
    connection; an exception `classify_exception` does not know is ``unknown``.
    """

    error: BaseException = field(compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.error, BaseException):
            raise InvalidTypeError(
                f"Raise needs an exception instance, got {type(self.error).__name__}"
            )


Step: TypeAlias = Pause | Stall | TimedOut | Cut | Raise
"""What a mock connection does between (or before) body pieces."""
Piece: TypeAlias = bytes | str | Step
"""One body piece: bytes (a `str` is sent as UTF-8), or a step."""

_STEPS = (Pause, Stall, TimedOut, Cut, Raise)


class MockAborted(ConnectionResetError):
    """What a read raises when its exchange was aborted (cancel, deadline, grace).

    A `ConnectionResetError`, as a shut-down socket reads on the real
    transport; the caller looks at `Exchange.aborted` for the reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"exchange aborted ({reason})")
        self.reason = reason


# -- request and response ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class MockRequest:
    """One request as the transport received it."""

    method: str
    url: str
    headers: Mapping[str, str]
    """Read-only, looked up without regard to case."""
    body: bytes
    """The posted bytes (``b""`` when none)."""
    json: Any = None
    """The body parsed as JSON, or None when it is empty or not JSON."""

    @property
    def path(self) -> str:
        """The URL's path (``/v1/chat/completions``), without the query."""
        return urlsplit(self.url).path


@dataclass(frozen=True)
class MockResponse:
    """What the handler answers: a status, headers, body pieces and steps.

    `body` is bytes, a `str` (sent as UTF-8) or a sequence of pieces: bytes,
    `str` and steps (`Pause`, `Stall`, `TimedOut`, `Cut`, `Raise`); each
    non-empty bytes piece is one read. `before_headers` are steps played
    before `open` returns. The pieces are the decoded body: a
    ``Content-Encoding`` header is passed on but not applied. Frozen: one
    MockResponse may answer any number of requests.
    """

    status: int = 200
    headers: Mapping[str, str] | None = None
    body: bytes | str | Sequence[Piece] = b""
    _: KW_ONLY
    before_headers: Sequence[Step] = ()

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise InvalidTypeError(f"status must be an int, got {self.status!r}")
        if not 100 <= self.status <= 599:
            raise InvalidArgumentError(f"status must be 100-599, got {self.status}")
        if self.headers is not None and not isinstance(self.headers, Mapping):
            raise InvalidTypeError("headers must be a mapping or None")
        pieces = _pieces(self.body)
        steps = tuple(self.before_headers)
        for step in steps:
            if not isinstance(step, _STEPS):
                raise InvalidTypeError(
                    f"before_headers takes steps (Pause, Stall, TimedOut, Cut, Raise), "
                    f"got {type(step).__name__}"
                )
        if not isinstance(self.body, (bytes, str)):
            object.__setattr__(self, "body", tuple(self.body))
        object.__setattr__(self, "_pieces", pieces)
        object.__setattr__(self, "before_headers", steps)

    @property
    def pieces(self) -> tuple[bytes | Step, ...]:
        """The body as bytes pieces and steps, in order."""
        pieces: tuple[bytes | Step, ...] = self.__dict__["_pieces"]
        return pieces

    @classmethod
    def json(
        cls,
        payload: Any,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        *,
        before_headers: Sequence[Step] = (),
    ) -> MockResponse:
        """A JSON body (``application/json``), encoded compactly as UTF-8."""
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        return cls(
            status,
            {"Content-Type": "application/json", **(headers or {})},
            data,
            before_headers=before_headers,
        )

    @classmethod
    def error(
        cls, status: int, message: str, type: str = "server_error", **kwargs: Any
    ) -> MockResponse:
        """An error shaped like llama.cpp's: ``{"error": {code, message, type}}``."""
        return cls.json(
            {"error": {"code": status, "message": message, "type": type}}, status, **kwargs
        )

    @classmethod
    def sse(
        cls,
        events: Iterable[Mapping[str, Any] | str | bytes | Step],
        *,
        delay: float = 0.0,
        done: bool = True,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        before_headers: Sequence[Step] = (),
    ) -> MockResponse:
        """A ``text/event-stream`` body, one piece per event.

        A mapping is sent as ``data: <json>``, a `str` as ``data: <str>``,
        bytes as they are, steps as steps; `delay` puts a `Pause` between
        events; `done` ends with ``data: [DONE]``.
        """
        pieces: list[Piece] = []
        for event in events:
            if isinstance(event, _STEPS):
                pieces.append(event)
                continue
            if pieces and delay > 0:
                pieces.append(Pause(delay))
            pieces.append(_sse_event(event))
        if done:
            if pieces and delay > 0:
                pieces.append(Pause(delay))
            pieces.append(b"data: [DONE]\n\n")
        return cls(
            status,
            {"Content-Type": "text/event-stream", **(headers or {})},
            pieces,
            before_headers=before_headers,
        )


def _sse_event(event: Mapping[str, Any] | str | bytes) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        return f"data: {event}\n\n".encode()
    if isinstance(event, Mapping):
        text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        return f"data: {text}\n\n".encode()
    raise InvalidTypeError(f"an SSE event must be a dict, str, bytes or step, got {event!r}")


def _pieces(body: Any) -> tuple[bytes | Step, ...]:
    if isinstance(body, (bytes, str)):
        body = [body]
    if isinstance(body, Mapping) or not isinstance(body, Iterable):
        raise InvalidTypeError(
            f"body must be bytes, str or a list of pieces, got {type(body).__name__}"
        )
    out: list[bytes | Step] = []
    for piece in body:
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        elif isinstance(piece, (bytearray, memoryview)):
            piece = bytes(piece)
        if isinstance(piece, bytes):
            if piece:
                out.append(piece)
        elif isinstance(piece, _STEPS):
            out.append(piece)
        else:
            raise InvalidTypeError(
                f"a body piece must be bytes, str or a step, got {type(piece).__name__}"
            )
    return tuple(out)
