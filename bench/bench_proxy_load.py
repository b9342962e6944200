"""The proxy under load: embedded server, gunicorn and LiteLLM's proxy over one upstream.

One fast upstream (`_load_upstream.py`, its own process) answers every path:
1,000-delta streams, one HTTP chunk per SSE event, and short blocking answers.
The paths, all through the OpenAI route ``/v1/chat/completions``, all in one run:
direct to the upstream; `llmchat proxy` on its embedded server; the llmchat
proxy under gunicorn's threaded workers; LiteLLM's proxy (`litellm[proxy]`).
Each cell (path x kind x concurrency) runs 1, 8, 32 or 64 keep-alive clients
for a fixed time, from up to four client processes (`_load_clients.py`); every
answer is checked against the text the upstream sent for it.

    python bench/bench_proxy_load.py [--seconds S] [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _load_clients import CLIENT_PROCESSES, Cell, Tally, percentile, run_cell
from _load_paths import ROOT, Server, start_embedded, start_gunicorn, start_litellm, start_upstream
from _load_upstream import DELTAS, MODEL
from _report import BENCHMARKS_MD, package_versions, stamp, table, write_section

SECTION = "Proxy under load: embedded, gunicorn, LiteLLM"
PATHS = ("direct", "embedded", "gunicorn", "gunicorn-lean", "litellm")
KINDS = ("short", "stream")
CONCURRENCY = (1, 8, 32, 64)
ROUTE = "/v1/chat/completions"


@dataclass
class Result:
    """One cell's figures: what the clients measured and what the servers spent."""

    path: str
    kind: str
    concurrency: int
    tally: Tally
    seconds: float
    proxy_cpu: float | None  # CPU seconds of the proxy's processes; None going direct
    upstream_cpu: float
    upstream_requests: int

    @property
    def done(self) -> int:
        return len(self.total)

    @property
    def total(self) -> list[float]:
        return self.tally.total

    def ttfb(self, q: float) -> float:
        return percentile(self.tally.ttfb, q)


