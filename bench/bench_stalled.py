"""Stalled clients: what a client that never reads costs the proxy and the upstream.

The loopback upstream (its own process) streams one long answer per request:
N token-sized content frames (default 100,000, about 20 MB), in 64 KiB
writes. The proxy (`make_app(OpenAICommon(upstream))` on llmchat's own
server with ``send_timeout`` T, default 5 s) runs in a process of its own,
a fresh one per face. S raw-socket clients (default 4) per face send a
streamed request and never read a byte.

Once the upstream's byte counts stop moving (nothing new for a second, or
every answer sent), the proxy's RSS growth over its idle RSS is read, per
stalled stream, with the upstream bytes each stalled stream let through.
Then the send-stall limit ends the streams: how long after the request the
upstream saw its connection end, and whether it was cut mid-answer (the
proxy cancelled it) or had sent everything (it generated for nobody).

`--before DIR` measures the llmchat tree at DIR too (say, a checkout of main)
and puts its figures beside this tree's.

    python bench/bench_stalled.py [--frames N] [--streams S] [--send-timeout T]
                                  [--before DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench_memory import _frames, _status

SECTION = "Stalled clients: memory and upstream bytes per stream"
HERE = Path(__file__).resolve()
HI = [{"role": "user", "content": "Hi"}]
FACES: dict[str, tuple[str, dict[str, Any]]] = {
    "Ollama /api/chat": ("/api/chat", {"model": "m", "messages": HI, "stream": True}),
    "Ollama /api/generate": ("/api/generate", {"model": "m", "prompt": "Hi", "stream": True}),
    "Anthropic /v1/messages": (
        "/v1/messages",
        {"model": "m", "max_tokens": 100, "messages": HI, "stream": True},
    ),
    "Responses /v1/responses": ("/v1/responses", {"model": "m", "input": "Hi", "stream": True}),
    "OpenAI relay": ("/v1/chat/completions", {"model": "m", "messages": HI, "stream": True}),
}
CLIENT_RCVBUF = 4096
QUIET = 1.0  # seconds without a new upstream byte that count as "stalled"


# -- the child processes ------------------------------------------------------------


def _serve_upstream(count: int) -> None:
    from llmchat.testing import Reply, ScriptedServer, Write

    body = b"".join(_frames(count))
    writes = [Write(body[i : i + 65536]) for i in range(0, len(body), 65536)]
    reply = Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=writes)
    server = ScriptedServer(reply).start()
    try:
        print(json.dumps({"url": server.url, "total": len(body)}), flush=True)
        for line in sys.stdin:  # each line asks for the requests' figures
            del line
            print(json.dumps(_upstream_status(server)), flush=True)
    finally:
        server.stop()


def _upstream_status(server: Any) -> list[dict[str, Any]]:
    rows = []
    for record in list(server.requests):
        rows.append(
            {
                "sent": sum(size for _, size in record.writes),
                "finished": record.finished.is_set(),
                "cut": record.disconnected.is_set(),
                "held": (record.finished_at - record.received_at)
                if record.finished_at is not None
                else None,
            }
        )
    return rows


def _serve_proxy(upstream: str, send_timeout: float) -> None:
    from llmchat import OpenAICommon
    from llmchat.proxy import make_app, make_server

    app = make_app(OpenAICommon(upstream), usage_log=lambda event: None)
    server = make_server(app, "127.0.0.1", 0, send_timeout=send_timeout)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.url, flush=True)
    for line in sys.stdin:  # each line asks for the memory figures
        del line
        print(json.dumps(_status()), flush=True)


class _Child:
    """A child process of this script that answers one JSON line per line asked."""

    def __init__(self, code: Path, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(code))
        self.process = subprocess.Popen(
            [sys.executable, str(HERE), "--code", str(code), "--role", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        self.first = self.process.stdout.readline().strip()

    def ask(self) -> Any:
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("?\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- measuring --------------------------------------------------------------------


def _stalled_clients(url: str, path: str, body: dict[str, Any], count: int) -> list[socket.socket]:
    """`count` connections that each send the streamed request, and never read a byte."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    request = b"\r\n".join(
        [
            f"POST {path} HTTP/1.1".encode(),
            b"Host: proxy",
            b"Content-Type: application/json",
            b"Content-Length: %d" % len(data),
            b"",
            data,
        ]
    )
    clients = []
    for _ in range(count):
        sock = socket.socket()
        # A small receive window, set before connecting, as a phone on a bad link has.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
        sock.connect((host, int(port)))
        sock.sendall(request)
        clients.append(sock)
    return clients


def _wait_quiet(upstream: _Child, first: int, streams: int) -> list[dict[str, Any]]:
    """The upstream's rows for this round once they stop moving (bench polling, not a test)."""
    last: list[int] = []
    quiet_since = time.monotonic()
    while True:
        rows = upstream.ask()[first:]
        sent = [row["sent"] for row in rows]
        done = len(rows) == streams and all(row["finished"] for row in rows)
        if sent != last:
            last, quiet_since = sent, time.monotonic()
        elif len(rows) == streams and (done or time.monotonic() - quiet_since >= QUIET):
            return list(rows)
        time.sleep(0.1)


