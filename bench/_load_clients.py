"""The load bench's clients: processes of threads, each a keep-alive `http.client` loop.

Each client thread owns one `http.client.HTTPConnection` and sends request after
request until the cell's time is up. The connection is reused whenever the server
keeps it open (HTTP/1.1) and reopened when the server closes it (HTTP/1.0), so
the same clients serve both; `connects` counts the TCP connections made.
Every answer is checked against the text the upstream sent for that request's
tag: a streamed answer that ends early is lost, one that ends with other text
is corrupted. Clients run in several processes so that their own parsing does
not queue behind one interpreter's lock.
"""

from __future__ import annotations

import http.client
import json
import math
import multiprocessing
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from _load_upstream import LONG_PROMPT, MODEL, SHORT_PROMPT, long_text, short_text

_loads: Callable[[bytes], Any] = json.loads
try:
    from orjson import loads as _loads
except ImportError:  # the stdlib parser only costs the clients more CPU
    pass

CLIENT_PROCESSES = 4
"""At most this many client processes per cell; concurrency is split over their threads."""
TIMEOUT = 120.0
_READ = 65_536


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `values`, interpolated between the closest ranks.

    NaN for no values, as a table cell "—" should say rather than a made-up zero.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q!r}")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class SSEText:
    """An OpenAI SSE body fed piece by piece: its content deltas and whether `[DONE]` came.

    Frames end at a blank line (``\\n\\n``, what every server measured writes);
    a frame may arrive split over several pieces.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.done = False
        self._rest = b""

    def feed(self, data: bytes) -> int:
        """Take the next piece of the body; return how many content deltas it completed."""
        *frames, self._rest = (self._rest + data).split(b"\n\n")
        before = len(self.parts)
        for frame in frames:
            for line in frame.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    self.done = True
                    continue
                choices = _loads(payload).get("choices")
                content = choices[0].get("delta", {}).get("content") if choices else None
                if content:
                    self.parts.append(content)
        return len(self.parts) - before

    @property
    def text(self) -> str:
        return "".join(self.parts)


def stream_outcome(reader: SSEText, expected: str) -> str:
    """``ok``, ``lost`` (no ``[DONE]``: the stream ended early) or ``corrupted`` (other text)."""
    if not reader.done:
        return "lost"
    return "ok" if reader.text == expected else "corrupted"


@dataclass
class Cell:
    """What every client of one cell does: where, which kind of request, how many, how long."""

    host: str
    port: int
    path: str
    kind: str  # "stream" or "short"
    concurrency: int
    seconds: float
    key: str


@dataclass
class Tally:
    """What clients measured: seconds per request (TTFB and total) and every outcome."""

    ttfb: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    deltas: int = 0
    errors: int = 0
    lost: int = 0
    corrupted: int = 0
    connects: int = 0
    retries: int = 0
    first_error: str = ""
    ended: float = 0.0

    def add(self, other: Tally) -> None:
        self.ttfb += other.ttfb
        self.total += other.total
        for name in ("deltas", "errors", "lost", "corrupted", "connects", "retries"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.first_error = self.first_error or other.first_error
        self.ended = max(self.ended, other.ended)

    def fail(self, what: str, error: BaseException | str) -> None:
        setattr(self, what, getattr(self, what) + 1)
        if not self.first_error:
            self.first_error = f"{what}: {error!r}"[:200]


def request_body(kind: str, tag: str) -> bytes:
    """The JSON body a client sends: a long streamed or a short blocking chat request."""
    prompt = LONG_PROMPT if kind == "stream" else SHORT_PROMPT
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"{prompt} [{tag}]"}],
        "max_tokens": 4096 if kind == "stream" else 16,
    }
    if kind == "stream":
        body["stream"] = True
    return json.dumps(body).encode()


class Client:
    """One client thread's connection and its requests, each measured into `tally`."""

    def __init__(self, cell: Cell, name: str, tally: Tally) -> None:
        self.cell, self.name, self.tally = cell, name, tally
        self.conn = http.client.HTTPConnection(cell.host, cell.port, timeout=TIMEOUT)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {cell.key}"}
        self.sequence = 0

    def one(self, record: bool, kind: str = "") -> None:
        """Send one request (of the cell's kind unless `kind` says) and read its answer;
        with `record`, keep its figures."""
        kind = kind or self.cell.kind
        self.sequence += 1
        tag = f"t{self.name}-{self.sequence}"
        body = request_body(kind, tag)
        started = time.perf_counter()
        try:
            response = self._send(body)
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            self.tally.fail("errors", exc)
            return
        if response.status != 200:
            self.tally.fail("errors", f"HTTP {response.status}: {response.read()[:120]!r}")
            return
        reader, text = SSEText(), b""
        first: float | None = None  # the first content delta's arrival, or the first body byte's
        try:
            while data := response.read1(_READ):
                if kind == "stream":
                    if reader.feed(data) and first is None:
                        first = time.perf_counter()
                else:
                    first = first or time.perf_counter()
                    text += data
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            self.tally.fail("lost", exc)
            return
        ended = time.perf_counter()
        # read1 stops at a length-framed body's end without marking the response done;
        # close() does, which frees the connection for the next request.
        response.close()
        if kind == "stream":
            outcome = stream_outcome(reader, long_text(tag))
            if record:
                self.tally.deltas += len(reader.parts)
        else:
            outcome = "ok" if _short_content(text) == short_text(tag) else "corrupted"
        if outcome != "ok":
            self.tally.fail(outcome, f"{len(reader.parts)} deltas, {len(text)} bytes")
            return
        if record and first is not None:
            self.tally.ttfb.append(first - started)
            self.tally.total.append(ended - started)

    def _send(self, body: bytes) -> http.client.HTTPResponse:
        """POST `body`; once more on a new connection if a reused one was closed meanwhile."""
        reused = self.conn.sock is not None
        if not reused:
            self.tally.connects += 1
        try:
            self.conn.request("POST", self.cell.path, body, self.headers)
            return self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
        # A keep-alive server may close an idle connection just as we reuse it.
        self.conn.close()
        self.tally.retries += 1
        self.tally.connects += 1
        self.conn.request("POST", self.cell.path, body, self.headers)
        return self.conn.getresponse()