def upstream_count(port: int) -> int:
    """Requests the upstream has answered so far (its ``GET /stats``)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/stats")
        return sum(json.loads(conn.getresponse().read()).values())
    finally:
        conn.close()


def run(
    path: str, server: Server | None, upstream: Server, kind: str, clients: int, args: Any
) -> Result:
    port = upstream.port if server is None else server.port
    cell = Cell("127.0.0.1", port, ROUTE, kind, clients, args.seconds, args.key)
    before: dict[str, float] = {}

    def at_start() -> None:
        before["proxy"] = server.cpu() if server is not None else 0.0
        before["upstream"] = upstream.cpu()
        before["requests"] = upstream_count(upstream.port)

    tally, seconds = run_cell(cell, at_start)
    return Result(
        path,
        kind,
        clients,
        tally,
        seconds,
        server.cpu() - before["proxy"] if server is not None else None,
        upstream.cpu() - before["upstream"],
        upstream_count(upstream.port) - int(before["requests"]),
    )


def ms(seconds: float, digits: int = 2) -> str:
    return "—" if seconds != seconds else f"{seconds * 1e3:,.{digits}f}"


def rate(count: float, seconds: float) -> str:
    """Per second, with a decimal or two where the figure is small (LiteLLM's streams)."""
    if seconds <= 0:
        return "—"
    per = count / seconds
    return f"{per:,.0f}" if per >= 100 else f"{per:.1f}" if per >= 10 else f"{per:.2f}"


def added(seconds: float) -> str:
    return "—" if seconds != seconds else f"{seconds * 1e3:+,.2f}"


def rows(
    results: dict[tuple[str, str, int], Result], kind: str, labels: dict[str, str]
) -> list[list[str]]:
    out = []
    for clients in CONCURRENCY:
        direct = results.get(("direct", kind, clients))
        for path in PATHS:
            result = results.get((path, kind, clients))
            if result is None:
                continue
            tally, done = result.tally, result.done
            base = direct if result.path != "direct" else None
            cells = [
                labels[path],
                str(clients),
                rate(done, result.seconds),
                ms(result.ttfb(50)),
                ms(result.ttfb(99)),
                added(result.ttfb(50) - base.ttfb(50)) if base is not None else "",
                added(result.ttfb(99) - base.ttfb(99)) if base is not None else "",
                ms(percentile(result.total, 50)),
            ]
            if kind == "stream":
                cells.append(rate(tally.deltas, result.seconds))
            cpu = result.proxy_cpu
            cells += [
                ms(cpu / done, 3) if cpu is not None and done else "",
                f"{tally.connects:,}",
                str(tally.errors),
                f"{tally.lost} / {tally.corrupted}",
            ]
            out.append(cells)
    return out


def verdicts(results: dict[tuple[str, str, int], Result], paths: list[str]) -> list[str]:
    """One line per goal of the issue, each saying met or missed and by what figures."""
    lines = []
    mine = [path for path in ("embedded", "gunicorn", "gunicorn-lean") if path in paths]

    def get(path: str, kind: str, clients: int) -> Result | None:
        return results.get((path, kind, clients))

    direct = get("direct", "short", 1)
    for path in mine:
        result = get(path, "short", 1)
        if result is None or direct is None:
            continue
        extra = result.ttfb(50) - direct.ttfb(50)
        met = "met" if extra <= 0.001 else "MISSED"
        lines.append(
            f"{met}: {path}, short request at 1 client adds {extra * 1e3:+.2f} ms p50 (goal ≤ 1 ms)"
        )
    top = max(CONCURRENCY)
    for kind in KINDS:
        base, lite = get("direct", kind, top), get("litellm", kind, top)
        if base is None or lite is None:
            lines.append(f"not measured: {kind} at {top} clients against LiteLLM (no LiteLLM run)")
            continue
        theirs = lite.ttfb(99) - base.ttfb(99)
        for path in mine:
            result = get(path, kind, top)
            if result is None:
                continue
            ours = result.ttfb(99) - base.ttfb(99)
            met = "met" if ours <= theirs / 10 else "MISSED"
            lines.append(
                f"{met}: {path}, {kind} at {top} clients adds {ours * 1e3:+.2f} ms p99 TTFB, "
                f"LiteLLM {theirs * 1e3:+.2f} ms (goal ≤ 1/10: {theirs * 1e2:.2f} ms)"
            )
    for name in paths:
        of = [r.tally for k, r in results.items() if k[0] == name]
        broken, errors = sum(t.lost + t.corrupted for t in of), sum(t.errors for t in of)
        met = "met" if broken == 0 else ("MISSED" if name in mine else "seen")
        lines.append(
            f"{met}: {name}, {broken} lost or corrupted answers, {errors} errors (goal: 0 lost)"
        )
    return lines


THREADS_NOTE = (
    "The two gunicorn rows differ only in threads per worker ({threads} and {lean}). The "
    "upstream here answers at once, so every request is CPU work in the proxy, and the "
    "threads of one worker take turns at its one interpreter lock: every hand-over of the "
    "lock is a pair of context switches, which is why CPU per request grows with the number "
    "of busy threads and why the {lean}-thread workers have the lower tail on 2 cores, for "
    "short requests and streams alike. A real LLM upstream is the other way round: a stream "
    "holds its thread for seconds or minutes and costs little CPU, so threads must still "
    'cover the concurrent streams (README, "In production"); where traffic is mostly short '
    "requests on few cores, fewer threads per worker (and more workers) give the lower tail."
)
HEADER = ["path", "clients", "requests / s", "TTFB p50 ms", "TTFB p99 ms"]
HEADER += ["p50 added ms", "p99 added ms", "total p50 ms"]
TAIL = ["proxy CPU ms / request", "connections", "errors", "lost / corrupted"]


def start_servers(
    upstream: str, args: Any, folder: Path, notes: dict[str, str], servers: dict[str, Server]
) -> None:
    """Start every proxy path asked for into `servers` (so that each started one can be
    stopped even if a later one fails); one that will not start is noted and left out."""
    starters = {
        "embedded": lambda: start_embedded(upstream, args.key, folder, args.tree),
        "gunicorn": lambda: start_gunicorn(
            upstream, args.key, folder, args.workers, args.threads, args.tree
        ),
        "gunicorn-lean": lambda: start_gunicorn(
            upstream, args.key, folder, args.workers, args.lean_threads, args.tree, "gunicorn-lean"
        ),
        "litellm": lambda: start_litellm(upstream, args.key, folder, MODEL, args.litellm_workers),
    }
    for path in args.paths:
        if path in starters:
            print(f"starting {path} ...", flush=True)
            try:
                servers[path] = starters[path]()
                print(f"  {servers[path].processes} process(es): {servers[path].how}", flush=True)
            except Exception as exc:  # a path that cannot run is reported, not fatal
                notes[path] = f"did not start: {exc}"
                print(f"  {path} {notes[path]}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run every cell, path by path within each concurrency, then print and record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per cell (default 8)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 s per cell")
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--threads", type=int, default=64, help="gunicorn threads per worker")
    parser.add_argument(
        "--lean-threads",
        type=int,
        default=8,
        help="threads per worker of the gunicorn-lean path, sized for short requests (default 8)",
    )
    parser.add_argument("--litellm-workers", type=int, default=2, help="LiteLLM's --num_workers")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the source tree whose llmchat the proxies run (default: this one); with "
        "another tree's, the figures are printed, not written",
    )
    parser.add_argument(
        "--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="a subset: printed only"
    )
    parser.add_argument(
        "--clients", nargs="+", type=int, default=list(CONCURRENCY), help="a subset: printed only"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.kinds != list(KINDS) or args.clients != list(CONCURRENCY):
        args.no_write = True  # a partial table must not replace the whole one
    if args.quick:
        args.seconds = 1.0
    if "direct" not in args.paths:
        args.paths.insert(0, "direct")  # every figure "added" is against it
    args.key = "sk-bench-" + secrets.token_hex(16)
    began, load_before = time.perf_counter(), os.getloadavg()
    versions = package_versions("litellm", "gunicorn", "fastapi", "uvicorn", "psutil")
    folder = Path(tempfile.mkdtemp(prefix="llmchat-load-"))
    notes: dict[str, str] = {}
    # A SIGTERM unwinds through `finally` like Ctrl-C, so no server outlives the bench.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    upstream = start_upstream(folder)
    upstream_url = f"http://127.0.0.1:{upstream.port}/v1"
    servers: dict[str, Server] = {}
    results: dict[tuple[str, str, int], Result] = {}
    try:
        start_servers(upstream_url, args, folder, notes, servers)
        for kind in args.kinds:
            for clients in args.clients:
                for path in args.paths:
                    if path != "direct" and path not in servers:
                        continue
                    result = run(path, servers.get(path), upstream, kind, clients, args)
                    results[path, kind, clients] = result
                    t, cpu = result.tally, "—"
                    if result.proxy_cpu is not None and result.done:
                        cpu = ms(result.proxy_cpu / result.done, 3)
                    print(
                        f"{kind:<6} {clients:>3} clients {path:<13} "
                        f"{rate(result.done, result.seconds):>8} req/s  "
                        f"TTFB p50 {ms(result.ttfb(50))} p99 {ms(result.ttfb(99))} ms  "
                        f"proxy CPU {cpu} ms/req  "
                        f"conns {t.connects}  err {t.errors}  lost {t.lost}  bad {t.corrupted}  "
                        f"upstream {result.upstream_requests}"
                        + (f"  ({t.first_error})" if t.first_error else ""),
                        flush=True,
                    )
    finally:
        for server in [*servers.values(), upstream]:
            server.stop()
    elapsed, load_after = time.perf_counter() - began, os.getloadavg()
    lines = verdicts(results, [p for p in args.paths if p == "direct" or p in servers])
    print("\n".join(lines))
    print(f"total {elapsed:.0f} s; logs in {folder}")

    labels = {
        "direct": "direct",
        "embedded": "llmchat embedded",
        "gunicorn": f"llmchat gunicorn {versions['gunicorn']}, {args.threads} threads",
        "gunicorn-lean": f"llmchat gunicorn {versions['gunicorn']}, {args.lean_threads} threads",
        "litellm": f"LiteLLM {versions['litellm']}",
    }
    how = {name: server.how for name, server in servers.items()}
    paths_md = [
        "- direct: the clients on the upstream itself.",
        *(f"- {labels[p]}: {how[p]}" for p in PATHS[1:] if p in how),
        *(f"- {labels[p]}: {why}" for p, why in notes.items()),
    ]
    markdown = [
        stamp(),
        "",
        f"Everything runs on one host with {os.cpu_count()} cores: the upstream, the proxy "
        f"being measured and up to {CLIENT_PROCESSES} client processes share the cores, so "
        "the absolute figures are lower than on a deployment where they do not; compare the "
        f"paths. Load average {load_before[0]:.1f} before the run, {load_after[0]:.1f} after "
        "(other work on the machine counts too).",
        "",
        "The upstream (`bench/_load_upstream.py`, its own process, a thread per "
        "connection, keep-alive) answers a long prompt with a stream of "
        f"{DELTAS:,} content deltas, one HTTP chunk and one write per SSE event as real "
        "servers write them, and a short prompt with a blocking `chat.completion`. Every "
        "path goes through the OpenAI route `/v1/chat/completions` with the same bodies "
        "and a bearer key (each proxy checks it):",
        "",
        *paths_md,
        "",
        f"Each cell runs N clients for {args.seconds:g} s, each a thread with one "
        "`http.client` connection reused while the server keeps it open (the "
        "`connections` column counts the TCP connections made), in up to "
        f"{CLIENT_PROCESSES} processes. Every answer carries its request's tag, and "
        "every text is compared with what the upstream sent for that request: a stream "
        "without `[DONE]` is lost, other text is corrupted. TTFB is the time to the first "
        "content delta of a stream, to the first body byte of a short answer; "
        "`added` is over direct at the same concurrency. Proxy CPU is user + system time "
        "of the proxy's processes (gunicorn's and uvicorn's workers summed) over the "
        "cell, per request.",
        "",
        "### Goals",
        "",
        *(f"- {line}" for line in lines),
        "",
        THREADS_NOTE.format(threads=args.threads, lean=args.lean_threads),
        "",
        "### Short blocking requests",
        "",
        table([*HEADER, *TAIL], rows(results, "short", labels)),
        "",
        f"### Streams of {DELTAS:,} deltas",
        "",
        table([*HEADER, "deltas / s", *TAIL], rows(results, "stream", labels)),
    ]
    if not args.no_write and args.tree.resolve() == ROOT:
        write_section(BENCHMARKS_MD, SECTION, "\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
