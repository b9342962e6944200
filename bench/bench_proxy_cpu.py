"""The proxy's own cost per delta, face by face: upstream, proxy and clients in separate processes.

The upstream is `_load_upstream.py` (its own process): for the long prompt a
stream of 1,000 token-sized content deltas, every SSE event its own HTTP chunk
(as real servers write). The proxy is ``python -m llmchat proxy --upstream URL``
(its own process, the embedded server, as the README starts it). The clients
are this process's minimal `requests` readers (`_proxy_paths`): the raw floor
straight to the upstream, and a raw reader of each face (Ollama, Anthropic,
Responses, the OpenAI relay), every text checked.

1. Cost per delta: interleaved rounds; in each, every path streams `--streams`
   times. Per face: the proxy process's CPU per delta (user + system from
   ``/proc/PID/stat``, every thread, read before and after the cell), and the
   wall time per delta over the floor's (the median of the rounds' differences).
2. The proxy's CPU per 1,000-delta stream at 1 and at 32 concurrent streams:
   per face, C client threads (a connection each) stream at once; the proxy's
   CPU over the cell divided by the streams served.

    python bench/bench_proxy_cpu.py [--rounds N] [--streams S] [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _child_client import free_port
from _load_upstream import DELTAS, long_text
from _proxy_paths import face_readers, raw_chat_reader
from _report import BENCHMARKS_MD, ROOT, blocked, loopback_only, stamp, table, write_section

SECTION = "Proxy: CPU per delta and per stream, in its own process"
HERE = Path(__file__).resolve().parent
START_TIMEOUT = 60.0
CONCURRENCY = (1, 32)
FACES = {
    "raw relay": "OpenAI relay (`/v1/chat/completions`, bytes passed through)",
    "raw ollama": "Ollama face (`/api/chat`, NDJSON)",
    "raw anthropic": "Anthropic face (`/v1/messages`, SSE)",
    "raw responses": "Responses face (`/v1/responses`, SSE)",
    "raw gemini": "Gemini face (`:streamGenerateContent?alt=sse`)",
}
FLOOR = "floor"


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) process `pid` has used so far."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        fields = stat.read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    import psutil  # not Linux: the bench extra's psutil reads the same counters

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


class Spawned:
    """A server process of this bench; it stops when its stdin closes (or on terminate)."""

    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str]) -> None:
        self.name, self.port = name, port
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{name} exited at start ({self.process.returncode})")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), 1),
            ):
                return
            time.sleep(0.05)  # polling a subprocess's port: there is no event to wait on
        self.stop()
        raise RuntimeError(f"{name} did not listen within {START_TIMEOUT:.0f} s")

    def cpu(self) -> float:
        return process_cpu(self.process.pid)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def readers(upstream: str, proxy: str) -> tuple[dict[str, Callable[[], str]], Callable[[], None]]:
    """Every path's reader on one new `requests` session, and the session's close."""
    import requests

    session = requests.Session()
    paths = {FLOOR: raw_chat_reader(session, upstream + "/chat/completions")}
    paths.update(face_readers(session, proxy))
    return paths, session.close


def cost_per_delta(
    upstream: str, proxy: Spawned, rounds: int, streams: int, expected: str
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per path, each round's wall seconds per stream and the proxy's CPU seconds per stream."""
    paths, close = readers(upstream, f"http://127.0.0.1:{proxy.port}")
    wall: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for name, read in paths.items():  # warm-up and check: connections, the proxy's pools
            assert read() == expected, f"{name}: the text differs"
        for _ in range(rounds):
            for name, read in paths.items():
                texts = []
                cpu_start, start = proxy.cpu(), time.perf_counter()
                for _ in range(streams):
                    texts.append(read())
                took, used = time.perf_counter() - start, proxy.cpu() - cpu_start
                assert all(text == expected for text in texts), f"{name}: the text differs"
                wall[name].append(took / streams)
                cpu[name].append(used / streams)
    finally:
        close()
    return wall, cpu


def concurrent_cpu(
    upstream: str, proxy: Spawned, face: str, clients: int, streams: int, expected: str
) -> tuple[float, float]:
    """`clients` threads each stream `streams` times through `face` at once:
    (the proxy's CPU seconds per stream, the cell's wall seconds)."""
    start_line = threading.Barrier(clients + 1)
    problems: list[str] = []

    def client() -> None:
        paths, close = readers(upstream, f"http://127.0.0.1:{proxy.port}")
        try:
            read = paths[face]
            read()  # its own connection, opened before the timed part
            start_line.wait()
            for _ in range(streams):
                if read() != expected:
                    problems.append(f"{face}: the text differs")
        except Exception as exc:  # reported below, never dropped
            problems.append(f"{face}: {type(exc).__name__}: {exc}")
            start_line.abort()
        finally:
            close()

    threads = [threading.Thread(target=client, name=f"bench-client-{i}") for i in range(clients)]
    for thread in threads:
        thread.start()
    start_line.wait(START_TIMEOUT)
    cpu_start, start = proxy.cpu(), time.perf_counter()
    for thread in threads:
        thread.join()
    took, used = time.perf_counter() - start, proxy.cpu() - cpu_start
    assert not problems, problems[:3]
    return used / (clients * streams), took


