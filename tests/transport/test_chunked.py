"""transport.chunked: a chunked body's read hands over every chunk already received.

Over real sockets: an `http.client` response on a socket pair (the test
writes the exact bytes, so what is buffered at each read is known), and the
whole transport against a raw keep-alive server. The bytes, the exceptions
and the connection's fate stay `http.client`'s and urllib3's.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from urllib3 import exceptions as u3

from llmchat.testing import Reply, ScriptedServer, Step, WaitFor, Write
from llmchat.transport import BodyTooLarge, RequestsTransport
from llmchat.transport.chunked import chunked_read1

from .support import WAIT, open_post

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
FRAMES = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]
# Chunks with an extension, a size in capitals, a trailer: what http.client takes.
BODY = (
    b"b;name=value\r\ndata: one\n\n\r\n"
    b"B\r\ndata: two\n\n\r\n"
    b"d\r\ndata: three\n\n\r\n"
    b"0\r\nX-Trailer: yes\r\n\r\n"
)
DATA = b"".join(FRAMES)
CUT = b""
"""The end of a `RawServer` body that closes the connection after it."""


def _data_before(cut: int) -> bytes:
    """The chunk data among BODY's first `cut` bytes (BODY's layout, worked out by hand)."""
    out, pos = b"", 0
    while True:
        newline = BODY.index(b"\n", pos)
        size = int(BODY[pos:newline].split(b";")[0], 16)
        if size == 0:
            return out
        start = newline + 1
        out += BODY[start : min(start + size, cut)] if cut > start else b""
        pos = start + size + 2


# -- an http.client response on a socket pair ------------------------------------------


class Pair:
    """`http.client.HTTPResponse` reading one end of a socket pair; the test writes the other."""

    def __init__(self) -> None:
        self.server, client = socket.socketpair()
        self.server.sendall(HEAD)
        self.response = http.client.HTTPResponse(client)
        client.close()  # the response's file keeps the socket open
        self.response.begin()

    def send(self, data: bytes) -> None:
        self.server.sendall(data)

    def end(self) -> None:
        self.server.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.server.close()
        self.response.close()


@pytest.fixture
def pair() -> Iterator[Pair]:
    made = Pair()
    yield made
    made.close()


def _read1(response: http.client.HTTPResponse) -> Callable[[int], bytes]:
    read = chunked_read1(response)
    assert read is not None
    return read


def _to_end(read: Callable[[int], bytes]) -> tuple[list[bytes], type[Exception] | None]:
    pieces: list[bytes] = []
    try:
        while data := read(65536):
            pieces.append(data)
    except Exception as exc:
        return pieces, type(exc)
    return pieces, None


def test_one_read_hands_over_every_chunk_received(pair: Pair) -> None:
    pair.send(BODY)
    read = _read1(pair.response)
    assert read(65536) == DATA  # three chunks, one read
    assert read(65536) == b""  # the last chunk and its trailer, then the end
    assert pair.response.isclosed()  # http.client's own end: its file closed


@pytest.mark.parametrize("cut", range(1, len(BODY)))
def test_a_body_split_at_any_byte_reads_the_same(pair: Pair, cut: int) -> None:
    # Every split point: in a size line, an extension, a chunk's data, its CRLF, the trailer.
    read = _read1(pair.response)
    pair.send(BODY[:cut])
    early = _data_before(cut)
    if early:  # what arrived is handed over in one read, without waiting for the rest
        assert read(65536) == early
    pair.send(BODY[cut:])
    pieces, error = _to_end(read)
    assert (early + b"".join(pieces), error) == (DATA, None)
    assert pair.response.isclosed() and pair.response.chunk_left is None


def test_a_read_stops_at_what_is_buffered_mid_chunk_and_goes_on(pair: Pair) -> None:
    read = _read1(pair.response)
    pair.send(b"14\r\n0123456789")
    assert read(65536) == b"0123456789"
    assert pair.response.chunk_left == 10  # http.client's state: another reader may go on
    pair.send(b"abcdefghij\r\n3\r\nxyz\r\n0\r\n\r\n")
    assert pair.response.read1(65536) == b"abcdefghij"  # http.client's own read1 goes on
    assert _to_end(read) == ([b"xyz"], None)


def test_a_long_chunk_is_read_by_http_client_up_to_the_read_size(pair: Pair) -> None:
    big = bytes(range(256)) * 200  # past the socket file's buffer
    pair.send(b"%x\r\n" % len(big) + big + b"\r\n0\r\n\r\n")
    pieces, error = _to_end(_read1(pair.response))
    assert (b"".join(pieces), error) == (big, None)
    assert all(len(piece) <= 65536 for piece in pieces)


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\nhello\r\n0\r\n\r\n",  # a size that is no number
        b"5\r\nhello3\r\nabc\r\n0\r\n\r\n",  # no CRLF after the data
        b"5\r\nhelloXX3\r\nabc\r\n0\r\n\r\n",  # two other bytes: tossed, as http.client does
        b"5\r\nhello\r\n-3\r\nabc\r\n0\r\n\r\n",  # a negative size
        b"5\r\nhel",  # cut mid-chunk
        b"5\r\nhello\r\n",  # cut before the last chunk
        b"5\r\nhello\r\n3",  # cut mid size line
        b"5\r\nhello\r",  # cut in the CRLF
        b"5\r\nhello\r\n0\r\n",  # the trailer's blank line never came: http.client allows it
        b"5\r\nhello\r\n" + b"1" * 70000 + b"\r\n",  # a size line too long
        b"5\r\nhello\r\n0\r\nX: " + b"y" * 70000 + b"\r\n\r\n",  # a trailer line too long
    ],
    ids=[
        "bad-size",
        "missing-crlf",
        "other-crlf",
        "negative",
        "cut-mid-chunk",
        "cut-before-last",
        "cut-in-size",
        "cut-in-crlf",
        "no-trailer-end",
        "long-size-line",
        "long-trailer",
    ],
)
def test_bad_framing_ends_as_http_client_ends_it(body: bytes) -> None:
    outcomes = []
    for reader in (chunked_read1, lambda response: response.read1):
        pair = Pair()
        pair.send(body)
        pair.end()
        read = reader(pair.response)
        assert read is not None
        pieces, error = _to_end(read)
        outcomes.append((b"".join(pieces), error, pair.response.isclosed()))
        pair.close()
    assert outcomes[0] == outcomes[1]


def test_only_a_chunked_body_from_a_socket_file_is_read_so() -> None:
    server, client = socket.socketpair()
    with server, client:
        server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        response = http.client.HTTPResponse(client)
        response.begin()
        assert chunked_read1(response) is None
        response.close()


# -- the whole transport, against a raw keep-alive server ------------------------------


class RawServer:
    """Answers each request with the next of `bodies`, raw, after HEAD, on keep-alive connections.

    A body is a list of sends; after each but the last the server waits for
    `gate` (set by the test when it has read what came), so a read cannot see
    the next send early. A body ending in `CUT` closes the connection after it.
    `connections` numbers the connection of each request.
    """

    def __init__(self, bodies: list[list[bytes]]) -> None:
        self.bodies = bodies
        self.connections: list[int] = []
        self.gate = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        served, connection = 0, 0
        while served < len(self.bodies):
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with sock, sock.makefile("rb") as requests:
                while served < len(self.bodies) and _read_request(requests):
                    self.connections.append(connection)
                    sends = self.bodies[served]
                    served += 1
                    sock.sendall(HEAD)
                    if sends[-1:] == [CUT]:
                        sock.sendall(b"".join(sends))
                        break
                    for index, data in enumerate(sends):
                        sock.sendall(data)
                        if index < len(sends) - 1 and self.gate.wait(WAIT):
                            self.gate.clear()
            connection += 1

    def close(self) -> None:
        self.listener.close()
        self.thread.join(WAIT)


def _read_request(requests: Any) -> bool:
    length = 0
    while (line := requests.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if not line:
        return False
    requests.read(length)
    return True


@pytest.mark.parametrize("cut", range(1, len(BODY), 3))
def test_a_split_body_through_the_transport_and_the_connection_kept(
    transport: RequestsTransport, cut: int
) -> None:
    server = RawServer([[BODY[:cut], BODY[cut:]], [BODY]])
    try:
        http = open_post(transport, server.url)
        pieces = http.iter_bytes()
        early = _data_before(cut)
        got = b""
        if early:  # the first send's data comes before the second send leaves
            got = next(pieces)
            assert got and early.startswith(got)
        server.gate.set()
        got += b"".join(pieces)
        http.close()
        assert got == DATA
        http = open_post(transport, server.url)  # the same connection, after the trailer
        assert http.read() == DATA
        http.close()
        assert server.connections == [0, 0]
    finally:
        server.close()


@pytest.mark.parametrize(
    ("body", "before"),
    [
        (b"5\r\nhello\r\nzz\r\nabc\r\n0\r\n\r\n", b"hello"),  # a bad size line
        (b"5\r\nhello\r\n3\r\nab", b"helloab"),  # cut mid-chunk
        (b"5\r\nhello\r\n", b"hello"),  # cut before the last chunk
    ],
    ids=["bad-size", "cut-mid-chunk", "cut-before-last"],
)
def test_bad_framing_raises_urllib3s_error_and_drops_the_connection(
    transport: RequestsTransport, body: bytes, before: bytes
) -> None:
    server = RawServer([[body, CUT], [BODY]])
    try:
        http = open_post(transport, server.url)
        got = b""
        with pytest.raises(u3.ProtocolError, match="IncompleteRead"):
            for data in http.iter_bytes():
                got += data
        http.close()
        assert got == before
        http = open_post(transport, server.url)
        assert http.read() == DATA
        http.close()
        assert server.connections == [0, 1]  # the broken one was not pooled
    finally:
        server.close()


def _all_sent(frames: list[bytes]) -> tuple[ScriptedServer, threading.Event]:
    """A server that sends `frames` (one chunk each) once `go` is set, after the headers."""
    go = threading.Event()
    steps: list[Step] = [WaitFor(go, WAIT), *(Write(f) for f in frames)]
    return ScriptedServer(
        Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=steps)
    ), go


def test_frames_sent_before_the_read_come_in_one_read(transport: RequestsTransport) -> None:
    server, go = _all_sent(FRAMES)
    with server as url:
        http = open_post(transport, url)
        go.set()
        assert server.requests[0].finished.wait(WAIT)  # every chunk and the last one sent
        assert list(http.iter_bytes()) == [DATA]  # one read: three chunks
        http.close()


@pytest.mark.parametrize("limit", [5, len(FRAMES[0]), len(FRAMES[0]) + 3])
def test_a_limit_inside_one_read_keeps_what_fits(transport: RequestsTransport, limit: int) -> None:
    server, go = _all_sent(FRAMES)
    with server as url:
        http = open_post(transport, url)
        go.set()
        assert server.requests[0].finished.wait(WAIT)
        got: list[bytes] = []
        with pytest.raises(BodyTooLarge):
            got.extend(http.iter_bytes(limit))
        http.close()
        assert got == [DATA[:limit]]
