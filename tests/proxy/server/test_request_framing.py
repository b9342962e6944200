"""`RequestFraming`: where a request ends, or why a thread should take it now.

The gunicorn worker's poller hands a connection to a thread when `ready`; the
socket tests (test_proxy_guarantees) show the effect, these the rule for each
framing, fed in pieces as a slow client sends them.
"""

from __future__ import annotations

import pytest

from llmchat.proxy.server.request_framing import RequestFraming

LIMIT = 100
CHUNKED = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"


def _feed(*pieces: bytes) -> list[tuple[bool, bool]]:
    framing = RequestFraming(LIMIT, line_limit=8190, trailer_limit=1000)
    return [(framing.feed(piece), framing.whole) for piece in pieces]


@pytest.mark.parametrize(
    ("pieces", "steps"),
    [
        # No body: whole at the head's end, however it is split.
        ((b"GET / HTTP/1.1\r\nHost: x\r\n\r", b"\n"), [(False, False), (True, True)]),
        ((b"\r\nGET / HTTP/1.1\r\n\r\n",), [(True, True)]),  # one empty line first
        # A length: whole with its last byte, not before.
        (
            (b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", b"cde"),
            [(False, False), (True, True)],
        ),
        # Chunked, with an extension and a trailer, through its last line.
        (
            (CHUNKED + b"3;x=1\r\nabc\r\n", b"0\r\nX-T: 1\r\n", b"\r\n"),
            [(False, False), (False, False), (True, True)],
        ),
        # A huge chunk size waits for bytes, not the size: the app's limit counts what came.
        (
            (CHUNKED + b"fffffff\r\n{", b"x" * 50, b"x" * 50),
            [(False, False), (False, False), (True, False)],
        ),
        # Refused or not understood: to a thread at once, not whole (the parser's answer).
        ((b"POST / HTTP/1.1\r\nContent-Length: 500\r\n\r\nab",), [(True, False)]),
        ((b"POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n",), [(True, False)]),
        ((b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",), [(True, False)]),
        ((CHUNKED + b"zz\r\n",), [(True, False)]),
        ((CHUNKED + b"3\r\nabcXY",), [(True, False)]),
        ((b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",), [(True, False)]),
        ((b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",), [(True, False)]),
        ((b"GET / HTTP/1.1\nHost: x\n",), [(True, False)]),  # bare LF
        # Expect: 100-continue goes after its head: the app invites the body.
        (
            (b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",),
            [(True, True)],
        ),
    ],
)
def test_ready_when_whole_or_hopeless(
    pieces: tuple[bytes, ...], steps: list[tuple[bool, bool]]
) -> None:
    assert _feed(*pieces) == steps


def test_a_long_head_goes_to_a_thread_unfinished() -> None:
    framing = RequestFraming(LIMIT, line_limit=8190, trailer_limit=1000)
    assert not framing.feed(b"GET / HTTP/1.1\r\nX-Big: ")
    assert framing.feed(b"a" * 100_000) and not framing.head_done
