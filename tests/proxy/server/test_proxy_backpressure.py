"""Backpressure: a client that stops reading a stream holds the upstream back, then ends it.

Each face streams a long answer from a loopback upstream to a raw-socket
client that sends its request and never reads. The proxy must read the
upstream only as fast as the client takes it: what the upstream could hand
to the kernel is then bounded by the socket buffers between the two ends
plus the proxy's small lead, whatever the answer's length. When the send
stalls past `send_timeout`, the upstream sees its connection closed while it
still had most of the answer to send, and the request is recorded as a 499.

(The OpenAI face's byte relay already read the upstream only as its client
took the bytes; the translating faces read the whole answer.)
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import requests
from urllib3.connection import HTTPConnection

from llmchat import OpenAICommon
from llmchat.proxy import make_app, make_server
from llmchat.testing import Reply, ScriptedServer
from llmchat.transport import READ_SIZE
from llmchat.transport.adapter import CancellableAdapter

from ...support.proxy import UsageSink

SEND_TIMEOUT: Final = 1.0
WAIT: Final = 30.0  # "not blocked for ever", never a speed claim
CONTENT: Final = "x" * 16_000  # big frames: the old proxy reads them fast, all of them
MIN_FRAMES: Final = 2_000  # 32 MB of answer at the least; more where the buffers are larger
UPSTREAM_RCVBUF: Final = 65_536
CLIENT_RCVBUF: Final = 4_096

FACES: Final = {
    "ollama-chat": (
        "/api/chat",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
    ),
    "ollama-generate": ("/api/generate", {"model": "m", "prompt": "hi", "stream": True}),
    "anthropic": (
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
        },
    ),
    "responses": ("/v1/responses", {"model": "m", "input": "hi", "stream": True}),
}


def _long_answer(bound: int) -> Reply:
    """Frames enough that the answer is three times `bound` (the backend's size limit is off)."""
    delta = {"content": CONTENT}
    frames: list[dict[str, Any]] = [
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    ] * max(MIN_FRAMES, 3 * bound // len(CONTENT))
    ending = {"index": 0, "delta": {}, "finish_reason": "stop"}
    frames.append({"id": "c1", "model": "m", "choices": [ending]})
    return Reply.sse(frames)


class _SmallReceiveBuffer(CancellableAdapter):
    """The proxy's upstream sockets with a fixed receive buffer, not one autotuned to megabytes.

    Only so that the bound below is small next to the answer; the proxy's
    own code is unchanged.
    """

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["socket_options"] = [
            *HTTPConnection.default_socket_options,
            (socket.SOL_SOCKET, socket.SO_RCVBUF, UPSTREAM_RCVBUF),
        ]
        super().init_poolmanager(*args, **kwargs)


def _max_send_buffer() -> int:
    """The most a TCP send buffer may grow to here (Linux autotuning's ceiling)."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, ValueError, IndexError):
        return 8 * 1024 * 1024


def _bound() -> int:
    """The most upstream bytes a stalled client can let through, with the proxy paced.

    The upstream's send buffer and the proxy's receive buffer; the proxy's
    send buffer and the client's receive buffer (the translated frames are
    no smaller than the content they carry, so as many frames as upstream
    bytes, give or take the frame's envelope); and the proxy's own lead: a
    read, the chunks its reader may run ahead, the chunks a body holds. The
    kernel doubles a buffer size set with setsockopt.
    """
    frame = len(CONTENT) + 200
    kernel = _max_send_buffer() + 2 * UPSTREAM_RCVBUF
    client = (_max_send_buffer() + 2 * CLIENT_RCVBUF) * frame // len(CONTENT)
    lead = READ_SIZE + 32 * frame
    return kernel + client + lead


@contextlib.contextmanager
def _proxy(upstream: ScriptedServer, usage: UsageSink) -> Iterator[int]:
    session = requests.Session()
    session.mount("http://", _SmallReceiveBuffer())
    with OpenAICommon(upstream.url, session=session, max_response_bytes=None) as backend:
        server = make_server(
            make_app(backend, usage_log=usage), "127.0.0.1", 0, send_timeout=SEND_TIMEOUT
        )
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()
            server.server_close()
            thread.join(WAIT)
            session.close()


def _stalled_client(port: int, path: str, body: dict[str, Any]) -> socket.socket:
    """Send a streamed request, and never read the answer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
    sock.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


@pytest.mark.skipif(sys.platform == "win32", reason="socket buffer sizes are Linux/BSD ones")
@pytest.mark.parametrize("face", list(FACES))
def test_a_stalled_client_holds_the_upstream_back_then_ends_it(face: str) -> None:
    path, body = FACES[face]
    bound = _bound()
    answer = _long_answer(bound)
    total = sum(len(step.data) for step in answer.body_steps if hasattr(step, "data"))
    assert total > 2 * bound, "the answer must dwarf the buffers for the bound to mean anything"
    usage = UsageSink()
    upstream = ScriptedServer(answer).start()
    try:
        with _proxy(upstream, usage) as port:
            client = _stalled_client(port, path, body)
            try:
                assert upstream.wait_for_requests(1, WAIT)
                record = upstream.requests[0]
                assert record.finished.wait(WAIT), "the upstream was never let go"
                sent = sum(size for _, size in record.writes)
                # Ended by the proxy, mid-answer: not an upstream that sent everything.
                assert record.disconnected.is_set(), f"the upstream sent all {sent} bytes"
                assert sent <= bound, f"{sent} upstream bytes for a stalled client (bound {bound})"
                (event,) = usage.wait(1, WAIT)
                assert event["status"] == 499
            finally:
                client.close()
    finally:
        upstream.stop()
