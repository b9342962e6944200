"""RequestsTransport's body reads: which bodies skip urllib3's per-read layers, and that the
bytes, the errors and the connection's release to the pool stay urllib3's."""

from __future__ import annotations

import threading

import pytest
from urllib3 import exceptions as u3

from llmchat.testing import Drop, Reply, ScriptedServer, Step, WaitFor, Write
from llmchat.transport import RequestsTransport, classify_exception
from llmchat.transport.requests_transport import _plain_body

from .support import WAIT, open_post

PIECES = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]
SSE = {"Content-Type": "text/event-stream"}


def _held(go: threading.Event) -> Reply:
    """PIECES as chunks, the rest held back until `go`: the first read gets the first piece only
    (a read hands over every chunk already received)."""
    steps: list[Step] = [Write(PIECES[0]), WaitFor(go, WAIT), *(Write(p) for p in PIECES[1:])]
    return Reply(200, SSE, framing="chunked", steps=steps)


@pytest.mark.parametrize(
    ("reply", "plain"),
    [
        (Reply(200, SSE, framing="chunked", steps=[Write(p) for p in PIECES]), True),
        (Reply(200, SSE, framing="close", steps=[Write(p) for p in PIECES]), True),
        (Reply(200, SSE, framing="length", steps=[Write(p) for p in PIECES]), False),
        (
            Reply(
                200,
                SSE,
                framing="chunked",
                steps=[Write(p) for p in PIECES],
                content_encoding="gzip",
            ),
            False,
        ),
    ],
    ids=["chunked", "close-delimited", "content-length", "gzip"],
)
def test_which_bodies_are_read_below_urllib3(
    transport: RequestsTransport, reply: Reply, plain: bool
) -> None:
    with ScriptedServer(reply) as url:
        http = open_post(transport, url)
        raw = http._response.raw  # type: ignore[attr-defined]
        assert (_plain_body(raw) is not None) is plain
        assert http.read() == b"".join(PIECES)  # the same bytes either way
        http.close()


def test_a_plain_chunked_body_read_to_its_end_returns_the_connection(
    transport: RequestsTransport,
) -> None:
    reply = Reply(200, SSE, framing="chunked", steps=[Write(p) for p in PIECES])
    server = ScriptedServer(reply)
    with server as url:
        for _ in range(3):
            http = open_post(transport, url)
            assert b"".join(http.iter_bytes()) == b"".join(PIECES)
            http.close()
        assert [r.connection_id for r in server.requests] == [0, 0, 0]


def test_a_plain_body_cut_off_raises_what_urllib3_raises(transport: RequestsTransport) -> None:
    reply = Reply(200, SSE, framing="chunked", steps=[Write(PIECES[0]), Drop()])
    server = ScriptedServer(reply)
    with server as url:
        http = open_post(transport, url)
        got: list[bytes] = []
        with pytest.raises(u3.ProtocolError) as caught:
            got.extend(http.iter_bytes())
        http.close()
        assert got == [PIECES[0]]
        error_class, message = classify_exception(caught.value, after_headers=True)
        assert error_class == "response" and message.startswith("Body cut off")
        # The broken connection was not pooled: the next request opens a new one.
        http = open_post(transport, url)
        http.close()
        assert server.requests[-1].connection_id != server.requests[0].connection_id


def test_a_reader_that_stops_early_leaves_the_connection_closed(
    transport: RequestsTransport,
) -> None:
    go = threading.Event()
    reply = Reply(200, SSE, framing="chunked", steps=[Write(p) for p in PIECES])
    server = ScriptedServer([_held(go), reply])
    with server as url:
        http = open_post(transport, url)
        pieces = http.iter_bytes()
        assert next(pieces) == PIECES[0]
        pieces.close()
        http.close()  # a body not read to its end: urllib3 closes the connection
        go.set()
        http = open_post(transport, url)
        assert http.read() == b"".join(PIECES)
        http.close()
        assert server.requests[1].connection_id != server.requests[0].connection_id


def test_a_second_iterator_reads_on_and_the_connection_is_pooled(
    transport: RequestsTransport,
) -> None:
    # What keep-alive does after a stream's explicit end: the reader's iterator
    # is dropped, and the drain reads the rest of the body with a new one.
    gos = [threading.Event(), threading.Event()]
    server = ScriptedServer([_held(go) for go in gos])
    with server as url:
        for go in gos:
            http = open_post(transport, url)
            first = http.iter_bytes()
            assert next(first) == PIECES[0]
            del first
            go.set()
            assert b"".join(http.iter_bytes()) == b"".join(PIECES[1:])
            http.close()
        assert [r.connection_id for r in server.requests] == [0, 0]
