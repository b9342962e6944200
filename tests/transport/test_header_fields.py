"""The lean head readers: `LeanResponse` against http.client's own, and the proxy's request head."""

from __future__ import annotations

import http.client
import io
from typing import Any

import pytest

from llmchat.proxy.server.request_head import BadHead, read_request_headers, request_line
from llmchat.transport.header_fields import MAX_FIELDS, MAX_LINE, read_fields
from llmchat.transport.response_head import LeanResponse


class _Sock:
    """What `HTTPResponse` needs of a socket: `makefile` over fixed bytes."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self._data))


def _wire(status: str, *fields: str, body: bytes = b"", end: bytes = b"\r\n") -> bytes:
    """A response's bytes: the status line and each field on its own line, then `body`."""
    head = "".join(f"{line}\r\n" for line in (status, *fields)).encode("latin-1")
    return head + end + body


OK = "HTTP/1.1 200 OK"
EMPTY = "Content-Length: 0"
RESPONSES = {
    "plain": _wire(OK, "Content-Type: application/json", "Content-Length: 2", body=b"{}"),
    "chunked": _wire(OK, "Transfer-Encoding: chunked", body=b"2\r\nhi\r\n0\r\n\r\n"),
    "chunked upper": _wire(OK, "Transfer-Encoding: CHUNKED", body=b"1\r\nx\r\n0\r\n\r\n"),
    "close delimited": _wire(OK, "Content-Type: text/event-stream", body=b"data: 1\n\n"),
    "connection close": _wire(OK, "Connection: close", "Content-Length: 1", body=b"x"),
    "http/1.0": _wire("HTTP/1.0 200 OK", "Content-Length: 1", body=b"x"),
    "http/1.0 keep-alive": _wire(
        "HTTP/1.0 200 OK", "Connection: Keep-Alive", "Content-Length: 1", body=b"x"
    ),
    "http/1.0 keep-alive field": _wire("HTTP/1.0 200 OK", "Keep-Alive: timeout=5", body=b"x"),
    "100 first": _wire("HTTP/1.1 100 Continue", "X-A: 1", body=_wire("HTTP/1.1 201 OK", EMPTY)),
    "204": _wire("HTTP/1.1 204 No Content", "Content-Length: 10"),
    "304": _wire("HTTP/1.1 304 Not Modified"),
    "negative length": _wire(OK, "Content-Length: -5", body=b"abc"),
    "bad length": _wire(OK, "Content-Length: x", body=b"abc"),
    "length and chunked": _wire(
        OK, "Content-Length: 99", "Transfer-Encoding: chunked", body=b"0\r\n\r\n"
    ),
    "repeated fields": _wire(OK, "Set-Cookie: a=1", "set-cookie: b=2", EMPTY),
    "spaces around value": _wire(OK, "X-A:   spaced  ", "X-B:\tt", EMPTY),
    "empty value": _wire(OK, "X-Empty:", EMPTY),
    "bare newlines": b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
    "no reason": _wire("HTTP/1.1 200", EMPTY),
    "latin-1 value": _wire(OK, "X-Name: caf\xe9", EMPTY),
    "folded (email fallback)": _wire(OK, "X-Long: one", " two", EMPTY),
    "no colon (email fallback)": _wire(OK, "not a field", EMPTY),
    "space before colon (email fallback)": _wire(OK, "X-A : 1", EMPTY),
    "stray CR (email fallback)": _wire(OK, "X-A: 1\r2", EMPTY),
    "ends inside the head": _wire(OK, EMPTY, end=b""),
}


def _begun(cls: type[http.client.HTTPResponse], data: bytes, method: str = "GET") -> Any:
    response = cls(_Sock(data), method=method)  # type: ignore[arg-type]
    response.begin()
    return response


def _state(response: Any) -> dict[str, Any]:
    return {
        "status": response.status,
        "reason": response.reason,
        "version": response.version,
        "items": response.headers.items(),
        "as string": response.headers.as_string(),
        "chunked": response.chunked,
        "chunk_left": getattr(response, "chunk_left", None),
        "length": response.length,
        "will_close": response.will_close,
        "body": response.read(),
    }


