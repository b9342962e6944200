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
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeAlias

from requests import exceptions as rq
from requests.structures import CaseInsensitiveDict
from urllib3 import exceptions as u3

from ..errors import InvalidTypeError
from .base import Transport, TransportResponse, bounded
from .exchange import Exchange
from .mock_script import (
    Cut,
    MockAborted,
    MockRequest,
    MockResponse,
    Pause,
    Raise,
    Stall,
    Step,
    TimedOut,
)

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
