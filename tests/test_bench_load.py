"""The load bench's own helpers: percentiles, stream checks, the client split, the upstream's
answers. Pure: no sockets, no clocks (the bench itself is run by hand, not by the suite)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from _load_clients import SSEText, percentile, request_body, split, stream_outcome  # noqa: E402
from _load_upstream import Counts, _answer, long_text, short_text  # noqa: E402


class Recorder:
    """Stands in for the upstream's client socket: keeps every `sendall`."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.writes.append(data)


def dechunk(wire: bytes) -> tuple[bytes, bytes]:
    """Split an HTTP/1.1 chunked response into its head and its decoded body."""
    head, _, rest = wire.partition(b"\r\n\r\n")
    body = b""
    while True:
        line, _, rest = rest.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            return head, body
        body, rest = body + rest[:size], rest[size + 2 :]


def answer(kind: str, tag: str, stream: bool | None = None) -> Recorder:
    body = json.loads(request_body(kind, tag))
    if stream is not None:
        body["stream"] = stream
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
    sock = Recorder()
    assert _answer(sock, head, json.dumps(body).encode(), Counts()) is True  # type: ignore[arg-type]
    return sock


def test_percentile_interpolates_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(list(range(101)), 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match="percentile q"):
        percentile(values, 101)


def test_sse_text_joins_deltas_split_anywhere() -> None:
    frames = (
        b'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"lo \xc3\xa9"}}]}\n\n'
        b'data: {"choices":[],"usage":{"total_tokens":3}}\n\n'
        b"data: [DONE]\n\n"
    )
    for cut in range(1, len(frames)):
        reader = SSEText()
        counted = reader.feed(frames[:cut]) + reader.feed(frames[cut:])
        assert (reader.text, reader.done, counted) == ("Hello é", True, 2)


def test_stream_outcome_tells_lost_from_corrupted() -> None:
    whole = SSEText()
    whole.feed(b'data: {"choices":[{"delta":{"content":"ab"}}]}\n\ndata: [DONE]\n\n')
    assert stream_outcome(whole, "ab") == "ok"
    assert stream_outcome(whole, "abc") == "corrupted"
    cut = SSEText()
    cut.feed(b'data: {"choices":[{"delta":{"content":"ab"}}]}\n\ndata: [DO')
    assert stream_outcome(cut, "ab") == "lost"


def test_split_spreads_clients_over_processes() -> None:
    assert split(1) == [1]
    assert split(8) == [2, 2, 2, 2]
    assert split(6, processes=4) == [2, 2, 1, 1]
    assert sum(split(64)) == 64


def test_upstream_stream_is_one_chunk_per_event_and_reads_as_its_tag() -> None:
    sock = answer("stream", "t1-2-3")
    head, body = dechunk(b"".join(sock.writes))
    assert b"Transfer-Encoding: chunked" in head
    reader = SSEText()
    reader.feed(body)
    assert reader.done and len(reader.parts) == 1_000
    assert reader.text == long_text("t1-2-3") != long_text("t1-2-4")
    assert reader.text.startswith("[t1-2-3]") and reader.text.endswith("[t1-2-3]")
    # The head and role frame go together; after them, one write per SSE event.
    events = body.count(b"\n\n")
    assert len(sock.writes) == 1 + (events - 1) + 1  # ... plus the last chunk


def test_upstream_short_answers_block_or_stream_as_asked() -> None:
    blocking = b"".join(answer("short", "t9").writes)
    payload = json.loads(blocking.partition(b"\r\n\r\n")[2])
    assert payload["choices"][0]["message"]["content"] == short_text("t9") == "ok [t9]"
    _, body = dechunk(b"".join(answer("short", "t9", stream=True).writes))
    reader = SSEText()
    reader.feed(body)
    assert (reader.text, reader.done) == ("ok [t9]", True)
