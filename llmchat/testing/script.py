"""What the server does for one request: a `Reply` and the steps it plays.

A reply is data, not code: frozen, so one `Reply` can answer any number of
requests, and a test reads as the exact bytes and timing it scripts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, TypeAlias

from .compress import ContentEncoding, compress_writes

__all__ = [
    "Drop",
    "Framing",
    "Pause",
    "Pings",
    "Reply",
    "ScriptError",
    "Stall",
    "Step",
    "WaitFor",
    "Write",
]

Framing: TypeAlias = Literal["length", "chunked", "close"]
HeadersLike: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]]

_FRAMINGS = ("length", "chunked", "close")


class ScriptError(Exception):
    """A server-side failure: the script raised or returned a non-`Reply`, or a thread failed.

    The client got a 500 where it could; `ScriptedServer.errors` keeps each
    cause, and leaving the `with` block raises this (from the first cause) so a
    broken script cannot pass silently.
    """


def _utf8(data: bytes | str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes or str, got {type(data).__name__}")


@dataclass(frozen=True, slots=True)
class Write:
    """Send `data` (a `str` is sent as UTF-8) in one write.

    With chunked framing one `Write` is one HTTP chunk; an empty `Write` sends
    nothing, because an empty chunk would end the body.
    """

    data: bytes

    def __init__(self, data: bytes | str) -> None:
        object.__setattr__(self, "data", _utf8(data))


@dataclass(frozen=True, slots=True)
class Pause:
    """Send nothing for `seconds`, then go on.

    The pause ends early, and the reply is abandoned, when the client
    disconnects or the server stops; it is never a bare sleep.
    """

    seconds: float

    def __post_init__(self) -> None:
        if not self.seconds >= 0:
            raise ValueError(f"Pause(seconds) must be >= 0, got {self.seconds!r}")


@dataclass(frozen=True, slots=True)
class Stall:
    """Send nothing more; keep the connection open until the client leaves or the server stops."""


@dataclass(frozen=True, slots=True)
class Pings:
    """Send `data` (an SSE comment) every `every` seconds, for ever: a server that can no
    longer answer but keeps the stream alive (llama-server after SIGTERM pings every 30 s).

    Like `Stall`, it ends only when the client leaves or the server stops.
    """

    every: float
    data: bytes = b":\n\n"

    def __post_init__(self) -> None:
        if not self.every > 0:
            raise ValueError(f"Pings(every) must be > 0, got {self.every!r}")


@dataclass(frozen=True, slots=True)
class Drop:
    """Close the connection now, mid-reply; with `rst=True` as a TCP reset (`SO_LINGER` 0)."""

    rst: bool = False


@dataclass(frozen=True, slots=True)
class WaitFor:
    """Hold the reply until the test sets `event` (or `timeout` seconds pass), then go on.

    Like `Pause`, a client disconnect or the server stopping abandons the reply.
    """

    event: threading.Event = field(compare=False)
    timeout: float | None = None


Step: TypeAlias = Write | Pause | Stall | Pings | Drop | WaitFor


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply: status, headers, and a body as `body` or as `steps`.

    `body` (bytes, or str sent as UTF-8) is the simple case and is one `Write`.
    `steps` plays the body step by step; give one or the other. `before_headers`
    steps run after the request is read and before the status line (a `Pause`
    is a slow prefill, a `Stall` a black hole, a `Drop` a reset before any
    byte; a `Write` there goes out raw, unframed).

    `framing` says how the body is delimited. `"length"`: `Content-Length` is
    the sum of the `Write`s, so a `Drop` before the end leaves the body short.
    `"chunked"`: one chunk per `Write`, then the last chunk `0\\r\\n\\r\\n` unless
    the steps ended the connection. `"close"`: no length; the server closes the
    connection after the steps. Length and chunked replies keep the connection
    open for the next request unless the client asked to close it.

    Default headers are `Server: llmchat-testing` and `Content-Type:
    application/json`, plus the framing ones; a header given in `headers` (a
    mapping, or `(name, value)` pairs to repeat a name) replaces the default of
    the same name, framing headers included, so a reply can lie on purpose.

    `content_encoding` (``"gzip"``, ``"deflate"``, ``"br"``, ``"zstd"``) sends
    the body compressed, with that `Content-Encoding` header: each `Write` is
    compressed and flushed on its own, so a streamed reply still arrives write
    by write, and the compressed stream's end goes after the last step (never
    after a `Drop`). The steps are encoded once, here, so the reply stays
    frozen data; `Content-Length` counts the compressed bytes. br needs
    ``brotli`` and zstd ``backports.zstd`` (stdlib from Python 3.14). To send
    bytes that lie about their encoding, give the header in `headers` instead.
    """

    status: int = 200
    headers: HeadersLike | None = None
    body: bytes | str = b""
    _: KW_ONLY
    framing: Framing = "length"
    before_headers: Sequence[Step] = ()
    steps: Sequence[Step] | None = None
    reason: str | None = None
    content_encoding: ContentEncoding | None = None

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise TypeError(f"Reply(status) must be an int, got {self.status!r}")
        if not 100 <= self.status <= 999:
            raise ValueError(f"Reply(status) must be a three-digit code, got {self.status}")
        if self.framing not in _FRAMINGS:
            raise ValueError(f"Reply(framing) must be one of {_FRAMINGS}, got {self.framing!r}")
        if self.steps is not None and self.body:
            raise ValueError("give Reply either body= or steps=, not both")
        object.__setattr__(self, "body", _utf8(self.body))
        object.__setattr__(self, "headers", _header_pairs(self.headers))
        object.__setattr__(self, "before_headers", _checked_steps(self.before_headers))
        if self.steps is not None:
            object.__setattr__(self, "steps", _checked_steps(self.steps))
        encoded = None
        if self.content_encoding is not None:
            encoded = _encoded(self._plain_steps(), self.content_encoding)
        object.__setattr__(self, "_encoded_steps", encoded)

    def _plain_steps(self) -> tuple[Step, ...]:
        if self.steps is not None:
            return tuple(self.steps)
        return (Write(self.body),) if self.body else ()

    @property
    def body_steps(self) -> tuple[Step, ...]:
        """The body as steps: `steps` as given, or `body` as one `Write`; compressed if asked."""
        encoded: tuple[Step, ...] | None = getattr(self, "_encoded_steps", None)
        return encoded if encoded is not None else self._plain_steps()

    @property
    def header_pairs(self) -> tuple[tuple[str, str], ...]:
        """The headers given to the constructor, as `(name, value)` pairs."""
        return self.headers  # type: ignore[return-value]  # normalized in __post_init__

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, headers: HeadersLike | None = None, **kwargs: Any
    ) -> Reply:
        """Return a reply whose body is `obj` as compact UTF-8 JSON.

        Extra keyword arguments (`framing`, `before_headers`, ...) go to `Reply`.
        """
        return cls(status, headers, dumps(obj), **kwargs)

    @classmethod
    def text(
        cls,
        text: str,
        status: int = 200,
        content_type: str = "text/plain; charset=utf-8",
        headers: HeadersLike | None = None,
        **kwargs: Any,
    ) -> Reply:
        """Return a reply whose body is `text` in UTF-8, with the given `Content-Type`."""
        pairs = (("Content-Type", content_type), *_header_pairs(headers))
        return cls(status, pairs, text, **kwargs)

    @classmethod
    def error(cls, status: int, message: str, type: str = "server_error", **kwargs: Any) -> Reply:
        """Return an error reply shaped like llama.cpp's: `{"error": {code, message, type}}`."""
        return cls.json(
            {"error": {"code": status, "message": message, "type": type}}, status, **kwargs
        )

    @classmethod
    def sse(
        cls,
        events: Iterable[Mapping[str, Any] | str | bytes],
        *,
        delay: float = 0.0,
        framing: Framing = "chunked",
        done: bool = True,
        terminate_last: bool = True,
        status: int = 200,
        headers: HeadersLike | None = None,
        before_headers: Sequence[Step] = (),
        content_encoding: ContentEncoding | None = None,
    ) -> Reply:
        """Return a `text/event-stream` reply, one `Write` per event.

        A dict event is sent as `data: <compact json>\\n\\n`; a str or bytes
        event is a raw frame sent exactly as given. `data: [DONE]\\n\\n` follows
        when `done`. A `Pause(delay)` separates events when `delay` > 0. With
        `terminate_last=False` the last generated frame ends in one `\\n`, not a
        blank line, as KoboldCpp ends its streams (raw frames are never changed).
        """
        frames = [_sse_frame(event) for event in events]
        if done:
            frames.append((b"data: [DONE]\n\n", True))
        if not terminate_last and frames and frames[-1][1]:
            frames[-1] = (frames[-1][0][:-1], True)
        steps: list[Step] = []
        for data, _ in frames:
            if steps and delay > 0:
                steps.append(Pause(delay))
            steps.append(Write(data))
        pairs = (("Content-Type", "text/event-stream"), *_header_pairs(headers))
        return cls(
            status,
            pairs,
            framing=framing,
            steps=steps,
            before_headers=before_headers,
            content_encoding=content_encoding,
        )


