"""A request's head as the proxy's server reads it: the request line and its header fields.

The rules are `http.server`'s (its statuses and messages), minus its email
parser (see `llmchat.transport.header_fields`), and a little stricter, as
RFC 9112 allows a server to be: a head line that is not a plain
``Name: value`` field (an obsolete folded continuation, no colon, a space
before the colon) is a 400 rather than a field the email parser silently
merges, splits or drops — a request smuggled past a front proxy that read
the head differently starts exactly there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ...transport.header_fields import FieldsTooLarge, read_fields

__all__ = ["BadHead", "RequestHeaders", "read_request_headers", "request_line"]

_VERSION = re.compile(r"HTTP/([0-9]{1,10})\.[0-9]{1,10}")  # as http.server bounds it
# RFC 9112 §3: method SP request-target SP HTTP-version, one SP each; the method
# a token (RFC 9110 §5.6.2), the target visible ASCII (a URI has nothing else).
# `str.split()` would also split on VT, FS, NEL, NBSP: a front proxy that does
# not would read another request line out of the same bytes.
_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(r"[!-~]+")


class BadHead(ValueError):
    """The head cannot be served: answer `status` with this message and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RequestHeaders:
    """A request's header fields in order, looked up by name in any case.

    The subset of `email.message.Message` the server and WSGI use: `get`
    (the first value), `get_all` (every value, or `None`), `keys`, `items`.
    """

    __slots__ = ("_fields", "_index")

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields
        self._index: dict[str, list[str]] = {}
        for name, value in fields:
            self._index.setdefault(name.lower(), []).append(value)

    def get(self, name: str, default: Any = None) -> Any:
        values = self._index.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str] | None:
        values = self._index.get(name.lower())
        return list(values) if values else None

    def keys(self) -> list[str]:
        return [name for name, _ in self._fields]

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def __getitem__(self, name: str) -> str | None:
        values = self._index.get(name.lower())
        return values[0] if values else None  # as email's Message: a missing name is None

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"<RequestHeaders {len(self._fields)} fields>"  # values may hold credentials


_QUERY_KEY = re.compile(r"([?&])(key|%6[bB]ey|k%65y|ke%79)=[^&#\s]*")
_KEY_SHOWN = r"\1key=REDACTED"


def loggable_line(text: str) -> str:
    """`text` (a request line or target) with a ``key`` query parameter's value replaced.

    Gemini's clients may send their API key as ``?key=``; the access line and
    every error line that quotes the request line show this instead.
    """
    return _QUERY_KEY.sub(_KEY_SHOWN, text) if "=" in text else text


def request_line(text: str) -> tuple[str, str, str]:
    """``(method, target, version)`` of a request line (its line end removed).

    Raises `BadHead` with `http.server`'s statuses: 400 for a malformed line
    or version and for HTTP/0.9, 505 for HTTP/2 and later.
    """
    words = text.split(" ")
    if len(words) == 2 and all(_TARGET.fullmatch(word) for word in words):
        raise BadHead(400, "HTTP/0.9 requests are not supported")
    if len(words) != 3 or not _METHOD.fullmatch(words[0]) or not _TARGET.fullmatch(words[1]):
        raise BadHead(400, f"Bad request syntax ({loggable_line(text)[:100]!r})")
    method, target, version = words
    number = _VERSION.fullmatch(version)
    if number is None:
        raise BadHead(400, f"Bad request version ({loggable_line(version)!r})")
    if int(number[1]) >= 2:
        raise BadHead(505, f"Invalid HTTP version ({version[5:]})")
    if target.startswith("//"):
        target = "/" + target.lstrip("/")  # not a scheme-relative URL (as http.server, gh-87389)
    return method, target, version


def read_request_headers(rfile: Any) -> RequestHeaders:
    """The header fields after a request line, read up to the blank line.

    Raises `BadHead`: 431 for a line too long or too many fields (as
    `http.server`), 400 for a line that is not a plain field.
    """
    try:
        _, fields = read_fields(rfile)
    except FieldsTooLarge as exc:
        raise BadHead(431, "Line too long" if exc.line else "Too many headers") from None
    if fields is None:
        raise BadHead(400, "Malformed header line")
    return RequestHeaders(fields)
