"""HangupWatch: a client that hangs up is noticed once, by one shared thread, and cancels
the upstream on every face.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from llmchat import OpenAICommon
from llmchat.proxy import make_app
from llmchat.proxy.server.hangup import HangupWatch
from llmchat.testing import Reply, ScriptedServer, WaitFor

from ...support.chat_frames import chunk

WAIT = 10.0

# -- HangupWatch ----------------------------------------------------------------------


class _Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.called = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.called.set()


def _watch_threads() -> int:
    return sum(t.name == "llmchat-proxy-hangup" for t in threading.enumerate())


def test_hangup_fires_once_when_the_peer_closes() -> None:
    ours, theirs = socket.socketpair()
    counter = _Counter()
    watch = HangupWatch(ours, counter).start()
    try:
        assert not watch.hung_up.is_set()
        theirs.close()
        assert counter.called.wait(WAIT)
        assert watch.hung_up.is_set()
    finally:
        watch.stop()
        ours.close()
    watch.stop()  # a second stop is harmless
    assert counter.calls == 1


def test_stop_without_hangup_is_prompt_and_silent() -> None:
    ours, theirs = socket.socketpair()
    counter = _Counter()
    watch = HangupWatch(ours, counter).start()
    assert watch.watching
    stopper = threading.Thread(target=watch.stop)
    stopper.start()
    stopper.join(WAIT)
    assert not stopper.is_alive(), "stop() did not return"
    theirs.close()  # after stop: nobody is watching any more
    ours.close()
    assert not watch.hung_up.is_set()
    assert counter.calls == 0


def test_no_socket_no_thread() -> None:
    before = _watch_threads()
    counter = _Counter()
    watch = HangupWatch(None, counter).start()
    assert not watch.watching and watch.ended.is_set() and _watch_threads() == before
    watch.stop()

    closed, other = socket.socketpair()
    closed.close()
    other.close()
    watch = HangupWatch(closed, counter).start()
    assert not watch.watching and _watch_threads() == before
    watch.stop()
    assert counter.calls == 0


def test_pipelined_data_is_not_a_hangup() -> None:
    ours, theirs = socket.socketpair()
    counter = _Counter()
    watch = HangupWatch(ours, counter).start()
    assert watch.watching
    try:
        theirs.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        # The watcher lets go once it sees data it must not consume.
        assert watch.ended.wait(WAIT) and not watch.watching
        assert not watch.hung_up.is_set()
        assert counter.calls == 0
        # Only peeked at: the next request is still there for the server to read.
        assert ours.recv(100) == b"GET /health HTTP/1.1\r\n\r\n"
    finally:
        watch.stop()
        theirs.close()
        ours.close()
    assert counter.calls == 0


def test_raising_hangup_callback_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ours, theirs = socket.socketpair()
    called = threading.Event()

    def boom() -> None:
        called.set()
        raise RuntimeError("cancel failed")

    with caplog.at_level(logging.WARNING, logger="llmchat.proxy"):
        watch = HangupWatch(ours, boom).start()
        theirs.close()
        assert called.wait(WAIT)
        watch.stop()  # waits for a callback under way, so its log record is in
    ours.close()
    assert watch.hung_up.is_set()
    assert any("hang-up callback raised" in r.getMessage() for r in caplog.records)


def test_every_watch_shares_one_thread_and_fires_only_for_its_own_socket() -> None:
    pairs = [socket.socketpair() for _ in range(20)]
    counters = [_Counter() for _ in pairs]
    watches = [HangupWatch(ours, c).start() for (ours, _), c in zip(pairs, counters, strict=True)]
    try:
        assert _watch_threads() == 1
        for _, theirs in pairs[::2]:
            theirs.close()
        for counter in counters[::2]:
            assert counter.called.wait(WAIT)
        for watch in watches[::2]:
            assert watch.ended.wait(WAIT)
        assert all(w.watching and not w.hung_up.is_set() for w in watches[1::2])
    finally:
        for watch in watches:
            watch.stop()
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
    assert [c.calls for c in counters] == [1, 0] * 10


def test_a_socket_closed_while_watched_does_not_block_its_descriptors_next_owner() -> None:
    ours, theirs = socket.socketpair()
    forgotten = HangupWatch(ours, _Counter()).start()
    number = ours.fileno()
    ours.close()  # closed without stop(): its registration is stale
    theirs.close()
    reused = [socket.socketpair() for _ in range(4)]
    mine = next(((a, b) for a, b in reused if a.fileno() == number), None)
    try:
        # POSIX hands out the lowest free descriptor number: the closed one.
        assert mine is not None, (number, [a.fileno() for a, _ in reused])
        counter = _Counter()
        watch = HangupWatch(mine[0], counter).start()
        assert watch.watching
        mine[1].close()
        assert counter.called.wait(WAIT) and watch.hung_up.is_set()
        watch.stop()
    finally:
        forgotten.stop()
        for a, b in reused:
            a.close()
            b.close()


@pytest.mark.parametrize(
    "path",
    [
        "/api/chat",
        "/v1/messages",
        "/v1/chat/completions",
    ],
)
def test_hang_up_in_prefill_cancels_upstream_on_every_face(path: str) -> None:
    release = threading.Event()
    frames = [chunk({"content": "late"}), chunk({}, "stop")]
    server = ScriptedServer([Reply.sse(frames, before_headers=[WaitFor(release, 30)])])
    server.start()
    ours, theirs = socket.socketpair()
    body = json.dumps(
        {
            "model": "m",
            "stream": True,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ.update(
        REQUEST_METHOD="POST",
        PATH_INFO=path,
        CONTENT_LENGTH=str(len(body)),
        **{"wsgi.input": io.BytesIO(body), "llmchat.client_socket": ours},
    )
    events: list[dict[str, Any]] = []
    app = make_app(OpenAICommon(server.url), usage_log=events.append)

    def serve() -> None:
        result = app(environ, lambda *_: None)
        try:
            b"".join(result)
        finally:
            getattr(result, "close", lambda: None)()

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        assert server.wait_for_requests(1, WAIT)
        theirs.close()  # the client gives up while the upstream is still in prefill
        disconnected = server.requests[0].disconnected.wait(3.0)
    finally:
        release.set()
        worker.join(WAIT)
        server.stop()
        ours.close()
    assert disconnected, "the upstream kept generating for a client that was gone"
    assert server.requests[0].headers_sent_at is None
    assert [e["status"] for e in events] == [499]
