"""MockTransport: a `Transport` whose answers come from a function, with no socket.

    def handler(request: MockRequest) -> MockResponse:
        assert request.json["stream"] is True
        return MockResponse.sse([{"choices": [{"delta": {"content": "Hi"}}]}, Pause(0.1)])

    backend = OpenAICommon("http://mock.invalid/v1", transport=MockTransport(handler))

Everything above the seam is the real code: the SSE framer, the parser, the
settle, cancel and deadline rules. What a socket would do is scripted as data:
body pieces (bytes, or `str` sent as UTF-8) and steps between them (`Pause`,
`Stall`, `Cut`, `TimedOut`, `Raise`), and the same steps before the headers
(a `Pause` there is the server's prefill). Failures are raised as the
exceptions the requests transport raises for the same event, so
`classify_exception` names them exactly as it names a real server's.
"""

from __future__ import annotations

import json
import math
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from requests import exceptions as rq
from requests.structures import CaseInsensitiveDict
from urllib3 import exceptions as u3

from ..errors import InvalidArgumentError, InvalidTypeError
from .base import Transport, TransportResponse, bounded
from .exchange import Exchange

__all__ = [
    "Cut",
    "MockAborted",
    "MockRequest",
    "MockResponse",
    "MockTransport",
    "Pause",
    "Raise",
    "Stall",
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


# -- the transport -------------------------------------------------------------

Handler: TypeAlias = Callable[[MockRequest], MockResponse]


class MockTransport(Transport):
    """A `Transport` that asks `handler(request)` for each answer; no socket.

    `handler` gets a `MockRequest` and returns a `MockResponse`. It may be
    called from several threads at once (one per exchange) and must be
    thread-safe itself. A handler that raises, or returns something else,
    answers HTTP 500 with a JSON error naming the failure, and the exception
    is kept in `errors` (`check()` raises the first): a broken handler fails
    the call the way a broken server would, and the test can still tell.

    Every request is recorded in `requests`, in arrival order. Waits
    (`Pause`, `Stall`) end at once when the exchange is aborted, and an
    aborted exchange ends `open` or the body with `MockAborted`, never with a
    clean end.
    """

    def __init__(self, handler: Handler) -> None:
        if not callable(handler):
            raise InvalidTypeError(
                f"handler must be a callable (MockRequest) -> MockResponse, "
                f"got {type(handler).__name__}"
            )
        self.handler = handler
        self._lock = threading.Lock()
        self._requests: list[MockRequest] = []
        self._errors: list[BaseException] = []

    @property
    def requests(self) -> list[MockRequest]:
        """Every request received, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[BaseException]:
        """What the handler raised (or a `TypeError` for a bad answer), in order (a copy)."""
        with self._lock:
            return list(self._errors)

    def check(self) -> None:
        """Raise `RuntimeError` from the handler's first failure, if there was one."""
        errors = self.errors
        if errors:
            first = errors[0]
            raise RuntimeError(
                f"{len(errors)} MockTransport handler error(s); first: "
                f"{type(first).__name__}: {first}"
            ) from first

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
        if exchange.aborted is not None:
            raise MockAborted(exchange.aborted)
        body = bytes(data or b"")
        request = MockRequest(
            method=method,
            url=url,
            headers=types.MappingProxyType(CaseInsensitiveDict(headers)),
            body=body,
            json=_parse_json(body),
        )
        with self._lock:
            self._requests.append(request)
        answer = self._answer(request)
        line = _Line(exchange, url, read_timeout)
        try:
            for step in answer.before_headers:
                line.play(step, after_headers=False)
            line.check()
        except BaseException:
            line.close()
            raise
        return _MockResponse(answer, line)

    def _answer(self, request: MockRequest) -> MockResponse:
        try:
            answer = self.handler(request)
            if not isinstance(answer, MockResponse):
                raise TypeError(f"the handler returned {type(answer).__name__}, not a MockResponse")
        except Exception as exc:
            with self._lock:
                self._errors.append(exc)
            return MockResponse.error(
                500, f"the MockTransport handler failed: {type(exc).__name__}: {exc}"
            )
        return answer


def _parse_json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


class _Line:
    """One mock connection's clock: silences, the read timeout and the abort."""

    def __init__(self, exchange: Exchange, url: str, read_timeout: float | None) -> None:
        self.exchange = exchange
        self.url = url
        self.read_timeout = read_timeout
        self._woken = threading.Event()
        self._silent_since = time.monotonic()
        exchange.add_abort_callback(self._woken.set)

    def check(self) -> None:
        reason = self.exchange.aborted
        if reason is not None:
            raise MockAborted(reason)

    def heard(self) -> None:
        """Bytes went out: the silence the read timeout measures starts again."""
        self._silent_since = time.monotonic()

    def close(self) -> None:
        self._woken.set()

    def play(self, step: Step, *, after_headers: bool) -> None:
        self.check()
        if isinstance(step, Pause):
            self._wait(step.seconds, after_headers)
        elif isinstance(step, Stall):
            self._wait(None, after_headers)
        elif isinstance(step, TimedOut):
            if self.read_timeout is None:
                self._wait(None, after_headers)
            raise self._timeout(after_headers)
        elif isinstance(step, Cut):
            reset = ConnectionResetError(104, "Connection reset by peer")
            if not after_headers:
                raise reset
            # What urllib3 raises for a reset while reading a body.
            raise u3.ProtocolError(f"Connection broken: {reset!r}", reset) from reset
        else:
            raise step.error

    def _wait(self, seconds: float | None, after_headers: bool) -> None:
        """Stay silent for `seconds` (None: forever) unless aborted or timed out."""
        now = time.monotonic()
        end = None if seconds is None else now + seconds
        expiry = None if self.read_timeout is None else self._silent_since + self.read_timeout
        times_out = expiry is not None and (end is None or end > expiry)
        until = expiry if times_out else end
        if until is None:
            self._woken.wait()
        elif until > now:
            self._woken.wait(until - now)
        self.check()
        if self._woken.is_set():  # closed under the reader
            raise MockAborted("closed")
        if times_out:
            raise self._timeout(after_headers)

    def _timeout(self, after_headers: bool) -> Exception:
        """What the requests transport raises when the socket read times out."""
        inner = u3.ReadTimeoutError(
            None,  # type: ignore[arg-type]
            self.url,
            f"Read timed out. (read timeout={self.read_timeout})",
        )
        if after_headers:
            return inner  # urllib3's, unwrapped: body reads bypass requests
        return rq.ReadTimeout(inner)


class _MockResponse(TransportResponse):
    def __init__(self, answer: MockResponse, line: _Line) -> None:
        self.status_code = answer.status
        self.headers = CaseInsensitiveDict(answer.headers or {})
        self._answer = answer
        self._line = line
        self._started = False

    def iter_bytes(self, limit: int | None = None) -> Iterator[bytes]:
        return bounded(self._body(), limit)

    def _body(self) -> Iterator[bytes]:
        if self._started:  # a body is read once, as on a socket
            self._line.check()
            return
        self._started = True
        self._line.heard()
        for piece in self._answer.pieces:
            self._line.check()
            if isinstance(piece, bytes):
                self._line.heard()
                yield piece
            else:
                self._line.play(piece, after_headers=True)
        self._line.check()

    def close(self) -> None:
        self._line.close()
