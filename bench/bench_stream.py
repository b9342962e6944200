"""Time llmchat's streaming path on loopback: frames/s, per-chunk latency and cancel latency.

Three measurements in one run:

1. Throughput, against a server in its own process (`_stream_server.py`): a
   llama.cpp-shaped stream of 20,000 ``chat.completion.chunk``
   events (a ~4-character content delta each), then the finish chunk, a usage
   event and ``[DONE]``, built once and sent one HTTP chunk per event, as real
   servers write it. llmchat (`chat_completion_stream`, every chunk consumed;
   with orjson when installed, and with the stdlib parser in a child process
   started with ``LLMCHAT_JSON=stdlib``), a raw floor
   (`requests` + ``read1`` + split + `json.loads`), the openai SDK and litellm,
   interleaved round by round; each row's ratio to the floor is the median of
   the per-round ratios. Then the same body in 64 KiB writes
   (hundreds of frames per read), for llmchat and the floor.
2. Added per-chunk latency: 200 frames, one write each, 5 ms apart; the time
   from the server's write of frame i to chunk i reaching the consumer, on a
   chunked and on a close-delimited body, for llmchat and the raw floor.
3. Cancel latency: `response.cancel()` mid-stream and during prefill, how long
   the call takes and when the server sees the connection go; the openai SDK's
   `stream.close()` mid-stream for comparison.

    python bench/bench_stream.py [--rounds N] [--latency-streams M] [--cancel-trials K]
                                 [--frames F] [--quick] [--profile] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import json
import math
import pstats
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _child_client import ChildContender, StreamServer
from _report import (
    BENCHMARKS_MD,
    NOT_INSTALLED,
    STDLIB_ONLY,
    best_of,
    blocked,
    calls_for,
    close_litellm,
    interleaved_rounds,
    json_parsers_differ,
    litellm_stream,
    loopback_only,
    median_ratios,
    package_versions,
    stamp,
    table,
    write_section,
)
from _stream_throughput import BULK, EVENTS, llmchat_problem

SECTION = "Streaming: throughput, per-chunk latency, cancel"

MODEL = "loopback"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Tell me a long story."},
]
FRAMES = 20_000
"""Content frames in the throughput stream (plus role, finish, usage and [DONE]); ``--frames``."""
QUICK_FRAMES = 2_000
"""The throughput stream's length in a ``--quick`` smoke run."""
WRITE_SIZE = 65_536
"""The throughput body goes out in writes of this many bytes (frames cut anywhere)."""
LATENCY_FRAMES = 200
LATENCY_WRITES = LATENCY_FRAMES + 3
"""Content frames, then the finish, usage and [DONE] frames: one `Write` each."""
LATENCY_GAP = 0.005
"""Seconds the server pauses before each latency frame."""
RAW_READ = 65_536
TARGET_RAW = 1.0
"""llmchat frames/s over the raw floor's, one chunk per event, median round: at least this."""
TARGET_OPENAI = 4.0
"""llmchat frames/s over the openai SDK's: at least this."""
TARGET_P99_US = 1_000.0
"""llmchat's p99 added per-chunk latency: below this many µs."""
WAIT = 5.0
"""Seconds to wait for anything the server should do at once (a safety bound)."""

# -- nothing leaves the machine ---------------------------------------------------


# -- the stream: llama.cpp's shape ---------------------------------------------------

# As in /work/shared/captures/llamacpp/chat_stream_include_usage.sse.txt: member
# order, ids and the model path are llama-server's; only the deltas differ.
_CREATED = 1796027353
_ID = "chatcmpl-vNALU1NHT9RVhbQxM7yAFZBtvCaNhLbK"
_WIRE_MODEL = "models/tiny-qwen2vocab-llama.gguf"
_TOKENS = (
    " the", " sun", " rose", " over", " a", " hill", " and", " cast", " long", " gold",
    " ing", " on", " old", " stone", " wall", "s", ",", ".", " she", " said", " it",
    " was", " time", " to", " go", " home", " café", " naïve", " 東京", " 🙂",
)  # fmt: skip
"""Token-sized deltas, mostly 3-5 characters, a few non-ASCII (mean ~3.9 characters)."""