def _encoded(steps: tuple[Step, ...], encoding: ContentEncoding) -> tuple[Step, ...]:
    """`steps` with every `Write` compressed and flushed, then the compressed stream's end."""
    writes = [step.data for step in steps if isinstance(step, Write)]
    compressed, end = compress_writes(writes, encoding)
    pieces = iter(compressed)
    out = [Write(next(pieces)) if isinstance(step, Write) else step for step in steps]
    return (*out, Write(end))


def _sse_frame(event: Mapping[str, Any] | str | bytes) -> tuple[bytes, bool]:
    """Return `(frame bytes, whether llmchat generated it)` for one `Reply.sse` event."""
    if isinstance(event, Mapping):
        return f"data: {dumps(event)}\n\n".encode(), True
    return _utf8(event), False


def dumps(obj: Any) -> str:
    """Return `obj` as compact JSON text with non-ASCII kept as is (sent as UTF-8)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _header_pairs(headers: HeadersLike | None) -> tuple[tuple[str, str], ...]:
    if headers is None:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    pairs = tuple((str(name), str(value)) for name, value in items)
    for name, value in pairs:
        if any(c in name + value for c in "\r\n") or not name:
            raise ValueError(f"header {name!r}: {value!r} would break the header block")
    return pairs


def _checked_steps(steps: Iterable[Step]) -> tuple[Step, ...]:
    checked = tuple(steps)
    for step in checked:
        if not isinstance(step, Step):
            raise TypeError(
                f"a reply step must be Write, Pause, Stall, Pings, Drop or WaitFor, got {step!r}"
            )
    return checked
