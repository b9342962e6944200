"""`max_conns` across gunicorn workers on a real llama-server, and what ``id_slot`` pins.

One llama-server (the tests' tiny random-weight model, ``-np 2``: two slots)
sits behind a counting pass-through (every request it forwards is counted
while in flight, to the end of its body: the node's concurrency at the HTTP
level, which llama-server would hide by queueing the excess in its own task
queue), behind ``llmchat proxy --config F --workers 2 --threads 16`` (a real
gunicorn arbiter in a subprocess) with the node's ``max_conns: 2``. More
concurrent multi-turn conversations than slots run through its OpenAI relay
(``bench_routing_real.conversations``: streamed, llama-server's ``timings``
relayed).

1. The most chat requests the node had in flight at once, against
   ``max_conns``, over every run; every request accounted for.
2. Prompt tokens served from llama-server's cache with ``affinity: prefix``
   (a llama-server node is sent ``id_slot``: each conversation asks for its
   rendezvous slot) against ``affinity: none`` (no ``id_slot``: llama-server
   picks a slot by longest common prefix), alternating, each run with
   conversations of its own and a fresh proxy.

Counts are the figures; timings are indicative only on a shared machine.

    pip install -e ".[real,bench,proxy]"
    python bench/bench_routing_workers.py [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _report import ROOT, table
from bench_routing_real import MODEL, Outcome, account, cache_figures, conversations

MAX_CONNS = 2
"""The node's configured ``max_conns``: its slot count (``-np 2``)."""


# -- pure helpers (tests/test_bench_routing_workers.py) ----------------------------------


class InFlight:
    """Requests inside at once: `enter`/`leave` around each; `peak` is the most seen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.total = 0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.total += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


def config_text(node_url: str, affinity: str, max_conns: int = MAX_CONNS) -> str:
    """The routing config: one node, the model under its own name, a long admission wait."""
    return (
        f'nodes:\n  - {{name: n0, url: "{node_url}", max_conns: {max_conns}}}\n'
        f"models:\n  {MODEL}: [{{model: {MODEL}, nodes: [n0]}}]\n"
        f"routing: {{wait_timeout_ms: 120000, affinity: {affinity}}}\n"
    )


def slot_selections(log: str) -> dict[str, int]:
    """How llama-server chose each task's slot, from its log: by the request's ``id_slot``,
    by longest common prefix, or least recently used."""
    return {how: log.count(f"selected slot by {how}") for how in ("id", "LCP similarity", "LRU")}


def summary(runs: Sequence[dict[str, Any]], peak: int, max_conns: int) -> dict[str, Any]:
    """Per affinity: requests by kind and the cache sums; the node's peak against max_conns."""
    modes: dict[str, Any] = {}
    for affinity in ("prefix", "none"):
        outcomes = [o for run in runs if run["affinity"] == affinity for o in run["outcomes"]]
        if outcomes:
            modes[affinity] = {"requests": account(outcomes), "cache": cache_figures(outcomes)}
    return {"node_peak_inflight": peak, "max_conns": max_conns, "modes": modes}


def markdown(result: dict[str, Any]) -> str:
    """The result as BENCHMARKS.md tables."""
    modes = result["modes"]
    requests = sum(sum(m["requests"].values()) for m in modes.values())
    answered = sum(m["requests"]["answered"] for m in modes.values())
    rows = [
        [
            "most chat requests in flight at the node at once",
            str(result["node_peak_inflight"]),
            f"`max_conns: {result['max_conns']}`; {requests} requests, {answered} answered, "
            f"{requests - answered} not",
        ]
    ]
    chosen = result.get("slot_selections")
    if chosen:
        rows.append(
            [
                "tasks llama-server ran in the slot the request named (`id_slot`)",
                str(chosen["id"]),
                f"by longest common prefix {chosen['LCP similarity']}, "
                f"least recently used {chosen['LRU']} (all runs, warm-ups included)",
            ]
        )
    lines = [table(["", "count", "of"], rows), ""]
    cache_rows = []
    labels = {"prefix": "`affinity: prefix`", "none": "`affinity: none`"}
    for name, mode in modes.items():
        cache = mode["cache"]
        cache_rows.append(
            [
                labels[name],
                f"{cache['cached']:,}",
                f"{cache['evaluated']:,}",
                f"{cache['share']:.0%}",
                f"{cache['prefill_ms']:,.0f}",
            ]
        )
    lines.append(
        table(
            [
                "",
                "prompt tokens from cache",
                "evaluated",
                "share cached",
                "prefill ms (indicative)",
            ],
            cache_rows,
        )
    )
    return "\n".join(lines)


