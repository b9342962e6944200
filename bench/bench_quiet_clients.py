"""Quiet clients against every thread: how long another client waits, under each server.

For each kind of quiet client (no byte at all, part of a head, a head and a few
body bytes, a body dribbled a byte every 50 ms, a huge chunk size), `threads`
such sockets are opened against the proxy (gunicorn: one worker of `threads`
threads; the embedded server: its thread per connection), then one more
client asks for ``/health``. Reported: how long that client waited, against
the deadline that should free the threads (the head deadline for a head, the
body deadline for a body). The goal, reported and never asserted: the wait is
at most that deadline (plus the linger a closing 408 gets), never "as long as
the quiet clients stay".

    python bench/bench_quiet_clients.py [--threads K] [--header-timeout S] [--body-timeout S]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from llmchat.testing import ChatResponder, ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
KINDS = {
    "no-byte": b"",
    "partial-head": b"GET /health HTTP/1.1\r\nX-Slow: ",
    "head+few-body-bytes": b'POST /api/chat HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{"model":',
    "dribbled-body": b"POST /api/chat HTTP/1.1\r\nContent-Length: 100000\r\n\r\n",
    "huge-chunk-size": b"POST /api/chat HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffff\r\n{",
}


def _serve(
    server: str, upstream: str, args: argparse.Namespace
) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "llmchat", "proxy", "--upstream", upstream, "--port", "0"]
    command += ["--header-timeout", str(args.header_timeout)]
    command += ["--body-timeout", str(args.body_timeout)]
    if server == "gunicorn":
        command += ["--workers", "1", "--threads", str(args.threads)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert process.stderr is not None
    for line in process.stderr:
        if "llmchat proxy: serving " in line:
            url = line.split("serving ", 1)[1].split(" ", 1)[0]
            threading.Thread(
                target=lambda: [None for _ in process.stderr or ()], daemon=True
            ).start()
            return process, url
    raise RuntimeError("the proxy did not start")


def _wait_behind(url: str, kind: str, threads: int) -> float:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), timeout=120) for _ in range(threads)]
    stop = threading.Event()
    for sock in socks:
        sock.sendall(KINDS[kind])

    def dribble() -> None:
        while not stop.wait(0.05):
            for sock in socks:
                try:
                    sock.send(b" ")
                except OSError:
                    return

    if kind == "dribbled-body":
        threading.Thread(target=dribble, daemon=True).start()
    try:
        time.sleep(
            0.2
        )  # let every quiet socket reach a thread first: a measuring setup, not a race
        started = time.monotonic()
        answer = requests.get(url + "/health", timeout=120)
        answer.raise_for_status()
        return time.monotonic() - started
    finally:
        stop.set()
        for sock in socks:
            sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=10.0)
    args = parser.parse_args()
    upstream = ScriptedServer(ChatResponder("hello")).start()
    try:
        for server in ("embedded", "gunicorn"):
            process, url = _serve(server, upstream.url, args)
            try:
                for kind in KINDS:
                    body = "body" in kind or "chunk" in kind
                    deadline = args.body_timeout if body else args.header_timeout
                    waited = _wait_behind(url, kind, args.threads)
                    print(
                        f"{server:9} {args.threads} x {kind:20} another client waited "
                        f"{waited:6.2f} s (deadline {deadline:g} s)",
                        flush=True,
                    )
            finally:
                process.terminate()
                process.wait(60)
    finally:
        upstream.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
