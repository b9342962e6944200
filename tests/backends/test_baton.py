"""Who reads a stream: the iterating thread while it keeps up, the reader thread otherwise.

Over real sockets (the loopback server). A transport wrapper notes the thread
of every body read, and can hold a read or raise into it. The server paces
its events with `WaitFor`, released by the consumer, so "the consumer was
there when the bytes came" is a fact of the script, not of timing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from llmchat import OpenAICommon, Response, Settings
from llmchat.backends import _baton
from llmchat.testing import Drop, Reply, ScriptedServer, Stall, Step, WaitFor, Write
from llmchat.transport import TransportResponse

from ..support.transport import WrappingTransport

HI = [{"role": "user", "content": "Hi"}]
WAIT = 10.0


def frame(delta: Mapping[str, Any] | None = None, **extra: Any) -> bytes:
    event: dict[str, Any] = {"id": "c1", "model": "m", **extra}
    if delta is not None:
        event["choices"] = [{"index": 0, "delta": dict(delta), "finish_reason": None}]
    return f"data: {json.dumps(event)}\n\n".encode()


def finish_frame() -> bytes:
    event = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    return f"data: {json.dumps(event)}\n\n".encode()


USAGE = frame(choices=[], usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
DONE = b"data: [DONE]\n\n"


class Reads(WrappingTransport):
    """The real transport; notes which thread did each body read.

    `hold(n)` makes the consumer thread's n-th read (counted over all threads)
    set `in_read` and then read; `interrupt(n)` raises KeyboardInterrupt into it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[threading.Thread, bytes]] = []
        self.in_read = threading.Event()
        self.hold_at: int | None = None
        self.interrupt_at: int | None = None

    def wrap(self, body: TransportResponse) -> TransportResponse:
        return _Body(body, self)

    @property
    def threads(self) -> list[threading.Thread]:
        return [thread for thread, _ in self.log]

    def by(self, thread: threading.Thread) -> int:
        return sum(1 for t in self.threads if t is thread)

    def reader_of(self, needle: bytes) -> threading.Thread:
        """The thread whose read carried `needle`."""
        return next(thread for thread, data in self.log if needle in data)


class _Body(TransportResponse):
    def __init__(self, inner: TransportResponse, reads: Reads) -> None:
        self._inner = inner
        self._reads = reads
        self.status_code = inner.status_code
        self.headers = inner.headers

    def iter_bytes(self, limit: int | None = None) -> Iterator[bytes]:
        body = iter(self._inner.iter_bytes(limit))
        reads = self._reads
        while True:
            count = len(reads.log) + 1
            if threading.current_thread() is threading.main_thread():
                if count == reads.interrupt_at:
                    raise KeyboardInterrupt
                if count == reads.hold_at:
                    reads.in_read.set()
            try:
                data = next(body)
            except StopIteration:
                return
            reads.log.append((threading.current_thread(), data))
            yield data

    def will_drain(self) -> None:
        self._inner.will_drain()

    def close(self) -> None:
        self._inner.close()


def paced(words: list[str], gates: list[threading.Event], *, tail: bool = True) -> Reply:
    """One content frame per word, each held until its gate is set; then finish, usage, [DONE]."""
    steps: list[Any] = [Write(frame({"role": "assistant", "content": ""}))]
    for word, gate in zip(words, gates, strict=True):
        steps += [WaitFor(gate, timeout=WAIT), Write(frame({"content": word}))]
    if tail:
        steps += [Write(finish_frame()), Write(USAGE), Write(DONE)]
    return Reply(steps=steps, framing="chunked", headers={"Content-Type": "text/event-stream"})


def hel_then(end: Step) -> Reply:
    """A stream whose first read is "Hel", then `end` (a stall or a cut)."""
    return Reply(
        steps=[Write(frame({"role": "assistant", "content": "Hel"})), end],
        framing="chunked",
        headers={"Content-Type": "text/event-stream"},
    )


@pytest.fixture
def reads() -> Reads:
    return Reads()