@pytest.mark.parametrize("name", list(RESPONSES))
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_lean_response_reads_every_head_as_http_client_does(name: str, method: str) -> None:
    data = RESPONSES[name]
    assert _state(_begun(LeanResponse, data, method)) == _state(
        _begun(http.client.HTTPResponse, data, method)
    )


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", http.client.RemoteDisconnected),
        (b"SPDY/3 200 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 2000 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/2.0 200 OK\r\n\r\n", http.client.UnknownProtocol),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_LINE + b"\r\n\r\n", http.client.LineTooLong),
        (
            b"HTTP/1.1 200 OK\r\n" + b"X: 1\r\n" * (MAX_FIELDS + 1) + b"\r\n",
            http.client.HTTPException,
        ),
    ],
)
def test_lean_response_refuses_what_http_client_refuses(data: bytes, error: type) -> None:
    for cls in (http.client.HTTPResponse, LeanResponse):
        with pytest.raises(error) as raised:
            _begun(cls, data)
        assert type(raised.value) is error, cls


def test_read_fields_says_which_heads_are_plain() -> None:
    lines, fields = read_fields(io.BytesIO(b"A: 1\r\nB:2 \r\n\r\nbody"))
    assert lines == [b"A: 1\r\n", b"B:2 \r\n", b"\r\n"]
    assert fields == [("A", "1"), ("B", "2 ")]  # trailing blanks kept, as the email parser does
    for odd in (b" folded\r\n", b"no colon\r\n", b"A : 1\r\n", b"A: 1\r2\r\n", b": empty name\r\n"):
        _, fields = read_fields(io.BytesIO(b"A: 1\r\n" + odd + b"\r\n"))
        assert fields is None, odd


# -- the proxy's request head -------------------------------------------------


def test_request_headers_look_up_in_any_case_and_keep_every_value() -> None:
    head = read_request_headers(
        io.BytesIO(b"Host: x\r\nX-Many: 1\r\nx-many: 2\r\nContent-Type: a/b\r\n\r\n")
    )
    assert head.get("content-type") == "a/b" and head["CONTENT-TYPE"] == "a/b"
    assert head.get_all("X-MANY") == ["1", "2"]
    assert head.get("missing", "d") == "d" and head.get_all("missing") is None
    assert head["missing"] is None and "host" in head and "missing" not in head
    assert head.keys() == ["Host", "X-Many", "x-many", "Content-Type"] == list(head)
    assert len(head) == 4
    assert "a/b" not in repr(head)  # a repr never shows values (they may be credentials)


@pytest.mark.parametrize(
    ("head", "status", "message"),
    [
        (b"X: 1\r\n folded\r\n\r\n", 400, "Malformed header line"),
        (b"no colon here\r\n\r\n", 400, "Malformed header line"),
        (b"Host : x\r\n\r\n", 400, "Malformed header line"),
        (b"X: " + b"a" * MAX_LINE + b"\r\n\r\n", 431, "Line too long"),
        (b"X: 1\r\n" * (MAX_FIELDS + 1) + b"\r\n", 431, "Too many headers"),
    ],
)
def test_bad_request_heads_get_http_server_statuses(head: bytes, status: int, message: str) -> None:
    with pytest.raises(BadHead) as raised:
        read_request_headers(io.BytesIO(head))
    assert (raised.value.status, str(raised.value)) == (status, message)


def test_exactly_max_fields_are_read() -> None:
    head = b"X: 1\r\n" * MAX_FIELDS + b"\r\n"
    assert len(read_request_headers(io.BytesIO(head))) == MAX_FIELDS


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("POST /v1/chat/completions HTTP/1.1", ("POST", "/v1/chat/completions", "HTTP/1.1")),
        ("GET //evil.example/x HTTP/1.0", ("GET", "/evil.example/x", "HTTP/1.0")),
    ],
)
def test_request_lines(line: str, expected: tuple[str, str, str]) -> None:
    assert request_line(line) == expected


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("GET /", 400),  # HTTP/0.9
        ("GET", 400),
        ("GET /  HTTP/1.1", 400),  # one SP between the parts (RFC 9112 §3)
        ("GET\x0b/ HTTP/1.1", 400),
        ("GET / HTTP/1.1 extra", 400),
        ("GET / FTP/1.1", 400),
        ("GET / HTTP/1", 400),
        ("GET / HTTP/1.x", 400),
        ("GET / HTTP/1.\u00b2", 400),
        ("GET / HTTP/12345678901.1", 400),
        ("GET / HTTP/2.0", 505),
        ("GET / HTTP/3.0", 505),
    ],
)
def test_bad_request_lines(line: str, status: int) -> None:
    with pytest.raises(BadHead) as raised:
        request_line(line)
    assert raised.value.status == status
