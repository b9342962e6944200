"""Deterministic counts for one short relayed request through the embedded server.

    python bench/profile_embedded.py [--requests N] [--clients C] [--strace]

The upstream (`_load_upstream.py`) runs in its own process; the proxy
(`make_server(make_app(OpenAICommon(upstream)))`, the CLI's default server)
runs in another, counting every Python function call in every thread
(`threading.setprofile`), and optionally under ``strace -c -f``. C clients
(threads of this process, each one kept-alive connection) send N short
blocking chat requests in all after a warm-up. It prints calls per request
and, with ``--strace``, syscalls per request by name: counts, not times, so
a busy machine does not change them (the machine's noise does not either).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

_PROXY = """
import collections, json, sys, threading
from llmchat import OpenAICommon
from llmchat.proxy import make_app, make_server
calls = collections.Counter()
counting = False
def count(frame, event, arg):
    if counting and event == "call":
        code = frame.f_code
        calls["/".join(code.co_filename.rsplit("/", 2)[-2:]) + ":" + code.co_name] += 1
upstream = OpenAICommon(sys.argv[1])
options = json.loads(sys.argv[2])
server = make_server(make_app(upstream), "127.0.0.1", 0, **options)
threading.setprofile(count)
sys.setprofile(count)
def control():
    global counting
    for line in sys.stdin:
        if line.strip() == "start":
            calls.clear(); counting = True
        elif line.strip() == "stop":
            counting = False
            print(json.dumps(dict(calls)), flush=True)
        elif line.strip() == "quit":
            break
    server.shutdown()
threading.Thread(target=control, daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
server.server_close()
"""


def _short_body() -> bytes:
    from _load_upstream import MODEL, SHORT_PROMPT

    return json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": f"{SHORT_PROMPT} [t1]"}]}
    ).encode()


def _client(port: int, count: int, body: bytes, phases: threading.Barrier) -> None:
    """20 requests (warm-up), then `count` counted ones, on one kept-alive connection.

    The connection (and so the proxy's side of it) lives through both phases:
    what the proxy does for it between them is counted too, not left out.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    for number in (20, count):
        phases.wait()
        for _ in range(number):
            conn.request("POST", "/v1/chat/completions", body, headers)
            answer = conn.getresponse()
            data = answer.read()
            assert answer.status == 200, data
        phases.wait()
    conn.close()


def _start_clients(
    port: int, clients: int, per_client: int, body: bytes
) -> tuple[threading.Barrier, list[threading.Thread]]:
    phases = threading.Barrier(clients + 1)
    threads = [
        threading.Thread(target=_client, args=(port, per_client, body, phases))
        for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    return phases, threads


def _syscalls(path: Path) -> dict[str, int]:
    """``strace -c`` output: calls by syscall name."""
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            name = fields[-1]
            number = fields[3]
            if number.isdigit():
                counts[name] = int(number)
    return counts


def _switches(pid: int) -> int:
    """Voluntary context switches (a thread blocked: a hand-over) over the threads of `pid`.

    Involuntary ones are the machine's load, not the proxy's doing.
    """
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[-1])
    return total


def _attach(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """``strace -c -f`` on every thread of `pid`, from now; SIGINT detaches and writes `out`."""
    tracer = subprocess.Popen(
        ["strace", "-c", "-f", "-p", str(pid), "-o", str(out)], stderr=subprocess.PIPE
    )
    assert tracer.stderr is not None
    tracer.stderr.readline()  # "Process N attached": the counting has begun
    threading.Thread(target=tracer.stderr.read, daemon=True).start()
    return tracer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--strace", action="store_true", help="count syscalls (strace -c -f)")
    parser.add_argument("--quick", action="store_true", help="100 requests")
    parser.add_argument("--threads", type=int, help="make_server's pool size (default: its own)")
    parser.add_argument(
        "--tree", type=Path, default=ROOT, help="the llmchat checkout the proxy runs (a before)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.requests = 100
    per_client = max(1, args.requests // args.clients)
    total = per_client * args.clients
    body = _short_body()
    folder = Path(tempfile.mkdtemp(prefix="llmchat-profile-"))
    upstream = subprocess.Popen(
        [sys.executable, str(HERE / "_load_upstream.py"), "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upstream.stdout is not None
    up_port = int(upstream.stdout.readline())
    strace_out = folder / "strace.txt"
    options = {} if args.threads is None else {"threads": args.threads}
    command = [
        sys.executable,
        "-c",
        _PROXY,
        f"http://127.0.0.1:{up_port}/v1",
        json.dumps(options),
    ]
    if args.strace and shutil.which("strace") is None:
        print("strace is not installed: no syscall counts", file=sys.stderr)
        args.strace = False
    env = dict(os.environ, PYTHONPATH=str(args.tree))
    proxy = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=args.tree
    )
    assert proxy.stdin is not None and proxy.stdout is not None
    try:
        port = int(proxy.stdout.readline())
        phases, clients = _start_clients(port, args.clients, per_client, body)
        phases.wait()
        phases.wait()  # the warm-up, not counted
        tracer = _attach(proxy.pid, strace_out) if args.strace else None
        switches = _switches(proxy.pid)
        proxy.stdin.write("start\n")
        proxy.stdin.flush()
        phases.wait()
        phases.wait()
        proxy.stdin.write("stop\n")
        proxy.stdin.flush()
        switches = _switches(proxy.pid) - switches
        for client in clients:
            client.join()
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
        calls: dict[str, int] = json.loads(proxy.stdout.readline())
        proxy.stdin.write("quit\n")
        proxy.stdin.flush()
        proxy.wait(60)
    finally:
        if proxy.poll() is None:
            proxy.kill()
        upstream.stdin.close() if upstream.stdin else None
        upstream.wait(30)
    print(f"{total} short requests, {args.clients} kept-alive client(s)")
    print(f"Python calls per request: {sum(calls.values()) / total:.1f}")
    print(
        f"voluntary context switches per request (all the proxy's threads): {switches / total:.1f}"
    )
    folders: dict[str, int] = {}
    for name, number in calls.items():
        where = name.split("/", 1)[0] if "/" in name else "(stdlib)"
        folders[where] = folders.get(where, 0) + number
    print(
        "  by folder: "
        + ", ".join(
            f"{name} {number / total:.1f}"
            for name, number in sorted(folders.items(), key=lambda kv: -kv[1])
        )
    )
    server = {k: v for k, v in calls.items() if k.startswith("server/")}
    print(f"  in llmchat/proxy/server/: {sum(server.values()) / total:.1f}")
    for name, number in sorted(server.items(), key=lambda kv: -kv[1]):
        print(f"    {number / total:7.2f}  {name}")
    print("  everywhere:")
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:30]
    for name, number in top:
        print(f"  {number / total:7.2f}  {name}")
    if args.strace:
        counts = _syscalls(strace_out)
        print(f"syscalls per request: {sum(counts.values()) / total:.1f}")
        for name, number in sorted(counts.items(), key=lambda kv: -kv[1])[:20]:
            print(f"  {number / total:7.2f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