def start_servers() -> tuple[Spawned, Spawned]:
    env = {name: value for name, value in os.environ.items() if name != "LLMCHAT_PROXY_KEY"}
    port = free_port()
    upstream = Spawned(
        "upstream", [sys.executable, str(HERE / "_load_upstream.py"), str(port)], port, env
    )
    try:
        proxy_port = free_port()
        argv = [sys.executable, "-m", "llmchat", "proxy", "--upstream"]
        argv += [f"http://127.0.0.1:{port}/v1", "--port", str(proxy_port)]
        proxy = Spawned("proxy", argv, proxy_port, env)
    except Exception:
        upstream.stop()
        raise
    return upstream, proxy


def main(argv: list[str] | None = None) -> int:
    """Measure both tables against one upstream and one proxy; print and record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="cost-per-delta rounds (median)")
    parser.add_argument("--streams", type=int, default=10, help="streams per path per round")
    parser.add_argument("--solo-streams", type=int, default=30, help="streams at 1 client")
    parser.add_argument("--each", type=int, default=3, help="streams per client at 32 clients")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 rounds, few streams; never writes"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.streams, args.solo_streams, args.each = 2, 2, 3, 1
        args.no_write = True
    began = time.perf_counter()
    expected = long_text("t0")  # no tag in the readers' prompt: the upstream's default

    upstream, proxy = start_servers()
    upstream_url = f"http://127.0.0.1:{upstream.port}/v1"
    concurrent: dict[tuple[str, int], tuple[float, float]] = {}
    try:
        with loopback_only():
            wall, cpu = cost_per_delta(upstream_url, proxy, args.rounds, args.streams, expected)
            for face in FACES:
                for clients in CONCURRENCY:
                    each = args.solo_streams if clients == 1 else args.each
                    concurrent[face, clients] = concurrent_cpu(
                        upstream_url, proxy, face, clients, each, expected
                    )
                    print(
                        f"  {face:<14} {clients:>2} clients: "
                        f"{concurrent[face, clients][0] * 1e3:.1f} ms proxy CPU / stream",
                        flush=True,
                    )
    finally:
        proxy.stop()
        upstream.stop()
    assert not blocked, f"network access attempted: {blocked}"

    floor = wall[FLOOR]
    cost_rows = []
    for face, title in FACES.items():
        added = [(w - f) / DELTAS * 1e6 for w, f in zip(wall[face], floor, strict=True)]
        speed = [f / w for w, f in zip(wall[face], floor, strict=True)]
        cost_rows.append(
            [
                title,
                f"{statistics.median(cpu[face]) / DELTAS * 1e6:,.1f}",
                f"{statistics.median(added):+,.1f}",
                f"{statistics.median(speed):.2f}x",
            ]
        )
    cost_header = [
        "face (raw reader)",
        "proxy CPU µs / delta",
        "wall µs / delta over the floor",
        "x floor speed",
    ]
    stream_rows = []
    for face, title in FACES.items():
        cells = [title]
        for clients in CONCURRENCY:
            per_stream, took = concurrent[face, clients]
            streams = clients * (args.solo_streams if clients == 1 else args.each)
            cells += [f"{per_stream * 1e3:,.1f}", f"{streams / took:,.1f}"]
        stream_rows.append(cells)
    stream_header = ["face"]
    for clients in CONCURRENCY:
        what = "1 stream" if clients == 1 else f"{clients} concurrent streams"
        stream_header += [f"proxy CPU ms / stream, {what}", f"streams / s, {what}"]

    cost_table, stream_table = table(cost_header, cost_rows), table(stream_header, stream_rows)
    print(cost_table)
    print()
    print(stream_table)
    print(f"floor (direct to the upstream): {statistics.median(floor) * 1e3:.2f} ms / stream")
    print(f"total {time.perf_counter() - began:.0f} s")
    markdown = [
        stamp(),
        "",
        "Three processes: the upstream (`bench/_load_upstream.py`: for the long prompt "
        f"{DELTAS:,} token-sized content deltas, then the finish chunk, a usage event and "
        "`[DONE]`, **every SSE event its own HTTP chunk**, as real servers write), the proxy "
        "(`python -m llmchat proxy --upstream URL --port P`, the embedded server), and this "
        "bench's clients: minimal `requests` readers (`read1`, split, `json.loads`, the text "
        "picked out by hand, checked against the expected text on every stream) of the "
        "upstream directly (the floor) and of each face. The proxy's CPU is its process's "
        "user + system time from `/proc/PID/stat` (every thread: the server's, llmchat's "
        "upstream reader's), read before and after each cell.",
        "",
        "### Cost per delta, by face",
        "",
        f"{args.rounds} interleaved rounds; in each, every path streams {args.streams} times "
        "in turn on one kept-alive connection. Medians over rounds of the proxy's CPU per "
        "delta, of the wall time per delta over the floor's in the same round, and of the "
        "floor's time over the face's (its speed over the floor's; the floor takes "
        f"{statistics.median(floor) * 1e3:.2f} ms per stream).",
        "",
        cost_table,
        "",
        "### The proxy's CPU per 1,000-delta stream, 1 and 32 at once",
        "",
        f"Per face: one client streaming {args.solo_streams} times, then 32 client threads "
        f"(a connection each, started together) streaming {args.each} times each; the "
        "proxy's CPU over the cell divided by the streams it served. The clients share "
        "this bench's process (and its GIL), so at 32 streams/s is bounded by them too; "
        "the CPU per stream is the proxy's alone.",
        "",
        stream_table,
    ]
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
