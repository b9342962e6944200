"""`Response.iter_batches`: the chunks of iterating, grouped as they arrived, over real sockets.

Every test compares the batches with what iterating the same Response gives
(the same Chunk objects, in the same order) and checks that both end the same
way. Nothing sleeps: the server's writes wait on events the test sets.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from llmchat import OpenAICommon
from llmchat.chunk import Chunk
from llmchat.response import Response
from llmchat.testing import Drop, Reply, ScriptedServer, Stall, WaitFor, Write

from .backends.streaming_support import HI, delta

WAIT = 10.0
SSE = {"Content-Type": "text/event-stream"}


def frames(*texts: str) -> bytes:
    """The SSE frames of one content delta per text, back to back."""
    return b"".join(f"data: {json.dumps(delta(t))}\n\n".encode() for t in texts)


DONE = frames() + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE += b"data: [DONE]\n\n"


def flat(batches: list[list[Chunk]]) -> list[Chunk]:
    return [chunk for batch in batches for chunk in batch]


def same_as_iterating(response: Response, batches: list[list[Chunk]]) -> None:
    """The batches hold exactly what iterating the settled Response replays."""
    assert all(batches), "a batch is never empty"
    replayed = list(response)
    assert len(flat(batches)) == len(replayed)
    assert all(a is b for a, b in zip(flat(batches), replayed, strict=True))


def test_after_the_settle_one_batch_holds_every_chunk(server: ScriptedServer) -> None:
    texts = [f"t{i}" for i in range(20)]
    server.push(Reply(headers=SSE, framing="chunked", steps=[Write(frames(*texts) + DONE)]))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    assert response.wait(WAIT).is_success
    batches = list(response.iter_batches())
    assert len(batches) == 1
    assert [c.content for c in batches[0] if c.content] == texts
    same_as_iterating(response, batches)


def test_many_frames_per_read_come_without_waiting_for_the_rest(server: ScriptedServer) -> None:
    """Five frames in one write, then the server waits until the consumer saw them:
    the batches before the gate hold those five (they never wait for more), the
    rest come after, and together they are what iterating gives."""
    gate = threading.Event()
    first, second = [f"a{i}" for i in range(5)], [f"b{i}" for i in range(5)]
    steps = [Write(frames(*first)), WaitFor(gate, timeout=WAIT), Write(frames(*second) + DONE)]
    server.push(Reply(headers=SSE, framing="chunked", steps=steps))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    before: list[list[Chunk]] = []
    after: list[list[Chunk]] = []
    for batch in response.iter_batches():
        (after if gate.is_set() else before).append(batch)
        if len(flat(before)) >= len(first):
            gate.set()
    assert response.is_success
    assert [c.content for c in flat(before)] == first
    assert [c.content for c in flat(after) if c.content] == second
    same_as_iterating(response, before + after)


def test_one_frame_per_read_is_one_chunk_per_batch(server: ScriptedServer) -> None:
    """The server holds frame i + 1 until the consumer took batch i: each batch is one chunk."""
    gates = [threading.Event() for _ in range(4)]
    steps: list[Any] = []
    for i, gate in enumerate(gates):
        steps += [Write(frames(str(i))), WaitFor(gate, timeout=WAIT)]
    steps.append(Write(DONE))
    server.push(Reply(headers=SSE, framing="chunked", steps=steps))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    batches: list[list[Chunk]] = []
    for batch in response.iter_batches():
        batches.append(batch)
        if len(batches) <= len(gates):
            gates[len(batches) - 1].set()
    assert response.is_success
    assert [[c.content for c in batch] for batch in batches[: len(gates)]] == [
        ["0"],
        ["1"],
        ["2"],
        ["3"],
    ]
    same_as_iterating(response, batches)


def test_a_cancel_from_another_thread_ends_a_waiting_batch_iterator(
    server: ScriptedServer,
) -> None:
    server.push(Reply(headers=SSE, framing="chunked", steps=[Write(frames("so", " far")), Stall()]))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    batches: list[list[Chunk]] = []
    took_one = threading.Event()

    def consume() -> None:
        for batch in response.iter_batches():
            batches.append(batch)
            took_one.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    assert took_one.wait(WAIT)
    response.cancel()
    thread.join(WAIT)
    assert not thread.is_alive(), "the batch iterator did not end at the cancel"
    assert response.is_cancelled, response.err
    assert "".join(c.content or "" for c in flat(batches)) == "so far"
    same_as_iterating(response, batches)


def test_a_cancel_between_batches_ends_the_next_one(server: ScriptedServer) -> None:
    server.push(Reply(headers=SSE, framing="chunked", steps=[Write(frames("a")), Stall()]))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    batches = response.iter_batches()
    assert [c.content for c in next(batches)] == ["a"]
    response.cancel()
    assert next(batches, None) is None
    assert next(iter(response)).content == "a" and response.is_cancelled


def test_a_dropped_stream_ends_the_batches_as_it_ends_iterating(server: ScriptedServer) -> None:
    """A failure is a state, not an exception: both end normally with what came first."""
    server.push(Reply(headers=SSE, framing="chunked", steps=[Write(frames("half", " an")), Drop()]))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    batches = list(response.iter_batches())
    assert response.is_done and not response.is_success
    assert response.error_class is not None
    assert "".join(c.content or "" for c in flat(batches)) == "half an"
    same_as_iterating(response, batches)


def test_an_http_failure_gives_no_batch(server: ScriptedServer) -> None:
    server.push(Reply(500, {"Content-Type": "application/json"}, body=b'{"error":"boom"}'))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    assert list(response.iter_batches()) == []
    assert list(response) == [] and response.error_class == "http"


def test_a_paced_response_counts_a_batch_as_taken_when_it_is_given(
    server: ScriptedServer,
) -> None:
    """Pacing (the proxy's backpressure) sees a batch's chunks as taken once it is
    yielded, as iterating does; so a reader held at its lead reads on, to the end."""
    texts = [f"p{i}" for i in range(40)]
    steps = [Write(frames(t)) for t in texts] + [Write(DONE)]
    server.push(Reply(headers=SSE, framing="chunked", steps=steps))
    response = OpenAICommon(server.url).chat_completion_stream(HI)
    response._pace(2)
    writer = response._writer
    seen = 0
    batches: list[list[Chunk]] = []
    for batch in response.iter_batches():
        seen += len(batch)
        assert writer.taken >= seen
        batches.append(batch)
    assert response.is_success
    assert [c.content for c in flat(batches) if c.content] == texts
    same_as_iterating(response, batches)
