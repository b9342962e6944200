"""What the loopback server's tests share: raw-socket reads and the parsers of what came back."""

from __future__ import annotations

import socket

from llmchat.testing import (
    RecordedRequest,
    ScriptedServer,
)

GET_CLOSE = b"GET /v1/models HTTP/1.1\r\nHost: loopback\r\nConnection: close\r\n\r\n"
GET_KEEP = b"GET /v1/models HTTP/1.1\r\nHost: loopback\r\n\r\n"


def connect(server: ScriptedServer) -> socket.socket:
    # The timeout only stops a broken test from hanging; no assertion relies on it.
    return socket.create_connection((server.host, server.port), timeout=5)


def read_to_eof(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = bytearray()
    while marker not in data:
        chunk = sock.recv(65536)
        assert chunk, f"EOF before {marker!r}; got {bytes(data)!r}"
        data += chunk
    return bytes(data)


def split_response(data: bytes) -> tuple[str, dict[str, str], bytes]:
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, f"no header block in {data!r}"
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    return status, headers, body


def chunk_payloads(body: bytes) -> list[bytes]:
    """Split a chunked body into its chunks' data; requires the last chunk to be there."""
    payloads = []
    while True:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert body == b"\r\n", "no CRLF after the last chunk"
            return payloads
        payloads.append(body[:size])
        assert body[size : size + 2] == b"\r\n"
        body = body[size + 2 :]


def sse_data(body: bytes) -> list[str]:
    """The `data:` payloads of a well-terminated SSE body, in order."""
    frames = body.decode("utf-8").split("\n\n")
    assert frames[-1] == "", "the stream does not end with a blank line"
    return [frame.removeprefix("data: ") for frame in frames[:-1]]


def only_request(server: ScriptedServer) -> RecordedRequest:
    (record,) = server.requests
    assert record.finished.wait(2)
    return record