# -- the pass-through ------------------------------------------------------------------


def counting_passthrough(target_root: str, counter: InFlight) -> ThreadingHTTPServer:
    """An HTTP forwarder to `target_root` on a free loopback port, counting chat requests
    from their arrival to the end of their answer's body (close-delimited, streamed)."""
    import requests

    session = requests.Session()

    class Forward(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _forward(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            chat = method == "POST" and self.path.endswith("/chat/completions")
            if chat:
                counter.enter()
            try:
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                with session.request(
                    method, target_root + self.path, data=body, headers=headers, stream=True
                ) as reply:
                    self.send_response(reply.status_code)
                    kind = reply.headers.get("Content-Type", "application/json")
                    self.send_header("Content-Type", kind)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for chunk in reply.iter_content(chunk_size=None):
                        self.wfile.write(chunk)
                        self.wfile.flush()
            finally:
                if chat:
                    counter.leave()

        def do_GET(self) -> None:
            self._forward("GET")

        def do_POST(self) -> None:
            self._forward("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# -- the proxy under gunicorn ----------------------------------------------------------


class WorkersProxy:
    """``llmchat proxy --config F --workers 2 --threads 16`` in a subprocess."""

    def __init__(self, config: Path, root: Path = ROOT) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMCHAT_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "llmchat", "proxy", "--config", str(config)]
        command += ["--port", "0", "--workers", "2", "--threads", "16"]
        # cwd: ``-m`` puts it first on sys.path, ahead of PYTHONPATH.
        self.process = subprocess.Popen(
            command, stderr=subprocess.PIPE, text=True, env=env, cwd=root
        )
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            for line in self.process.stderr or ():
                if not self.url and "llmchat proxy: serving http://" in line:
                    self.url = line.split("serving ", 1)[1].split()[0]
                    ready.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not ready.wait(60):
            self.close()
            raise RuntimeError("the proxy did not start")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.reader.join(10)


def warm(url: str, count: int) -> None:
    """Short concurrent requests, so each worker has started its health probe (the slot
    count, and so ``id_slot``, is known from its first ``/props``)."""
    import requests

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}

    def one() -> None:
        requests.post(f"{url}/v1/chat/completions", json=body, timeout=120)
        requests.get(f"{url}/health", timeout=30)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)


_COUNTS = (
    ("--conversations", 6, "concurrent conversations (more than the node's slots)"),
    ("--turns", 6, "turns of each"),
    ("--tokens", 8, "max_tokens of each answer"),
    ("--repeats", 2, "runs of each affinity"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default, what in _COUNTS:
        parser.add_argument(flag, type=int, default=default, help=f"{what} (default {default})")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    parser.add_argument(
        "--proxy-root",
        type=Path,
        default=ROOT,
        help="the llmchat checkout the proxy runs from (another one: a before/after figure)",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from bench_routing_real import start_nodes

    work = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    [node] = start_nodes(1, work)
    counter = InFlight()
    passthrough = counting_passthrough(node.root, counter)
    node_url = f"http://127.0.0.1:{passthrough.server_address[1]}/v1"
    runs: list[dict[str, Any]] = []
    seed = 500
    began = time.perf_counter()
    try:
        for _ in range(args.repeats):
            for affinity in ("prefix", "none"):
                config = work / f"routes-{affinity}.yaml"
                config.write_text(config_text(node_url, affinity))
                proxy = WorkersProxy(config, args.proxy_root)
                try:
                    warm(proxy.url, 8)
                    seed += 1
                    outcomes: list[Outcome] = conversations(
                        proxy.url, args.conversations, args.turns, args.tokens, seed
                    )
                finally:
                    proxy.close()
                runs.append({"affinity": affinity, "outcomes": outcomes})
                print(f"{affinity:<6} {account(outcomes)} {cache_figures(outcomes)}", flush=True)
    finally:
        passthrough.shutdown()
        node.stop()
    result = summary(runs, counter.peak, MAX_CONNS)
    result["slot_selections"] = slot_selections(node.log_path.read_text(errors="replace"))
    result["setup"] = {
        "node": "1 llama-server, the tiny model, -np 2 -t 1, chatml",
        "proxy": f"llmchat proxy --workers 2 --threads 16, from {args.proxy_root}",
        "conversations": args.conversations,
        "turns": args.turns,
        "max_tokens": args.tokens,
        "repeats": args.repeats,
        "node_chat_requests": counter.total,
        "seconds": round(time.perf_counter() - began),
    }
    print(json.dumps(result, indent=2))
    print(markdown(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["node_peak_inflight"] <= MAX_CONNS else 1


if __name__ == "__main__":
    raise SystemExit(main())