def _frame(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    event = {
        "choices": choices,
        "created": _CREATED,
        "id": _ID,
        "model": _WIRE_MODEL,
        "system_fingerprint": "b0-unknown",
        "object": "chat.completion.chunk",
        **extra,
    }
    return (
        b"data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"
    )


def _content(text: str) -> bytes:
    return _frame([{"finish_reason": None, "index": 0, "delta": {"content": text}}])


ROLE_FRAME = _frame(
    [{"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}]
)
FINISH_FRAME = _frame([{"finish_reason": "stop", "index": 0, "delta": {}}])
DONE_FRAME = b"data: [DONE]\n\n"


def _usage(tokens: int) -> bytes:
    return _frame(
        [],
        usage={
            "completion_tokens": tokens,
            "prompt_tokens": 22,
            "total_tokens": tokens + 22,
            "prompt_tokens_details": {"cached_tokens": 21},
        },
        timings={
            "cache_n": 21,
            "prompt_n": 1,
            "prompt_ms": 1.908,
            "prompt_per_token_ms": 1.908,
            "prompt_per_second": 524.1090146750524,
            "predicted_n": tokens,
            "predicted_ms": tokens * 1.5185,
            "predicted_per_token_ms": 1.5185333333333333,
            "predicted_per_second": 658.5301606813592,
        },
    )


def deltas(count: int, seed: int = 0) -> list[str]:
    """`count` content deltas, the same in every run."""
    rng = random.Random(seed)
    return [rng.choice(_TOKENS) for _ in range(count)]


def stream_frames(texts: list[str]) -> list[bytes]:
    """Every frame of a stream answering `texts`: role, contents, finish, usage, [DONE]."""
    return [ROLE_FRAME, *map(_content, texts), FINISH_FRAME, _usage(len(texts)), DONE_FRAME]


# -- the reader stand-ins -------------------------------------------------------------


def raw_frames(response: Any) -> Iterator[bytes]:
    """The raw floor's framing: ``read1``, split on blank lines, yield each ``data:`` payload."""
    read1 = response.raw.read1
    rest = b""
    while True:
        data = read1(RAW_READ)
        if not data:
            return
        *frames, rest = (rest + data).split(b"\n\n")
        for frame in frames:
            if frame.startswith(b"data: "):
                yield frame[6:]


def raw_content(payload: bytes) -> str | None:
    """The raw floor's parse: `json.loads`, then ``choices[0].delta.content``."""
    if payload == b"[DONE]":
        return None
    choices = json.loads(payload).get("choices")
    return choices[0]["delta"].get("content") if choices else None


# -- 1. throughput ----------------------------------------------------------------------


class Contenders:
    """Every streaming client, built once against `url`; `close()` closes them all.

    Each function consumes one whole stream and keeps what it got in `results`
    (the llmchat Response, the content text, or the drained byte count), to be
    checked outside the timed calls. The stdlib-parser llmchat runs in a child
    process (``LLMCHAT_JSON=stdlib``) that checks its own streams (`children`).
    With `bulk`, only the clients of `BULK_CLIENTS`.
    """

    def __init__(self, url: str, frames: int, *, bulk: bool = False) -> None:
        import requests

        import llmchat

        self.fns: dict[str, Callable[[], Any]] = {}
        self.notes: dict[str, str] = {}
        self.results: dict[str, list[Any]] = {}
        self._closers: list[Callable[[], Any]] = []
        self.children: dict[str, ChildContender] = {}

        self.backend = llmchat.OpenAICommon(url, model=MODEL)
        self._closers.append(self.backend.close)
        start = self.backend.chat_completion_stream

        def mine() -> Any:
            response = start(MESSAGES)
            for _chunk in response:
                pass
            return response

        self.fns["llmchat"] = mine
        if json_parsers_differ():
            child = ChildContender(
                "_stream_throughput:llmchat_child",
                {"url": url, "frames": frames},
                {"LLMCHAT_JSON": "stdlib"},
            )
            assert child.info["parser"] == "stdlib", child.info
            self._closers.append(child.close)
            self.children["llmchat stdlib"] = child
        else:
            self.notes["llmchat stdlib"] = STDLIB_ONLY

        def settled() -> Any:
            return start(MESSAGES).wait()

        if not bulk:
            self.fns["llmchat wait"] = settled

        session = requests.Session()
        self._closers.append(session.close)
        chat_url = url + "/chat/completions"
        body = json.dumps(
            {
                "model": MODEL,
                "messages": MESSAGES,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        headers = {"Content-Type": "application/json"}

        def raw() -> str:
            with session.post(chat_url, data=body, headers=headers, stream=True) as response:
                texts = [raw_content(payload) for payload in raw_frames(response)]
            return "".join(text for text in texts if text)

        self.fns["raw"] = raw

        def drain() -> int:
            size = 0
            with session.post(chat_url, data=body, headers=headers, stream=True) as response:
                read1 = response.raw.read1
                while data := read1(RAW_READ):
                    size += len(data)
            return size

        self.fns["drain"] = drain
        if bulk:
            self._keep()
            return

        try:
            import openai
        except ImportError:
            self.notes["openai"] = NOT_INSTALLED
        else:
            client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
            self._closers.append(client.close)
            create = client.chat.completions.create

            def sdk() -> str:
                texts = []
                stream = create(
                    model=MODEL,
                    messages=MESSAGES,  # type: ignore[arg-type]
                    stream=True,
                    stream_options={"include_usage": True},
                )
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        texts.append(chunk.choices[0].delta.content)
                return "".join(texts)

            self.fns["openai"] = sdk

        lite = litellm_stream(url, MODEL, MESSAGES)
        if lite is None:
            self.notes["litellm"] = NOT_INSTALLED
        else:
            self.fns["litellm"] = lite
            self._closers.append(close_litellm)
        self._keep()

    def _keep(self) -> None:
        """Make every in-process function keep its result; then add the children."""
        for name, fn in list(self.fns.items()):
            kept = self.results.setdefault(name, [])
            self.fns[name] = lambda fn=fn, kept=kept: kept.append(fn())
        ordered = list(self.fns.items())
        self.fns = dict(ordered[:1])
        self.fns.update(self.children)  # the stdlib row right after llmchat's, as before
        self.fns.update(ordered[1:])

    def child_errors(self) -> list[str]:
        """Every problem the child contenders found in their own streams."""
        return [f"{name}: {e}" for name, child in self.children.items() for e in child.errors]

    def close(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()


def _litellm_backlog() -> int | None:
    """Logging tasks litellm's thread pool has queued or running; None if unknown (private)."""
    try:
        from litellm.litellm_core_utils.thread_pool_executor import executor

        slots = executor._pending_slots._value  # type: ignore[attr-defined]
        return int(executor._max_pending_tasks) - int(slots)  # type: ignore[attr-defined]
    except Exception:
        return None


def _drain_litellm() -> None:
    """Not a client and never reported: wait until litellm's logging pool is idle.

    litellm hands a success-logging task per streamed chunk to its thread pool;
    left running, that backlog would be timed as part of the next client's stream.
    """
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        backlog = _litellm_backlog()
        if backlog is None:
            time.sleep(0.05)
            return
        if backlog == 0:
            return
        time.sleep(0.0005)


DRAIN = "(litellm logging backlog)"
CHECK = "(checks)"


def _check(name: str, result: Any, expected: str, size: int, frames: int) -> None:
    """Assert that one contender's stream came through whole."""
    if name.startswith("llmchat"):
        problem = llmchat_problem(result, expected, frames)
        assert problem is None, problem
    elif name == "drain":
        assert result == size, (result, size)
    else:
        assert result == expected, f"{name}'s text differs"


BULK_CLIENTS = ("llmchat", "llmchat stdlib", "raw", "drain")
"""The clients timed on the 64 KiB-write body too."""
LABELS = {
    "llmchat": "llmchat: `chat_completion_stream(messages)`, `for c in r: pass`",
    "llmchat stdlib": "llmchat, the same in a child process started with `LLMCHAT_JSON=stdlib` "
    "(the stdlib JSON parser)",
    "raw": "raw floor: `requests` `stream=True`, `raw.read1` + split + `json.loads`",
    "openai": "openai {openai}: `chat.completions.create(stream=True)`, iterate",
    "litellm": 'litellm {litellm}: `completion(model="openai/…", stream=True)`, iterate',
    "drain": "diagnostic: `raw.read1` only, bytes discarded (server + HTTP ceiling)",
    "llmchat wait": "diagnostic: llmchat, `r.wait()` without iterating (reader thread alone)",
}


# -- 2. added per-chunk latency ---------------------------------------------------------


def latency_reply(framing: str, texts: list[str]) -> Any:
    """The latency stream: a pause, then one frame per `Write`; finish, usage, [DONE] last."""
    from llmchat.testing import Pause, Reply, Write

    frames = [*map(_content, texts), FINISH_FRAME, _usage(len(texts)), DONE_FRAME]
    steps: list[Any] = []
    for frame in frames:
        steps += [Pause(LATENCY_GAP), Write(frame)]
    headers = {"Content-Type": "text/event-stream"}
    return Reply(200, headers, framing=framing, steps=steps)  # type: ignore[arg-type]


def stamped_backend(url: str) -> Any:
    """An `OpenAICommon` whose Responses also stamp when the reader thread adds a chunk.

    Uses the documented `make_stream_response` override point; the stamp is one
    `monotonic()` and an append per content chunk, taken before `_add_chunks`
    notifies the consumer. It splits the added latency into the reader's part
    and the hand-off to the consumer.
    """
    import llmchat
    from llmchat.response import Response

    class StampedResponse(Response):
        def __init__(self, request: Any) -> None:
            super().__init__(request)
            self.added_at: list[float] = []
            writer = getattr(self, "_writer", None)  # the runners' writer (private: may move)
            if writer is not None:
                # Every publish goes through `publish_locked` (the baton calls it itself).
                name = "publish_locked" if hasattr(writer, "publish_locked") else "publish"
                publish = getattr(writer, name)

                def stamped(chunks: Any) -> None:
                    now = time.monotonic()
                    self.added_at.extend(now for chunk in chunks if chunk.content)
                    publish(chunks)

                setattr(writer, name, stamped)

        def _add_chunks(self, chunks: Any) -> None:
            now = time.monotonic()
            self.added_at.extend(now for chunk in chunks if chunk.content)
            super()._add_chunks(chunks)

        def _publish(self, chunks: Any) -> None:  # before `ResponseWriter` (private: may move)
            now = time.monotonic()
            self.added_at.extend(now for chunk in chunks if chunk.content)
            super()._publish(chunks)

    class Stamped(llmchat.OpenAICommon):
        def make_stream_response(self, request: Any) -> Response:
            return StampedResponse(request)

    return Stamped(url, model=MODEL)


def llmchat_arrivals(backend: Any) -> tuple[list[float], list[str], Any]:
    """Stream once; `(arrival time of each content chunk, its text, the Response)`."""
    monotonic = time.monotonic
    stamps: list[float] = []
    texts: list[str] = []
    response = backend.chat_completion_stream(MESSAGES)
    for chunk in response:
        now = monotonic()
        if chunk.content:
            stamps.append(now)
            texts.append(chunk.content)
    return stamps, texts, response


def raw_arrivals(session: Any, url: str) -> tuple[list[float], list[str], Any]:
    """The raw floor's stream: `(arrival time of each content frame, its text, status)`."""
    monotonic = time.monotonic
    stamps: list[float] = []
    texts: list[str] = []
    body = json.dumps({"model": MODEL, "messages": MESSAGES, "stream": True}).encode()
    headers = {"Content-Type": "application/json"}
    with session.post(url + "/chat/completions", data=body, headers=headers, stream=True) as r:
        for payload in raw_frames(r):
            text = raw_content(payload)
            now = monotonic()
            if text:
                stamps.append(now)
                texts.append(text)
        status = r.status_code
    return stamps, texts, status


def measure_latency(server: Any, url: str, streams: int) -> dict[tuple[str, str], list[float]]:
    """Added latency samples (µs) by `(reader, framing)`, the streams interleaved."""
    import requests

    texts = deltas(LATENCY_FRAMES, seed=1)
    backend = stamped_backend(url)
    session = requests.Session()
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(streams):
            for framing in ("chunked", "close"):
                reply = latency_reply(framing, texts)
                for who in ("llmchat", "raw"):
                    index = len(server.requests)
                    server.push(reply)
                    added: list[float] = []
                    if who == "llmchat":
                        stamps, got, response = llmchat_arrivals(backend)
                        assert response.is_success, response.err
                        added = response.added_at
                    else:
                        stamps, got, status = raw_arrivals(session, url)
                        assert status == 200, status
                    assert got == texts, f"{who} {framing}: wrong text"
                    record = server.requests[index]
                    assert record.finished.wait(WAIT)
                    assert len(record.writes) == LATENCY_WRITES, len(record.writes)
                    sent = [when for when, _size in record.writes[:LATENCY_FRAMES]]
                    samples.setdefault((who, framing), []).extend(
                        (got_at - sent_at) * 1e6
                        for got_at, sent_at in zip(stamps, sent, strict=True)
                    )
                    if added:
                        samples.setdefault(("reader", framing), []).extend(
                            (at - sent_at) * 1e6 for at, sent_at in zip(added, sent, strict=True)
                        )
                        samples.setdefault(("handoff", framing), []).extend(
                            (got_at - at) * 1e6 for got_at, at in zip(stamps, added, strict=True)
                        )
            samples.setdefault(("bare", ""), []).extend(handoff_samples(LATENCY_FRAMES))
    finally:
        backend.close()
        session.close()
    return samples


def handoff_samples(count: int) -> list[float]:
    """µs from `Condition.notify()` in one thread to the waiting thread running again.

    The reference for llmchat's reader → consumer hand-off, with nothing else:
    the waiter is idle in `wait()` between notifies, as a consumer is between frames.
    """
    cond = threading.Condition()
    sent: list[float] = []
    woke: list[float] = []

    def waiter() -> None:
        with cond:
            for index in range(count):
                while len(sent) <= index:
                    cond.wait()
                woke.append(time.monotonic())

    thread = threading.Thread(target=waiter, name="bench-handoff", daemon=True)
    thread.start()
    for _ in range(count):
        time.sleep(LATENCY_GAP)
        with cond:
            sent.append(time.monotonic())
            cond.notify()
    thread.join(WAIT)
    assert not thread.is_alive() and len(woke) == count
    return [(b - a) * 1e6 for a, b in zip(sent, woke, strict=True)]


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q` percentile (0-100) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# -- 3. cancel ----------------------------------------------------------------------------


class Trial:
    """One cancel: when it was called, when the call returned, when the server saw the hang-up."""

    def __init__(self, called: float, returned: float, noticed: float | None, reader: float | None):
        self.call_us = (returned - called) * 1e6
        self.server_us = None if noticed is None else (noticed - called) * 1e6
        self.reader_us = None if reader is None else (reader - called) * 1e6


def _new_stream_thread(before: set[threading.Thread]) -> threading.Thread | None:
    """The llmchat reader thread started since `before` was taken."""
    for thread in threading.enumerate():
        if thread.name == "llmchat-stream" and thread not in before:
            return thread
    return None


def cancel_llmchat(server: Any, backend: Any, reply: Any, *, prefill: bool) -> Trial:
    """Start a stream, wait for the first chunk (or, in prefill, for the server to
    hold the request), then time `response.cancel()`."""
    index = len(server.requests)
    server.push(reply)
    before = set(threading.enumerate())
    response = backend.chat_completion_stream(MESSAGES)
    if prefill:
        assert server.wait_for_requests(index + 1, WAIT), "the request never arrived"
    else:
        first = next(iter(response))
        assert first.content, f"first chunk has no content: {first!r}"
    reader = _new_stream_thread(before)
    record = server.requests[index]
    assert not record.disconnected.is_set()
    called = time.monotonic()
    response.cancel()
    returned = time.monotonic()
    reader_done = None
    if reader is not None:
        reader.join(WAIT)
        reader_done = None if reader.is_alive() else time.monotonic()
    record.disconnected.wait(WAIT)
    assert response.is_cancelled, response
    return Trial(called, returned, record.disconnected_at, reader_done)


def cancel_openai(server: Any, client: Any, reply: Any) -> Trial:
    """The openai SDK mid-stream: the first chunk, then `stream.close()`."""
    index = len(server.requests)
    server.push(reply)
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.content, first
    record = server.requests[index]
    called = time.monotonic()
    stream.close()
    returned = time.monotonic()
    record.disconnected.wait(WAIT)
    return Trial(called, returned, record.disconnected_at, None)


def openai_prefill_close(reply: Any, patience: float) -> dict[str, Any]:
    """What openai can do while `create()` waits for headers: close the client from
    another thread (it has no per-request cancel). On a server of its own, since
    the blocked call only ends when that server stops."""
    import openai

    from llmchat.testing import ScriptedServer

    outcome: dict[str, Any] = {"patience": patience}
    server = ScriptedServer(reply)
    with server as url:
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)

        def call() -> None:
            try:
                client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
                outcome["result"] = "returned a stream"
            except Exception as exc:
                outcome["result"] = f"raised {type(exc).__name__}"
            outcome["ended"] = time.monotonic()

        caller = threading.Thread(target=call, name="bench-openai-prefill", daemon=True)
        caller.start()
        assert server.wait_for_requests(1, WAIT), "the request never arrived"
        record = server.requests[0]
        called = time.monotonic()
        client.close()
        outcome["call_us"] = (time.monotonic() - called) * 1e6
        noticed = record.disconnected.wait(patience)
        outcome["server_us"] = (record.disconnected_at - called) * 1e6 if noticed else None
        caller.join(0.2)
        outcome["blocked_until_stop"] = caller.is_alive()
        stopped = time.monotonic()
    caller.join(WAIT)
    assert not caller.is_alive(), "the openai call outlived its server"
    ended = outcome.pop("ended", None)
    outcome["ended_after_stop_ms"] = None if ended is None else (ended - stopped) * 1e3
    return outcome


def measure_cancel(
    server: Any, url: str, count: int, mid: Any, prefill: Any, with_openai: bool
) -> tuple[dict[str, list[Trial]], dict[str, float]]:
    """`count` trials of each cancel, interleaved; then a cProfile of `cancel()`."""
    import llmchat

    trials: dict[str, list[Trial]] = {"mid": [], "prefill": []}
    backend = llmchat.OpenAICommon(url, model=MODEL)
    client = None
    try:
        if with_openai:
            import openai

            client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
            trials["openai mid"] = []
        for _ in range(count):
            trials["mid"].append(cancel_llmchat(server, backend, mid, prefill=False))
            trials["prefill"].append(cancel_llmchat(server, backend, prefill, prefill=True))
            if client is not None:
                trials["openai mid"].append(cancel_openai(server, client, mid))
        return trials, profile_cancel(server, backend, mid)
    finally:
        backend.close()
        if client is not None:
            client.close()


# -- where llmchat's time goes ----------------------------------------------------------


def _same(value: Any) -> Any:
    return value


def _pipeline_step(backend: Any) -> Callable[..., None] | None:
    """The reader's per-read work as one callable `(events, acc, response, exchange)`.

    Private names (`backends._runners`' `_apply` and `_publish`); None if they moved.
    """
    try:
        from llmchat.backends import _runners
    except ImportError:
        return None
    publish = getattr(_runners, "_publish", None)
    if publish is None or not hasattr(_runners, "pump_reads"):
        return None
    lift = backend._lift_usage
    try:  # the runners write through the Response's writer (since step 3)
        from llmchat.response import writer_of as found

        writer_of: Callable[[Any], Any] = found
    except ImportError:
        writer_of = _same

    def step(events: Any, acc: Any, response: Any, exchange: Any) -> None:
        # As `_runners.pump_reads` does per read: one batch of events, then one publish.
        finished = acc.finish_reason is not None
        out = writer_of(response)
        chunks = acc.feed_events(events, functools.partial(lift, response), None)
        publish(out, acc, exchange, None, chunks, finished)

    return step


def stage_costs(backend: Any, body: bytes, frame_list: list[bytes]) -> dict[str, float]:
    """µs per frame of each pipeline stage run alone on the throughput body, no I/O.

    Fed in 64 KiB pieces and one frame per feed (as one chunk per event reads it).
    Private names (the stages' wiring in `_runners.pump`); a stage that moved is left out.
    """
    frames = len(frame_list)
    from llmchat.pipeline.accumulate import Accumulator
    from llmchat.response import Response
    from llmchat.sse import SSEDecoder
    from llmchat.transport import Exchange

    pieces = [body[i : i + WRITE_SIZE] for i in range(0, len(body), WRITE_SIZE)]
    events = SSEDecoder().feed(body)

    def floor() -> None:
        rest = b""
        for piece in pieces:
            *found, rest = (rest + piece).split(b"\n\n")
            for frame in found:
                raw_content(frame[6:])

    def decode() -> None:
        decoder = SSEDecoder()
        for piece in pieces:
            decoder.feed(piece)

    def decode_frames() -> None:
        decoder = SSEDecoder()
        for frame in frame_list:
            decoder.feed(frame)

    def floor_frames() -> None:
        rest = b""
        for frame in frame_list:
            *found, rest = (rest + frame).split(b"\n\n")
            for payload in found:
                raw_content(payload[6:])

    def parse() -> None:
        acc = Accumulator("chat")
        for event in events:
            acc.feed_event(event)

    costs = {
        "floor": floor,
        "floor frames": floor_frames,
        "decode": decode,
        "decode frames": decode_frames,
        "parse": parse,
    }
    step = _pipeline_step(backend)
    if step is not None:

        def whole() -> None:
            decoder = SSEDecoder()
            acc = Accumulator("chat", keep_raw=False)
            response = Response({})
            exchange = Exchange()
            for piece in pieces:
                step(decoder.feed_data(piece), acc, response, exchange)
            exchange.finish()

        def whole_frames() -> None:
            decoder = SSEDecoder()
            acc = Accumulator("chat", keep_raw=False)
            response = Response({})
            exchange = Exchange()
            for frame in frame_list:
                step(decoder.feed_data(frame), acc, response, exchange)
            exchange.finish()

        costs["apply"] = whole
        costs["apply frames"] = whole_frames
    return {name: best_of(fn, 9, calls_for(fn, 0.2)) / frames * 1e6 for name, fn in costs.items()}


def cold_costs(backend: Any, texts: list[str]) -> dict[str, float] | None:
    """Median µs to process one frame, back to back and after `LATENCY_GAP` idle.

    One thread, no I/O: llmchat's decode + the reader's per-read step (private;
    None if it moved) and the floor's split + `json.loads`, frame by frame, interleaved.
    After an idle gap the code runs cold, which is what a consumer of a
    token-paced stream pays on every frame.
    """
    from llmchat.pipeline.accumulate import Accumulator
    from llmchat.response import Response
    from llmchat.sse import SSEDecoder
    from llmchat.transport import Exchange

    step = _pipeline_step(backend)
    if step is None:
        return None
    frames = [_content(text) for text in texts]
    out: dict[str, list[float]] = {}
    for label, gap in (("hot", 0.0), ("cold", LATENCY_GAP)):
        decoder, acc, response, exchange = (
            SSEDecoder(),
            Accumulator("chat", keep_raw=False),
            Response({}),
            Exchange(),
        )
        for frame in frames:
            if gap:
                time.sleep(gap)
            start = time.perf_counter()
            step(decoder.feed_data(frame), acc, response, exchange)
            mine = time.perf_counter() - start
            if gap:
                time.sleep(gap)
            start = time.perf_counter()
            for payload in frame.split(b"\n\n")[:-1]:
                raw_content(payload[6:])
            floor = time.perf_counter() - start
            out.setdefault(f"llmchat {label}", []).append(mine * 1e6)
            out.setdefault(f"floor {label}", []).append(floor * 1e6)
        exchange.finish()
    return {name: statistics.median(values) for name, values in out.items()}


def _parser_sentence(versions: dict[str, str]) -> str:
    """Which JSON parser the llmchat rows used."""
    if not json_parsers_differ():
        return "llmchat parsed JSON with the stdlib (orjson, the `fast` extra, is not installed)."
    return (
        f"The llmchat rows parse JSON with orjson {versions.get('orjson', '?')} (the `fast` "
        "extra, used when installed), except the `LLMCHAT_JSON=stdlib` row: the same "
        "client with the stdlib parser, in a child process started with that variable (it "
        "times its own streams and checks them), in the same rounds."
    )


def _where(filename: str, line: int, function: str) -> str:
    if filename == "~":
        return f"`{function}`"
    name = filename if filename.startswith("<") else "/".join(Path(filename).parts[-2:])
    return f"`{function}` ({name}:{line})"


Rows = list[list[str]]


def _cumulative(stats: dict[Any, Any], path_end: str, function: str) -> float:
    """Summed cumulative seconds of `function` in files ending with `path_end` (0 if absent)."""
    return sum(
        entry[3]
        for (filename, _line, name), entry in stats.items()
        if name == function and filename.replace("\\", "/").endswith(path_end)
    )


def profile_worker(
    backend: Any, frames: int, streams: int = 5, top: int = 10
) -> tuple[Rows, Rows, dict[str, float]]:
    """cProfile the reader thread's work: `_stream_worker` run in this thread, `streams` times.

    cProfile sees only the thread it runs in, so the worker (private: the
    function `_start_stream` hands to its thread) is called directly here, on
    the throughput stream. Returns the time split by stage (cumulative times of
    the stages' entry points), the top functions by own time, and call counts,
    all per frame.
    """
    from llmchat.transport import Exchange

    worker = backend._stream_worker
    profiler = cProfile.Profile()
    for _ in range(streams):
        request = backend.prepare_chat_request(MESSAGES, stream=True)
        response = backend.make_stream_response(request.body)
        exchange = Exchange()
        exchange.arm_deadline(backend.timeouts.request)
        profiler.enable()
        worker(request, response, exchange, "chat")
        profiler.disable()
        assert response.is_success, response.err
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    per = streams * (frames + 4)
    whole = _cumulative(stats, "backends/_runners.py", "stream_worker")
    pump = _cumulative(stats, "backends/_runners.py", "pump_reads")
    decode = _cumulative(stats, "llmchat/sse.py", "feed_data")
    publish = _cumulative(stats, "llmchat/response_writer.py", "publish") + _cumulative(
        stats, "llmchat/response_writer.py", "publish_locked"
    )
    parse = _cumulative(stats, "pipeline/accumulate.py", "feed_events")
    lean = sum(
        _cumulative(stats, "llmchat/fastjson.py", name) for name in ("loads", "orjson_loads")
    )
    loads = lean or _cumulative(stats, "json/__init__.py", "loads")
    stages = [
        ("request, headers, settle (`stream_worker` outside `pump_reads`)", whole - pump),
        ("HTTP body reads (`iter_bytes` → urllib3 `read1`)", pump - decode - parse - publish),
        ("SSE framing: `SSEDecoder.feed_data` (frames, UTF-8 decode)", decode),
        ("JSON parse of each frame (`fastjson.loads`, inside `feed_events`)", loads),
        ("decode + accumulate (+ usage lifting): `feed_events` minus `json.loads`", parse - loads),
        ("Response updates: `ResponseWriter.publish` (chunks, one wake-up per read)", publish),
    ]
    split = [
        [label, f"{seconds / per * 1e6:,.2f}", f"{seconds / whole:.0%}"]
        for label, seconds in stages
    ]
    ranked = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    own_top = [
        [
            _where(*key),
            f"{ncalls / per:,.2f}",
            f"{own / per * 1e6:,.2f}",
            f"{cumulative / per * 1e6:,.2f}",
            f"{own / whole:.0%}",
        ]
        for key, (_prim, ncalls, own, cumulative, _callers) in ranked
    ]

    def calls(test: Callable[[str, str], bool]) -> float:
        return sum(e[1] for (f, _l, n), e in stats.items() if test(f, n)) / per

    counts = {
        "calls": calls(lambda f, n: True),
        "isinstance": calls(lambda f, n: n == "<built-in method builtins.isinstance>"),
        "abc": calls(lambda f, n: n == "__instancecheck__" and "abc" in f),
        "get": calls(lambda f, n: n == "<method 'get' of 'dict' objects>"),
        "line": calls(lambda f, n: n == "_line" and f.endswith("sse.py")),
        "reads": calls(lambda f, n: n == "feed" and f.endswith("sse.py")),
        "usage_fields": calls(lambda f, n: n == "usage_fields"),
        "finished": calls(lambda f, n: n == "finished" and f.endswith("accumulate.py")),
        "notify_all": calls(lambda f, n: n == "notify_all" and f.endswith("threading.py")),
        "threading": calls(lambda f, n: f.endswith("threading.py")),
    }
    return split, own_top, counts


def profile_consumer(backend: Any, streams: int = 5) -> dict[str, float]:
    """cProfile the consumer thread alone (`for c in r: pass`) while the reader runs.

    Per stream: how often the consumer blocked in `Condition.wait` (each one
    a thread hand-off) and its own CPU per chunk. The profiler slows the
    consumer, so it blocks less often than unprofiled; read it as a lower bound.
    """
    profiler = cProfile.Profile()
    chunks = 0
    for _ in range(streams):
        response = backend.chat_completion_stream(MESSAGES)
        profiler.enable()
        for _chunk in response:
            chunks += 1
        profiler.disable()
        assert response.is_success, response.err
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    waits = sum(
        entry[1]
        for (filename, _line, name), entry in stats.items()
        if name == "wait" and filename.endswith("threading.py")
    )
    waiting = _cumulative(stats, "threading.py", "wait")
    iterating = _cumulative(stats, "llmchat/response.py", "__iter__")
    return {
        "chunks": chunks / streams,
        "waits": waits / streams,
        "cpu_us": (iterating - waiting) / chunks * 1e6,
    }


def profile_cancel(server: Any, backend: Any, reply: Any, trials: int = 20) -> dict[str, float]:
    """cProfile `response.cancel()` mid-stream: where the call's time goes.

    Returns the share of the call spent in `shutdown()` and in closing the
    `requests` response (whose `BufferedReader.close` waits for the reader
    thread to leave the read it is blocked in).
    """
    profiler = cProfile.Profile()
    for _ in range(trials):
        index = len(server.requests)
        server.push(reply)
        response = backend.chat_completion_stream(MESSAGES)
        next(iter(response))
        profiler.enable()
        response.cancel()
        profiler.disable()
        server.requests[index].disconnected.wait(WAIT)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    whole = _cumulative(stats, "llmchat/response.py", "cancel")
    shutdown = sum(entry[3] for key, entry in stats.items() if "method 'shutdown'" in key[2])
    closing = _cumulative(stats, "requests/models.py", "close")
    buffered = sum(
        entry[3] for key, entry in stats.items() if "'close' of '_io.BufferedReader'" in key[2]
    )
    return {
        "call_us": whole / trials * 1e6,
        "shutdown": shutdown / whole,
        "close": closing / whole,
        "buffered": buffered / whole,
    }


# -- the run ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements against one server; print and record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="throughput rounds (median of)")
    parser.add_argument("--calls", type=int, default=1, help="streams per client per round")
    parser.add_argument(
        "--latency-streams", type=int, default=5, help="latency streams per client and framing"
    )
    parser.add_argument("--cancel-trials", type=int, default=100, help="cancels of each kind")
    parser.add_argument("--profile", action="store_true", help="profile even if on target")
    parser.add_argument(
        "--frames", type=int, default=FRAMES, help=f"content frames per stream ({FRAMES:,})"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK_FRAMES:,} frames, 3 rounds, few latency streams and "
        "cancels, no profile; prints, never writes BENCHMARKS.md",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.frames, args.rounds, args.latency_streams = QUICK_FRAMES, 3, 1
        args.cancel_trials, args.no_write = 3, True
    frame_count: int = args.frames

    from llmchat.testing import Reply, ScriptedServer, Stall, Write

    versions = package_versions("openai", "litellm", "orjson")

    texts = deltas(frame_count)
    expected = "".join(texts)
    frames = stream_frames(texts)
    body = b"".join(frames)
    writes = [Write(body[i : i + WRITE_SIZE]) for i in range(0, len(body), WRITE_SIZE)]
    sse_headers = {"Content-Type": "text/event-stream"}
    per_event_reply = Reply(
        200, sse_headers, framing="chunked", steps=[Write(frame) for frame in frames]
    )

    # The throughput server runs in its own process (`_stream_server.py`): the
    # clients timed never share an interpreter, or its GIL, with it.
    stream_server = StreamServer("_stream_throughput:router", {"frames": frame_count})
    server = ScriptedServer(per_event_reply)  # latency and cancel: write stamps, hang-ups
    closers: list[Callable[[], Any]] = [stream_server.stop]
    with loopback_only(), server as url:
        try:
            # -- 1. throughput --------------------------------------------------------
            contenders = Contenders(stream_server.url + EVENTS, frame_count)
            closers.append(contenders.close)
            connections: dict[str, set[int]] = {}
            for name, fn in contenders.fns.items():
                start = len(stream_server.log())
                fn()
                fn()
                if name == "litellm":
                    _drain_litellm()
                connections[name] = {e["connection"] for e in stream_server.log(start)}
            checked = 0

            def check() -> None:
                """Untimed, unreported, last in each round: check and drop the results."""
                nonlocal checked
                for name, results in contenders.results.items():
                    for result in results:
                        _check(name, result, expected, len(body), frame_count)
                    checked += len(results)
                    results.clear()
                gc.collect()  # every round starts from the same heap

            timed = dict(contenders.fns)
            if "litellm" in timed:
                timed[DRAIN] = _drain_litellm
            timed[CHECK] = check
            rounds = interleaved_rounds(timed, args.rounds, args.calls)
            seconds = {name: statistics.median(values) for name, values in rounds.items()}
            ratios = median_ratios(rounds, "raw")
            served_log = stream_server.log()
            streams_served = len(served_log)
            connections_used = len({e["connection"] for e in served_log})
            assert served_log[-1]["writes"] == len(frames), (served_log[-1], len(frames))
            # The server's own pace: the drain's last request, headers to last write.
            contenders.fns["drain"]()
            drain_record = stream_server.log(streams_served)[0]
            send_ms = (drain_record["last_write_at"] - drain_record["headers_at"]) * 1e3
            child_streams = sum(c.streams for c in contenders.children.values())
            assert not contenders.child_errors(), contenders.child_errors()
            checked += child_streams

            stages = stage_costs(contenders.backend, body, frames)

            # -- 1b. the same body in 64 KiB writes: hundreds of frames per read ----------
            bulk_contenders = Contenders(stream_server.url + BULK, frame_count, bulk=True)
            closers.append(bulk_contenders.close)
            bulk_fns = dict(bulk_contenders.fns)

            def bulk_check() -> None:
                for name, results in bulk_contenders.results.items():
                    for result in results:
                        _check(name, result, expected, len(body), frame_count)
                    results.clear()
                gc.collect()

            bulk_fns[CHECK] = bulk_check
            bulk_rounds = interleaved_rounds(bulk_fns, args.rounds)
            bulk = {name: statistics.median(values) for name, values in bulk_rounds.items()}
            bulk_ratios = median_ratios(bulk_rounds, "raw")
            assert not bulk_contenders.child_errors(), bulk_contenders.child_errors()
            print(
                f"64 KiB writes (median): llmchat {bulk['llmchat'] * 1e3:.1f} ms, "
                f"raw {bulk['raw'] * 1e3:.1f} ms, "
                f"{bulk_ratios['llmchat']:.2f}x the floor (median of rounds' ratios)"
            )

            # -- 2. per-chunk latency -------------------------------------------------
            samples = measure_latency(server, url, args.latency_streams)
            cold = cold_costs(contenders.backend, deltas(LATENCY_FRAMES, seed=1))

            # -- 3. cancel --------------------------------------------------------------
            first = _content(texts[0])
            mid_reply = Reply(200, sse_headers, framing="chunked", steps=[Write(first), Stall()])
            prefill_reply = Reply(
                200, sse_headers, framing="chunked", steps=[Write(first)], before_headers=[Stall()]
            )
            with_openai = "openai" in contenders.fns
            trials, cancel_profile = measure_cancel(
                server, url, args.cancel_trials, mid_reply, prefill_reply, with_openai
            )

            # -- the profile ------------------------------------------------------------
            ratio_raw = ratios["llmchat"]
            ratio_openai = (
                median_ratios(rounds, "openai")["llmchat"] if "openai" in rounds else None
            )
            p99 = {
                framing: percentile(samples[("llmchat", framing)], 99)
                for framing in ("chunked", "close")
            }
            missed = (
                ratio_raw < TARGET_RAW
                or (ratio_openai is not None and ratio_openai < TARGET_OPENAI)
                or max(p99.values()) >= TARGET_P99_US
            )
            server.set_script(per_event_reply)
            split_rows: Rows = []
            own_rows: Rows = []
            consumer: dict[str, float] = {}
            counts: dict[str, float] = {}
            if args.profile or (missed and not args.quick):
                split_rows, own_rows, counts = profile_worker(contenders.backend, frame_count)
                consumer = profile_consumer(contenders.backend)
        finally:
            for close in reversed(closers):
                with contextlib.suppress(Exception):
                    close()
    prefill_openai = None
    if "openai mid" in trials:
        with loopback_only():
            prefill_openai = openai_prefill_close(
                Reply(200, sse_headers, before_headers=[Stall()], framing="chunked"), 2.0
            )

    for thread in threading.enumerate():  # readers end on their own once settled
        if thread.name == "llmchat-stream":
            thread.join(WAIT)
    leftover = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    others = [n for n in leftover if n != "llmchat-deadlines"]
    assert not others, f"threads left running: {others}"
    assert not blocked, f"network access attempted: {blocked}"

    # -- the tables -----------------------------------------------------------------------
    count = len(frames)

    def row(
        name: str,
        label: str,
        medians: dict[str, float],
        all_rounds: dict[str, list[float]],
        speed: dict[str, float],
    ) -> list[str]:
        if name not in medians:
            return [f"{label}: {contenders.notes.get(name, '?')}", "—", "—", "—", "—", "—"]
        secs = medians[name]
        spread = all_rounds[name]
        return [
            label,
            f"{secs * 1e3:,.1f}",
            f"{min(spread) * 1e3:,.0f}-{max(spread) * 1e3:,.0f}",
            f"{count / secs:,.0f}",
            f"{secs / count * 1e6:,.1f}",
            f"{speed[name]:.2f}x",
        ]

    throughput_rows = [
        row(name, LABELS[name].format(**versions), seconds, rounds, ratios)
        for name in (
            "llmchat",
            "llmchat stdlib",
            "raw",
            "openai",
            "litellm",
            "drain",
            "llmchat wait",
        )
        if name in seconds or (name in contenders.notes and name != "llmchat stdlib")
    ]
    bulk_rows = [
        row(name, LABELS[name].format(**versions), bulk, bulk_rounds, bulk_ratios)
        for name in BULK_CLIENTS
        if name in bulk
    ]
    throughput_header = [
        "client",
        "ms / stream",
        "rounds' range ms",
        "frames / s",
        "µs / frame",
        "x floor speed (median of rounds' ratios)",
    ]
    stage_rows = [
        ["raw floor's work: split on blank lines + `json.loads` + read the delta", stages["floor"]],
        ["the same, one frame per read", stages["floor frames"]],
        ["llmchat `SSEDecoder.feed` (64 KiB pieces)", stages["decode"]],
        ["llmchat `SSEDecoder.feed` (one frame per feed)", stages["decode frames"]],
        ["llmchat `Accumulator.feed_event` (events → `Chunk`s)", stages["parse"]],
    ]
    if "apply" in stages:
        stage_rows += [
            [
                "llmchat framing + the reader's step (decode, accumulate, `_lift_usage`, "
                "publish), 64 KiB pieces",
                stages["apply"],
            ],
            ["the same, one frame per read", stages["apply frames"]],
        ]
    stage_cells = [[label, f"{value:.2f}"] for label, value in stage_rows]

    def latency_row(label: str, values: list[float], negatives: bool = True) -> list[str]:
        return [
            label,
            f"{len(values):,}",
            f"{statistics.median(values):,.0f}",
            f"{percentile(values, 99):,.0f}",
            f"{min(values):,.0f}",
            f"{max(values):,.0f}",
            f"{sum(v > TARGET_P99_US for v in values)}",
            f"{sum(v < 0 for v in values)}" if negatives else "",
        ]

    latency_rows = []
    for framing, what in (("chunked", "chunked"), ("close", "close-delimited")):
        latency_rows += [
            latency_row(f"**llmchat, {what}**", samples[("llmchat", framing)]),
            latency_row(
                "of which: server write → reader thread adds the chunk",
                samples[("reader", framing)],
            ),
            latency_row(
                "of which: chunk added → consumer has it (hand-off)",
                samples[("handoff", framing)],
            ),
            latency_row(f"raw floor, {what}", samples[("raw", framing)]),
        ]
    latency_rows.append(
        latency_row(
            "reference: a bare `Condition.notify()` → the waiting thread runs",
            samples[("bare", "")],
            negatives=False,
        )
    )
    gap = {
        framing: statistics.median(samples[("llmchat", framing)])
        - statistics.median(samples[("raw", framing)])
        for framing in ("chunked", "close")
    }
    over = f"> {TARGET_P99_US / 1e3:g} ms"
    latency_header = ["reader, body framing", "chunks", "median µs", "p99 µs", "min", "max"]
    latency_header += [over, "< 0"]

    def spread(values: list[float | None]) -> tuple[str, str]:
        known = [v for v in values if v is not None]
        if not known:
            return "—", "—"
        return f"{statistics.median(known):,.0f}", f"{percentile(known, 99):,.0f}"

    cancel_rows = []
    cancel_labels = {
        "mid": "llmchat `response.cancel()` after the first chunk",
        "prefill": "llmchat `response.cancel()` in prefill (before headers)",
        "openai mid": f"openai {versions['openai']} `stream.close()` after the first chunk",
    }
    for key, trial_list in trials.items():
        call = spread([t.call_us for t in trial_list])
        noticed = spread([t.server_us for t in trial_list])
        reader = spread([t.reader_us for t in trial_list])
        missing = sum(t.server_us is None for t in trial_list)
        cancel_rows.append(
            [
                cancel_labels[key],
                f"{len(trial_list)}",
                *call,
                *noticed,
                *(reader if key != "openai mid" else ("n/a", "n/a")),
                f"{missing}",
            ]
        )
    cancel_header = [
        "cancel",
        "trials",
        "call median µs",
        "call p99 µs",
        "server sees it median µs",
        "p99 µs",
        "reader exits median µs",
        "p99 µs",
        "unseen",
    ]
    if prefill_openai is not None:
        server_seen = (
            f"{prefill_openai['server_us']:,.0f}"
            if prefill_openai["server_us"] is not None
            else f"never (waited {prefill_openai['patience']:g} s)"
        )
        cancel_rows.append(
            [
                f"openai {versions['openai']}: `client.close()` from another thread in prefill",
                "1",
                f"{prefill_openai['call_us']:,.0f}",
                "",
                server_seen,
                "",
                "n/a",
                "",
                "",
            ]
        )

    # -- print ----------------------------------------------------------------------------
    width = max(len(cells[0]) for cells in throughput_rows)
    print(
        f"throughput, {count:,} frames ({len(body):,} bytes) per stream, one chunk per event, "
        f"median of {args.rounds}:"
    )
    for cells in [throughput_header, *throughput_rows]:
        print(f"  {cells[0]:<{width}} " + " ".join(f"{c:>14}" for c in cells[1:]))
    print(f"the same body in {len(writes)} writes of 64 KiB, median of {args.rounds}:")
    for cells in bulk_rows:
        print(f"  {cells[0]:<{width}} " + " ".join(f"{c:>14}" for c in cells[1:]))
    verdict_raw = "meets" if ratio_raw >= TARGET_RAW else "MISSES"
    print(f"llmchat / raw = {ratio_raw:.2f}x ({verdict_raw} the {TARGET_RAW:g}x target)")
    if ratio_openai is not None:
        verdict_oai = "meets" if ratio_openai >= TARGET_OPENAI else "MISSES"
        print(
            f"llmchat / openai = {ratio_openai:.2f}x ({verdict_oai} the {TARGET_OPENAI:g}x target)"
        )
    print(
        f"server: {len(frames)} writes; headers to last write {send_ms:.1f} ms in the drain run; "
        f"{streams_served} streams on {connections_used} connections in the throughput part; "
        f"connections per client in warm-up: { {n: len(c) for n, c in connections.items()} }"
    )
    print("stages alone, µs per frame:")
    for label, value in stage_rows:
        print(f"  {label:<78} {value:8.2f}")
    print(f"added per-chunk latency ({args.latency_streams} streams of {LATENCY_FRAMES} each):")
    lat_width = max(len(cells[0]) for cells in latency_rows)
    for cells in [latency_header, *latency_rows]:
        print(f"  {cells[0]:<{lat_width}} " + " ".join(f"{c:>10}" for c in cells[1:]))
    if cold is not None:
        print("one frame alone, µs (median): " + ", ".join(f"{k} {v:.1f}" for k, v in cold.items()))
    print("cancel:")
    for cells in [cancel_header, *cancel_rows]:
        print(f"  {cells[0]:<78} " + " ".join(f"{c:>10}" for c in cells[1:]))
    if prefill_openai is not None:
        print(f"  openai prefill experiment: {prefill_openai}")
    print(
        f"cProfile of cancel(): {cancel_profile['call_us']:,.0f} µs per call (profiled); "
        f"shutdown() {cancel_profile['shutdown']:.0%}, requests Response.close() "
        f"{cancel_profile['close']:.0%} (BufferedReader.close {cancel_profile['buffered']:.0%})"
    )
    if split_rows:
        print("cProfile of `_stream_worker` run synchronously, per frame, by stage:")
        for cells in split_rows:
            print(f"  {cells[0]:<70} " + " ".join(f"{c:>8}" for c in cells[1:]))
        print("top functions by own time, per frame:")
        for cells in own_rows:
            print(f"  {cells[0]:<70} " + " ".join(f"{c:>8}" for c in cells[1:]))
        print("calls per frame: " + ", ".join(f"{k} {v:.2f}" for k, v in counts.items()))
        print(
            f"consumer thread: {consumer['waits']:,.0f} Condition.wait per stream of "
            f"{consumer['chunks']:,.0f} chunks; {consumer['cpu_us']:.2f} µs own CPU per chunk"
        )
    print(f"threads left after closing everything: {leftover or 'none'}")

    # -- the section ------------------------------------------------------------------------
    reuse = {name: len(ids) for name, ids in connections.items()}
    reconnecting = [name for name in ("llmchat", "openai", "litellm") if reuse.get(name, 1) > 1]
    markdown = [
        stamp(),
        "",
        "### Throughput: frames per second through the whole pipeline",
        "",
        f"One stream is {count:,} SSE frames ({len(body):,} bytes): a role frame, {frame_count:,} "
        "`chat.completion.chunk` frames each carrying a token-sized content delta (mean "
        f"{len(expected) / frame_count:.1f} characters, a few non-ASCII), the finish chunk, a "
        "usage event and `[DONE]`, every frame shaped like llama-server's (member order, "
        "ids and model path from `captures/llamacpp/chat_stream_include_usage.sse.txt`). "
        "The body is built once and **every event is its own HTTP chunk** (one chunked "
        "write per frame, as llama-server, vLLM and OpenAI write a stream), so every frame "
        "is its own read for every client. **The server runs in its own process** "
        "(`bench/_stream_server.py`, which plays the same `llmchat.testing` Reply from another "
        "interpreter, a thread per connection), so it shares no interpreter or GIL with the "
        "clients. Each call posts the request and consumes "
        "the whole stream. At the end of each round, untimed, every client's result was "
        "checked (the text it collected equals the expected text; for llmchat also "
        "`is_success` and the usage count) and dropped, and `gc.collect()` ran, so no "
        f"round inherits another's garbage ({checked:,} streams checked). Median of "
        f"{args.rounds} interleaved rounds of {args.calls} stream per client, after "
        "two warm-up streams each; `rounds' range` is the fastest and slowest round. "
        "`x floor speed` is the median over rounds of that round's floor time over the row's "
        "(each round's contenders run back to back, so a burst of load elsewhere moves a "
        "round's figures together and its ratio much less). " + _parser_sentence(versions),
        "",
        table(throughput_header, throughput_rows),
        "",
        f"**llmchat / raw floor = {ratio_raw:.2f}x the floor's frames/s** ({verdict_raw} "
        f"the {TARGET_RAW:g}x target)"
        + (
            f"; **llmchat / openai = {ratio_openai:.2f}x** ({verdict_oai} the "
            f"{TARGET_OPENAI:g}x target)."
            if ratio_openai is not None
            else "."
        ),
        "",
        f"**The same body in {len(writes)} chunked writes of 64 KiB**, cut without regard "
        "to frames (hundreds of frames per read, which no real server sends; kept for "
        "comparison with earlier runs), in separate interleaved rounds (median of "
        f"{args.rounds}):",
        "",
        table(throughput_header, bulk_rows),
        "",
        "The drain row reads the per-event streams with `raw.read1` and parses nothing: "
        "what the loopback server and `requests` deliver, "
        f"{seconds['drain'] and seconds['raw'] / seconds['drain']:.2f}x the floor's rate "
        f"(the server took {send_ms:.1f} ms from headers to its last write in the drain "
        "run). "
        + (
            "With one chunk per event the server's pace (one send per frame, in its own "
            "process) is close to the floor's, so the rows differ by less than their "
            "clients' parsing does. "
            if seconds["drain"] and seconds["raw"] / seconds["drain"] < 1.5
            else "The server is not what limits the other rows. "
        )
        + "llmchat's reader thread parses while the consumer thread iterates; the floor "
        "does everything in one thread. "
        + (
            f"Connections used in the two warm-up streams per client: {reuse}. "
            + (
                f"{', '.join(reconnecting)} drop the connection once `[DONE]` arrives "
                "(the terminating zero-size chunk is never read), so each of their "
                "streams opens a new one (on loopback a small cost; over TLS a handshake "
                "per stream); "
                if reconnecting
                else ""
            )
            + "the floor and the drain read to the end of the body and keep theirs."
        ),
    ]
    if "litellm" in seconds:
        markdown += [
            "",
            "litellm's row ran with `litellm.REPEATED_STREAMING_CHUNK_LIMIT` lifted (its "
            "default 100 aborts a stream on 100 equal deltas in a row). It hands a "
            "success-logging task per chunk to its `litellm-logging` thread pool; the "
            "backlog left when the stream ends is waited out, untimed, before the next "
            f"client runs (best case {seconds[DRAIN] * 1e3:,.1f} ms), so the row is "
            "litellm's consumer-visible time, not all the CPU it spends.",
        ]
    markdown += [
        "",
        "llmchat's stages timed alone on the same body, in one thread, no I/O (best of "
        "9; µs per frame):",
        "",
        table(["stage", "µs / frame"], stage_cells),
        "",
        "### Added per-chunk latency",
        "",
        f"The server sends {LATENCY_FRAMES} content frames, one `Write` each, with a "
        f"`Pause({LATENCY_GAP:g})` before every one, then the finish, usage and `[DONE]` "
        "frames, on a chunked body and on a close-delimited one (no length: the server "
        "closes after the last frame). The consumer stamps `time.monotonic()` as each "
        "content chunk reaches it (llmchat: `for chunk in response`; floor: after "
        "`json.loads` of the frame in its `read1` loop); chunk i is matched to "
        "`server.requests[k].writes[i]`, the server's own time for that frame "
        f"(`writes` was checked to hold exactly {LATENCY_WRITES} entries, one per frame). "
        f"{args.latency_streams} streams per reader and framing, interleaved. llmchat "
        "ran through a backend whose `make_stream_response` returns a Response that also "
        "stamps when the reader thread adds each chunk (one `monotonic()` per chunk, "
        "before the consumer is notified), which splits its latency in two. The last row "
        "is the same hand-off with nothing else: one thread idle in `Condition.wait()`, "
        "another notifying it every 5 ms.",
        "",
        table(latency_header, latency_rows),
        "",
        f"**llmchat p99 added latency: {p99['chunked']:,.0f} µs chunked, "
        f"{p99['close']:,.0f} µs close-delimited** (target < {TARGET_P99_US:,.0f} µs: "
        f"{'met' if max(p99.values()) < TARGET_P99_US else 'MISSED'}). "
        "The server stamps a write *after* `send()` returns, and it runs in this "
        "process, so it needs the GIL back to take the stamp: a reader can wake, parse "
        "and deliver before the server thread records the write. The figures are "
        "therefore a lower bound, small and sometimes negative (the `< 0` column counts "
        "those); they are reported as measured. The median gap between llmchat and the "
        f"floor ({gap['chunked']:,.0f} µs chunked, {gap['close']:,.0f} µs close-delimited) "
        "has two parts: the reader thread's own path to the chunk is slower than the "
        "floor's whole path (more Python per frame, run cold after 5 ms idle), and the "
        "hand-off to the consumer costs a second thread wake-up (a `Condition` notify, "
        "then the GIL), which the floor, parsing in the consumer's own thread, never pays. "
        f"The p99 and `{over}` columns are the ones the machine's other load moves most: "
        "compare them with the floor's, which suffers the same scheduling noise.",
    ]
    if cold is not None:
        markdown += [
            "",
            "What running cold costs: one frame's processing timed alone in one thread, "
            f"no I/O, median of {LATENCY_FRAMES} frames, back to back and after "
            f"{LATENCY_GAP * 1e3:g} ms idle (llmchat: `SSEDecoder.feed` + the reader's step; "
            "floor: split + `json.loads`):",
            "",
            table(
                ["one frame", "back to back µs", f"after {LATENCY_GAP * 1e3:g} ms idle µs"],
                [
                    [
                        "llmchat decode + the reader's step",
                        f"{cold['llmchat hot']:,.1f}",
                        f"{cold['llmchat cold']:,.1f}",
                    ],
                    [
                        "raw floor split + `json.loads`",
                        f"{cold['floor hot']:,.1f}",
                        f"{cold['floor cold']:,.1f}",
                    ],
                ],
            ),
            "",
            "At a token pace every frame starts from an idle CPU and cold caches, so "
            "per-frame work costs several times its back-to-back figure, and llmchat's "
            "longer per-frame path shows up in its latency at that multiple.",
        ]
    markdown += [
        "",
        "### Cancel latency",
        "",
        "Mid-stream: the server writes one frame and then `Stall()`s; the consumer takes "
        "the first chunk and calls `response.cancel()`. In prefill: "
        "`Reply(before_headers=[Stall()])`; once `server.wait_for_requests` shows the "
        "request arrived, `response.cancel()` is called while the reader thread is "
        "blocked waiting for headers. Per trial: how long `cancel()` took to return, how "
        "long until the server recorded the hang-up (`RecordedRequest.disconnected_at`, "
        "the server's `monotonic()` in this process), and until llmchat's reader thread "
        f"exited. {args.cancel_trials} trials of each, interleaved.",
        "",
        table(cancel_header, cancel_rows, align="l" + "r" * (len(cancel_header) - 1)),
        "",
        "`cancel()` settles the Response first, then shuts the socket down "
        "(`shutdown(SHUT_RDWR)`), which both sends the FIN the server sees and wakes the "
        "reader blocked in `recv`; it works the same before headers, because llmchat "
        "registers the socket when it connects. openai's `Stream.close()` is the "
        "equivalent once a stream exists (the consumer closes the response it is not "
        "reading; no other thread is blocked in it)."
        " For prefill openai has nothing comparable: `create(stream=True)` returns only "
        "once headers arrive, and neither the SDK (`openai._base_client`, `_streaming.py`) "
        "nor httpx has a per-request abort; the only bounds are `timeout=` and closing the "
        "whole client. "
        + (
            "(openai is not installed here, so that was not tried.)"
            if prefill_openai is None
            else "Closing the client from another thread was tried once: "
        )
        + (
            "`client.close()` returned at once, but the server never saw the connection "
            f"go (waited {prefill_openai['patience']:g} s) and the `create()` call stayed "
            "blocked until the server itself was stopped — closing a pooled socket does "
            "not wake a `recv` blocked on it in another thread, only `shutdown()` does."
            if prefill_openai is not None and prefill_openai["server_us"] is None
            else ""
            if prefill_openai is None
            else f"the server saw it go after {prefill_openai['server_us']:,.0f} µs."
        ),
    ]
    markdown += [
        "",
        f"Where `cancel()`'s own time goes (cProfile of 20 mid-stream cancels, "
        f"{cancel_profile['call_us']:,.0f} µs per call under the profiler): "
        f"`socket.shutdown` {cancel_profile['shutdown']:.0%}, closing the `requests` "
        f"response {cancel_profile['close']:.0%}. `cancel()` settles the Response, then "
        "only shuts the registered socket down; the reader thread, woken out of `recv` by "
        "the shutdown, closes the response on its way out. (Closing it from `cancel()` "
        "would wait for the buffer lock the reader holds inside `recv_into`.)",
    ]
    if split_rows:
        markdown += [
            "",
            "### Where llmchat's streaming time goes",
            "",
            "cProfile sees only the thread it runs in, so the reader thread's work was "
            "profiled by calling `backend._stream_worker` (the function "
            "`chat_completion_stream` runs in its thread) directly in the main thread, "
            "on the throughput stream, 5 streams; µs per frame under the profiler, which "
            "inflates every Python-level call (read the shares). By stage, from the "
            "stages' cumulative times:",
            "",
            table(["stage", "µs / frame", "share"], split_rows),
            "",
            "Top functions by own time:",
            "",
            table(["function", "calls / frame", "own µs", "cumulative µs", "share"], own_rows),
            "",
            "The consumer thread, profiled alone while a real reader thread fed it "
            f"(5 streams): it blocked in `Condition.wait` {consumer['waits']:,.0f} times "
            f"per stream of {consumer['chunks']:,.0f} chunks and spent "
            f"{consumer['cpu_us']:.2f} µs of its own CPU per chunk (`Response.__iter__` "
            "takes the Response's lock once per batch of arrived chunks).",
            "",
            "**Findings.** Nearly all of llmchat's time per frame is the reader thread's "
            "Python work: decode + the reader's step alone, in one thread with no I/O, costs "
            f"{stages.get('apply frames', math.nan):.1f} µs per frame fed one frame at a "
            f"time, against {seconds['llmchat'] / count * 1e6:.1f} end to end (the floor's "
            f"whole parse, the same way: {stages['floor frames']:.1f}). The consumer adds "
            f"{consumer['cpu_us']:.1f} µs of "
            f"its own per chunk (profiled) and found a chunk ready for all but "
            f"{consumer['waits']:,.0f} of {consumer['chunks']:,.0f} (the body came in "
            f"{counts['reads'] * (frame_count + 4):.0f} reads): the reader parses a whole read "
            "holding the GIL, and the consumer "
            "drains those chunks once the reader lets go of it in its next `recv`. (The "
            "`r.wait()` row, which skips the consumer, measured "
            f"{count / seconds['llmchat wait']:,.0f} frames/s against "
            f"{count / seconds['llmchat']:,.0f} iterating.) About "
            f"{counts['calls']:.0f} Python-level calls per frame (profiled).",
            "",
            "How the pipeline keeps per-frame work small: a body with nothing to decode and "
            "no Content-Length (a chunked or close-delimited stream) is read from "
            "`http.client`'s `read1` under one urllib3 error catcher for the whole body, "
            "rather than through urllib3's `read1` layers on every read; a read that is "
            "exactly one single-line `data:` frame becomes its event at once, and larger "
            "reads are split into frames in C (other frames go through the line rules); "
            "JSON is parsed by orjson when it is installed; the frame parser has a fast "
            "path for the common frame — one plain content delta, nothing else — and uses "
            "exact `dict`/`list`/`str` checks on `json.loads` output; the chunks of one "
            "read are published under one lock, with a wake-up only when an iterator waits "
            "(a thread in `wait()` is woken by the settle alone), and each iterator takes "
            "everything that has arrived in one lock. What remains above the floor is "
            "mostly the hand-off itself: the floor parses in the consumer's own thread, "
            "llmchat in a reader thread that owns the exchange (so the Response settles "
            "even when nobody iterates), and the two share the GIL. The Response keeps "
            "every chunk (nothing is lost to a second reader), but not its parsed `raw` "
            "dict unless the backend has `keep_raw=True` (see the memory section).",
        ]
    if others:
        markdown += ["", f"Threads left running: {', '.join(others)}."]
    elif "llmchat-deadlines" in leftover:
        markdown += [
            "",
            "After everything was closed only `llmchat-deadlines` (llmchat's module-level "
            "deadline watchdog, a daemon) was still running; every `llmchat-stream` reader "
            "had exited.",
        ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
