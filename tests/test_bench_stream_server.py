"""The stream benches' out-of-process pieces: the server plays a Reply one chunk per event,
logs what it did; a child contender times and checks its own streams; per-round ratios."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from _child_client import ChildContender, StreamServer  # noqa: E402
from _report import Elapsed, interleaved_rounds, median_ratios  # noqa: E402
from bench_stream import deltas, stream_frames  # noqa: E402

FRAMES = 5


def read_chunks(port: int, path: str) -> tuple[bytes, list[bytes]]:
    """POST `path` on a fresh connection; the head and each HTTP chunk as it was framed."""
    body = b"{}"
    request = (
        b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
    )
    with socket.create_connection(("127.0.0.1", port), 10) as sock:
        sock.sendall(request)
        data = b""
        while not data.endswith(b"\r\n0\r\n\r\n"):
            got = sock.recv(65536)
            assert got, "the server closed before the last chunk"
            data += got
    head, _, rest = data.partition(b"\r\n\r\n")
    chunks = []
    while True:
        line, _, rest = rest.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            return head, chunks
        chunks.append(rest[:size])
        rest = rest[size + 2 :]


def test_the_server_sends_every_event_as_its_own_chunk_and_logs_it() -> None:
    frames = stream_frames(deltas(FRAMES))
    with StreamServer("_stream_throughput:router", {"frames": FRAMES}) as server:
        head, chunks = read_chunks(server.port, "/events/chat/completions")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"transfer-encoding: chunked" in head.lower()
        assert chunks == frames
        _, bulk = read_chunks(server.port, "/bulk/chat/completions")
        assert b"".join(bulk) == b"".join(frames)
        log = server.log()
        assert [entry["path"] for entry in log] == [
            "/events/chat/completions",
            "/bulk/chat/completions",
        ]
        assert log[0]["writes"] == len(frames)
        assert log[0]["last_write_at"] >= log[0]["headers_at"]
        assert server.log(1) == log[1:]


def test_a_child_contender_streams_with_the_stdlib_parser_and_checks_its_text() -> None:
    with StreamServer("_stream_throughput:router", {"frames": FRAMES}) as server:
        child = ChildContender(
            "_stream_throughput:llmchat_child",
            {"url": server.url + "/events", "frames": FRAMES},
            {"LLMCHAT_JSON": "stdlib"},
        )
        try:
            assert child.info == {"parser": "stdlib"}
            elapsed = child()
            assert type(elapsed) is Elapsed and elapsed > 0
            assert child.errors == [] and child.streams == 1 and len(child.cpu) == 1
        finally:
            child.close()
        wrong = ChildContender(
            "_stream_throughput:llmchat_child",
            {"url": server.url + "/events", "frames": FRAMES + 1},  # expects one delta more
            {},
        )
        try:
            wrong()
            assert len(wrong.errors) == 1 and "differs" in wrong.errors[0]
        finally:
            wrong.close()


def test_a_self_timed_contender_is_taken_at_its_own_word() -> None:
    rounds = interleaved_rounds({"child": lambda: Elapsed(0.25)}, repeat=3)
    assert rounds == {"child": [0.25, 0.25, 0.25]}


def test_median_ratios_are_per_round_then_median() -> None:
    rounds = {"floor": [1.0, 2.0, 4.0], "fast": [0.5, 1.0, 8.0], "same": [1.0, 2.0, 4.0]}
    ratios = median_ratios(rounds, "floor")
    assert ratios == {"floor": 1.0, "fast": 2.0, "same": 1.0}
    assert json.dumps(ratios)  # plain floats, for the tables