def _short_content(body: bytes) -> str | None:
    try:
        return str(_loads(body)["choices"][0]["message"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _client_process(
    cell: Cell, index: int, threads: int, ready: Any, go: Any, start: Any, results: Any
) -> None:
    """One client process: `threads` clients warm up, report ready, then run from `start`."""
    tallies = [Tally() for _ in range(threads)]
    warm = threading.Barrier(threads + 1)

    def run(number: int) -> None:
        tally = tallies[number]
        client = Client(cell, f"{index}-{number}", tally)
        # Connect and warm the path's caches; checked, not timed. A short request, so that
        # the slowest path's warm-up streams do not hold up the cell's start.
        client.one(record=False, kind="short")
        warm.wait()
        go.wait()
        end = start.value + cell.seconds
        while time.monotonic() < end:
            client.one(record=True)
        tally.ended = time.monotonic()
        client.conn.close()

    workers = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    warm.wait()
    ready.put(index)
    for worker in workers:
        worker.join()
    total = Tally()
    for tally in tallies:
        total.add(tally)
    results.put(total)


def split(concurrency: int, processes: int = CLIENT_PROCESSES) -> list[int]:
    """Threads per client process: `concurrency` spread as evenly as possible."""
    count = min(concurrency, processes)
    return [concurrency // count + (1 if n < concurrency % count else 0) for n in range(count)]


def run_cell(cell: Cell, at_start: Callable[[], None]) -> tuple[Tally, float]:
    """Run `cell`'s clients; return their merged tally and the seconds from start to the last end.

    `at_start` runs once every client has warmed up, just before they start
    (the caller reads the servers' CPU counters there).
    """
    context = multiprocessing.get_context("fork")
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    start = context.Value("d", 0.0)
    shares = split(cell.concurrency)
    processes = [
        context.Process(
            target=_client_process, args=(cell, n, threads, ready, go, start, results), daemon=True
        )
        for n, threads in enumerate(shares)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=TIMEOUT)
    at_start()
    start.value = time.monotonic()
    go.set()
    merged = Tally()
    for _ in processes:
        merged.add(results.get(timeout=cell.seconds + 4 * TIMEOUT))
    for process in processes:
        process.join(TIMEOUT)
    return merged, merged.ended - start.value