def _wait_finished(upstream: _Child, first: int, limit: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + limit
    while True:
        rows = list(upstream.ask()[first:])
        if all(row["finished"] for row in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def _measure(code: Path, count: int, streams: int, send_timeout: float) -> dict[str, Any]:
    upstream = _Child(code, "upstream", "--frames", str(count))
    started = json.loads(upstream.first)
    result: dict[str, Any] = {"total": started["total"], "faces": {}}
    seen = 0
    try:
        for face, (path, body) in FACES.items():
            proxy = _Child(
                code,
                "proxy",
                "--upstream",
                started["url"],
                "--send-timeout",
                str(send_timeout),
            )
            try:
                idle = proxy.ask()["VmRSS"]
                clients = _stalled_clients(proxy.first, path, body, streams)
                stalled = _wait_quiet(upstream, seen, streams)
                memory = proxy.ask()
                ended = _wait_finished(upstream, seen, send_timeout + 60)
                for client in clients:
                    client.close()
                seen += streams
                result["faces"][face] = {
                    "idle_rss": idle,
                    "stalled_rss": memory["VmRSS"],
                    "sent": sum(row["sent"] for row in stalled) / streams,
                    "cut": sum(1 for row in ended if row["cut"]),
                    "held": max(row["held"] or 0.0 for row in ended),
                }
            finally:
                proxy.close()
    finally:
        upstream.close()
    return result


def _run(code: Path, count: int, streams: int, send_timeout: float) -> dict[str, Any]:
    args = ["--frames", str(count), "--streams", str(streams), "--send-timeout", str(send_timeout)]
    child = subprocess.run(
        [sys.executable, str(HERE), "--code", str(code), "--role", "measure", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(code)),
        check=False,
    )
    if child.returncode:
        raise SystemExit(f"measuring {code} failed")
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


def _markdown(
    results: list[tuple[str, dict[str, Any]]], count: int, streams: int, send_timeout: float
) -> str:
    from _report import stamp, table

    rows = []
    for name, result in results:
        total = result["total"]
        for face, r in result["faces"].items():
            growth = (r["stalled_rss"] - r["idle_rss"]) / streams
            rows.append(
                [
                    name,
                    face,
                    f"{r['idle_rss'] / 2**20:,.0f}",
                    f"{r['stalled_rss'] / 2**20:,.0f}",
                    f"{growth / 2**20:,.1f}",
                    f"{r['sent'] / 2**20:,.1f} of {total / 2**20:,.1f}",
                    f"{r['cut']} of {streams}",
                    f"{r['held']:,.1f}",
                ]
            )
    return "\n".join(
        [
            stamp(),
            "",
            f"{streams} clients per face send a streamed request and never read; the "
            f"upstream answers each with {count:,} token-sized frames. The proxy runs "
            f"llmchat's server with `send_timeout={send_timeout:g}`, a fresh process per "
            "face. RSS in MiB, once the upstream's byte counts stopped moving; upstream "
            "MiB let through per stalled stream, of the whole answer; how many upstream "
            "connections the proxy cut mid-answer; and the longest time (s) from a request "
            "to the end of its upstream connection.",
            "",
            table(
                [
                    "llmchat",
                    "face",
                    "idle RSS",
                    "stalled RSS",
                    "MiB per stream",
                    "upstream MiB sent",
                    "cut mid-answer",
                    "upstream held s",
                ],
                rows,
                "llrrrrrr",
            ),
            "",
            "Paced (this tree), the upstream is held back by TCP: it gets to send the "
            "socket buffers between the two ends (the kernel's, autotuned: a few MiB on "
            "loopback) and the proxy's lead of 16 chunks, however long the answer; the "
            "send-stall limit then cancels it mid-answer. The memory left per stalled "
            "stream is mostly the chunks the Response keeps of what was already handed "
            "to the client's socket, so it follows the kernel's send buffer, not the "
            "answer's length. The OpenAI relay passes bytes through as the client takes "
            "them and was bounded before too.",
        ]
    )


def _child_role(args: argparse.Namespace) -> None:
    """Run as one of the child processes (`--role`), with `args.code` first on sys.path."""
    sys.path.insert(0, str(args.code))
    if args.role == "upstream":
        _serve_upstream(args.frames)
    elif args.role == "proxy":
        _serve_proxy(args.upstream, args.send_timeout)
    else:
        measured = _measure(args.code, args.frames, args.streams, args.send_timeout)
        print(json.dumps(measured), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--send-timeout", type=float, default=5.0)
    parser.add_argument("--before", type=Path, help="an llmchat tree to measure beside this one")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    hidden = argparse.SUPPRESS  # the child processes' own arguments
    parser.add_argument("--role", choices=("measure", "upstream", "proxy"), help=hidden)
    parser.add_argument("--code", type=Path, help=hidden)
    parser.add_argument("--upstream", help=hidden)
    args = parser.parse_args()
    if args.role is not None:
        _child_role(args)
        return 0
    sys.path.insert(0, str(HERE.parent))
    from _report import BENCHMARKS_MD, ROOT, write_section

    trees = ([(f"before ({args.before.name})", args.before)] if args.before else []) + [
        ("this tree", ROOT)
    ]
    results = [
        (name, _run(code, args.frames, args.streams, args.send_timeout)) for name, code in trees
    ]
    markdown = _markdown(results, args.frames, args.streams, args.send_timeout)
    print(markdown)
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