@pytest.fixture
def consumer_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader thread leaves every read before the finish chunk to the iterating
    consumer: a lease from the start, and one that never runs out. On a quiet machine
    that is what happens anyway; on a loaded one a consumer descheduled for longer than
    the real lease would see the reader thread step in, which is right but not what
    these tests look at."""
    monkeypatch.setattr(_baton, "LEASE", 60.0)
    run = _baton.ReadBaton.run

    def leased(self: _baton.ReadBaton) -> Any:
        self._last_pull = time.monotonic()
        return run(self)

    monkeypatch.setattr(_baton.ReadBaton, "run", leased)


def backend(server: ScriptedServer, reads: Reads) -> OpenAICommon:
    return OpenAICommon(server.url, model="m", transport=reads)


def stream(server: ScriptedServer, reads: Reads) -> Response:
    return backend(server, reads).chat_completion_stream(HI, settings=Settings(max_tokens=9))


def words_and_gates(n: int) -> tuple[list[str], list[threading.Event]]:
    return [f"w{i} " for i in range(n)], [threading.Event() for _ in range(n)]


def release_as_read(gates: list[threading.Event]) -> Callable[[str], None]:
    """A loop body that opens the gate of the next word once a word arrived."""
    seen = [0]

    def body(content: str) -> None:
        if content and seen[0] < len(gates):
            gates[seen[0]].set()
            seen[0] += 1

    return body


def test_an_iterating_consumer_does_the_reads_itself(
    server: ScriptedServer, reads: Reads, consumer_reads: None
) -> None:
    words, gates = words_and_gates(12)
    server.set_script(paced(words, gates))
    gates[0].set()
    r = stream(server, reads)
    after = release_as_read(gates[1:])
    got = []
    for chunk in r:
        got.append(chunk.content)
        after(chunk.content or "")
    assert r.is_success and r.msg == "".join(words)
    assert r.completion_tokens == 4 and r.finish_reason == "stop"
    # Every word was written only after the consumer asked for it: it read them itself.
    for word in words:
        assert reads.reader_of(word.encode()) is threading.main_thread(), reads.threads
    assert "".join(c or "" for c in got) == r.msg


def test_reads_after_the_finish_chunk_are_the_reader_threads(
    server: ScriptedServer, reads: Reads, consumer_reads: None
) -> None:
    usage_gate = threading.Event()
    steps = [
        Write(frame({"role": "assistant", "content": "Hello"})),
        Write(finish_frame()),
        WaitFor(usage_gate, timeout=WAIT),
        Write(USAGE),
        Write(DONE),
    ]
    server.set_script(
        Reply(steps=steps, framing="chunked", headers={"Content-Type": "text/event-stream"})
    )
    r = stream(server, reads)
    for chunk in r:
        if chunk.finish_reason:
            usage_gate.set()
    assert r.is_success and r.completion_tokens == 4
    assert reads.reader_of(b'"usage"').name == "llmchat-stream"
    assert reads.reader_of(b"Hello") is threading.main_thread()


def test_a_consumer_busy_in_its_loop_body_does_not_stall_the_stream(
    server: ScriptedServer, reads: Reads
) -> None:
    words, gates = words_and_gates(3)
    for gate in gates:
        gate.set()
    server.set_script(paced(words, gates))
    r = stream(server, reads)
    for chunk in r:
        if chunk.content:
            # The loop body blocks until the Response settles: only the reader
            # thread can read the rest, and it must.
            assert r.wait(WAIT).is_done
            break
    assert r.is_success and r.msg == "".join(words) and r.completion_tokens == 4


def test_breaking_out_hands_the_reads_back(server: ScriptedServer, reads: Reads) -> None:
    words, gates = words_and_gates(4)
    server.set_script(paced(words, gates))
    gates[0].set()
    r = stream(server, reads)
    for chunk in r:
        if chunk.content:
            break
    for gate in gates[1:]:
        gate.set()
    assert r.wait(WAIT).is_success and r.msg == "".join(words)


def test_an_iterator_left_open_does_not_hold_the_stream(
    server: ScriptedServer, reads: Reads
) -> None:
    words, gates = words_and_gates(2)
    server.set_script(paced(words, gates))
    gates[0].set()
    r = stream(server, reads)
    it = iter(r)
    while not next(it).content:
        pass
    gates[1].set()  # the held iterator never asks again; the reader thread reads on
    assert r.wait(WAIT).is_success and r.msg == "".join(words)
    assert [c.content for c in it if c.content] == [words[1]]  # it still replays the rest
    del it


def test_cancel_while_the_consumer_is_in_its_own_read(
    server: ScriptedServer, reads: Reads, consumer_reads: None
) -> None:
    server.set_script(hel_then(Stall()))
    reads.hold_at = 2
    r = stream(server, reads)

    def cancel_when_in_read() -> None:
        assert reads.in_read.wait(WAIT)
        r.cancel()

    canceller = threading.Thread(target=cancel_when_in_read)
    canceller.start()
    texts = [chunk.content for chunk in r]
    canceller.join(WAIT)
    assert r.is_cancelled and r.msg == "Hel" and "Hel" in texts
    assert server.requests[0].disconnected.wait(WAIT)  # the server learnt of it


def test_ctrl_c_in_the_consumers_read_cancels_and_propagates(
    server: ScriptedServer, reads: Reads, consumer_reads: None
) -> None:
    server.set_script(hel_then(Stall()))
    reads.interrupt_at = 2
    r = stream(server, reads)
    with pytest.raises(KeyboardInterrupt):
        for _chunk in r:
            pass
    assert r.is_cancelled and r.msg == "Hel"
    assert server.requests[0].disconnected.wait(WAIT)
    assert r.wait(WAIT).is_done


def test_a_cut_during_the_consumers_read_is_the_same_failure_as_without_it(
    server: ScriptedServer, reads: Reads
) -> None:
    server.set_script([hel_then(Drop()), hel_then(Drop())])
    iterated = stream(server, reads)
    texts = [chunk.content for chunk in iterated]
    waited = stream(server, reads).wait(WAIT)
    assert "Hel" in texts
    for r in (iterated, waited):
        assert r.is_done and not r.is_success and r.msg == "Hel"
    assert (iterated.error_class, iterated.err) == (waited.error_class, waited.err)


def test_two_iterating_threads_see_the_same_chunks(server: ScriptedServer, reads: Reads) -> None:
    words, gates = words_and_gates(6)
    for gate in gates:
        gate.set()
    server.set_script(paced(words, gates))
    r = stream(server, reads)
    seen: dict[str, list[Any]] = {}

    def iterate(name: str) -> None:
        seen[name] = list(r)

    threads = [threading.Thread(target=iterate, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    mine = list(r)
    for t in threads:
        t.join(WAIT)
    assert r.is_success and r.msg == "".join(words)
    assert seen["a"] == seen["b"] == mine
