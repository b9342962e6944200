"""HTTP/1.1 bytes: a push parser for requests and the framing of replies.

Nothing here touches a socket; the connection feeds received bytes in and
sends what comes out, so framing is testable on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final, TypeAlias

from .headers import Headers

__all__ = ["BadRequest", "ParsedRequest", "RequestParser", "encode_chunk", "status_line"]

MAX_HEAD_BYTES: Final = 65536
LAST_CHUNK: Final = b"0\r\n\r\n"

# RFC 9112 §2.2: a recipient MAY accept a bare LF as a line terminator, which
# helps people who type requests into a raw socket by hand.
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_LINE_END = re.compile(rb"\r?\n")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_REQUEST_LINE = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) (HTTP/\d\.\d)")


Buffer: TypeAlias = bytes | bytearray


class BadRequest(ValueError):
    """The bytes received are not an HTTP/1.1 request; the server answers 400 and closes."""


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """One complete request: its parts and the exact bytes it arrived as."""

    method: str
    target: str
    version: str
    headers: Headers
    body: bytes
    raw: bytes

    @property
    def keep_alive(self) -> bool:
        """Whether the client lets the connection carry another request (RFC 9112 §9.3)."""
        tokens = self.headers.tokens("Connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


class RequestParser:
    """Push parser: `feed(bytes)` returns the requests those bytes completed.

    Bytes that do not finish a request yet are kept for the next `feed`, so a
    request split across any number of reads, or several pipelined requests
    in one read, come out the same. Malformed input raises `BadRequest`.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        # How long the buffer must be before parsing again is worth it: a big
        # Content-Length body is then parsed once, not once per read.
        self._need = 0

    def feed(self, data: bytes) -> list[ParsedRequest]:
        """Add received bytes; return every request they complete, in order."""
        self._buffer += data
        done: list[ParsedRequest] = []
        while len(self._buffer) >= self._need:
            found = _parse_one(self._buffer)
            if isinstance(found, int):
                self._need = found
                break
            request, used = found
            del self._buffer[:used]
            self._need = 0
            done.append(request)
        return done

    @property
    def pending(self) -> bool:
        """Whether part of a request has arrived but not all of it."""
        return bool(self._buffer)


def _parse_one(buffer: Buffer) -> tuple[ParsedRequest, int] | int:
    """Return `(request, bytes used)`, or the buffer length needed before trying again."""
    # Empty lines before a request line are skipped (RFC 9112 §2.2); some
    # clients send a stray CRLF after a body.
    start = 0
    while start < len(buffer) and buffer[start] in b"\r\n":
        start += 1
    end = _HEAD_END.search(buffer, start)
    if end is None:
        if len(buffer) - start > MAX_HEAD_BYTES:
            raise BadRequest(f"request head longer than {MAX_HEAD_BYTES} bytes")
        return len(buffer) + 1
    method, target, version, headers = _parse_head(buffer[start : end.start()])
    found = _body_span(buffer, end.end(), headers)
    if isinstance(found, int):
        return found
    body, used = found
    raw = bytes(buffer[start:used])
    return ParsedRequest(method, target, version, headers, body, raw), used


def _parse_head(head: bytes | bytearray) -> tuple[str, str, str, Headers]:
    # Field values are octets (RFC 9110 §5.5); latin-1 maps each to one character.
    lines = [line.decode("latin-1") for line in _LINE_END.split(head)]
    request_line = _REQUEST_LINE.fullmatch(lines[0])
    if request_line is None:
        raise BadRequest(f"malformed request line {lines[0]!r}")
    fields = [_parse_field(line) for line in lines[1:]]
    method, target, version = request_line.groups()
    return method, target, version, Headers(fields)


def _parse_field(line: str) -> tuple[str, str]:
    name, colon, value = line.partition(":")
    # No obs-fold and no space before the colon (RFC 9112 §5.1, §5.2).
    if not colon or not _TOKEN.fullmatch(name):
        raise BadRequest(f"malformed header line {line!r}")
    return name, value.strip(" \t")


def _body_span(buffer: Buffer, start: int, headers: Headers) -> tuple[bytes, int] | int:
    """Return `(body, end offset)` once the whole body has arrived, else the length needed."""
    codings = [token.strip().lower() for token in headers.get("Transfer-Encoding", "").split(",")]
    if "transfer-encoding" in headers:
        # RFC 9112 §6.3: Transfer-Encoding overrides Content-Length, and a
        # request whose final coding is not chunked cannot be delimited.
        if codings[-1] != "chunked":
            raise BadRequest(f"unsupported Transfer-Encoding {headers['Transfer-Encoding']!r}")
        return _chunked_span(buffer, start)
    length = _content_length(headers)
    if len(buffer) < start + length:
        return start + length
    return bytes(buffer[start : start + length]), start + length


def _content_length(headers: Headers) -> int:
    values = {value.strip() for value in headers.get_all("Content-Length")}
    if not values:
        return 0
    # RFC 9112 §6.3: repeated identical values are one length; differing ones are an error.
    if len(values) != 1 or not next(iter(values)).isdigit():
        raise BadRequest(f"invalid Content-Length {headers['Content-Length']!r}")
    return int(values.pop())


def _chunked_span(buffer: Buffer, pos: int) -> tuple[bytes, int] | int:
    # Only offsets are collected until the last chunk is in: an unfinished
    # body is re-scanned on each read, and that must stay cheap.
    spans: list[tuple[int, int]] = []
    while True:
        line = _LINE_END.search(buffer, pos)
        if line is None:
            return len(buffer) + 1
        size = _chunk_size(buffer[pos : line.start()])
        pos = line.end()
        if size == 0:
            return _after_trailers(buffer, pos, b"".join(buffer[a:b] for a, b in spans))
        if len(buffer) < pos + size + 2:
            return pos + size + 2
        spans.append((pos, pos + size))
        crlf = _LINE_END.match(buffer, pos + size)
        if crlf is None:
            raise BadRequest("chunk data not followed by CRLF")
        pos = crlf.end()


def _chunk_size(line: bytes | bytearray) -> int:
    digits = line.split(b";", 1)[0].strip()  # chunk extensions are ignored (RFC 9112 §7.1.1)
    try:
        return int(digits, 16)
    except ValueError:
        raise BadRequest(f"malformed chunk size line {line!r}") from None


def _after_trailers(buffer: Buffer, pos: int, body: bytes) -> tuple[bytes, int] | int:
    # The trailer section ends at an empty line; its fields are read past, not kept.
    while True:
        line = _LINE_END.search(buffer, pos)
        if line is None:
            return len(buffer) + 1
        empty = line.start() == pos
        pos = line.end()
        if empty:
            return body, pos


def status_line(status: int, reason: str | None) -> bytes:
    """Return `HTTP/1.1 <status> <reason>\\r\\n`, with the standard reason by default."""
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""  # an empty reason phrase is valid (RFC 9112 §4)
    return f"HTTP/1.1 {status} {reason}\r\n".encode()


def encode_chunk(data: bytes) -> bytes:
    """Return `data` as one HTTP/1.1 chunk: hex size, CRLF, data, CRLF (RFC 9112 §7.1)."""
    return b"%x\r\n%s\r\n" % (len(data), data)
