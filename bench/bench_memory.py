"""Memory per streamed frame: what a live Response keeps, and what the proxy grows by.

1. One stream of N small content frames (default 20,000; each one token-sized
   ``chat.completion.chunk`` delta, llama.cpp-shaped) from the loopback server,
   which runs in its own process and sends the body in 64 KiB writes. In the
   measuring process `tracemalloc` counts the bytes still allocated once the
   Response has settled and while it is alive (after a `gc.collect()`), divided
   by N: the memory one frame costs for as long as its Response lives; the wire
   bytes per frame and their ratio beside it. Once with `keep_raw=False` (the
   default) and once with `keep_raw=True` (each Chunk keeps its parsed dict).
2. The proxy: `make_app(OpenAICommon(upstream))` served by llmchat's own server
   in a process of its own, and S concurrent clients (default 20) streaming
   ``/api/chat`` (the Ollama face, which holds a live upstream Response per
   call) over the same N-frame upstream stream. The proxy's RSS before, and its
   peak (`VmHWM`) after all streams finished.

Each measurement runs in a fresh interpreter. `--before DIR` measures the
llmchat tree at DIR too (say, a checkout of main) and puts its figures beside
this tree's; a tree without `keep_raw` is measured once, as it is.

    python bench/bench_memory.py [--frames N] [--streams S] [--before DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path
from typing import Any

SECTION = "Memory per streamed frame"
HI = [{"role": "user", "content": "Hi"}]
HERE = Path(__file__).resolve()


def _frames(count: int) -> list[bytes]:
    head = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
    head += '"model":"bench","system_fingerprint":"b1","choices":[{"index":0,"delta":'
    out = []
    for i in range(count):
        text = json.dumps(f" tok{i % 97}")
        out.append(f'data: {head}{{"content":{text}}},"finish_reason":null}}]}}\n\n'.encode())
    out.append(f'data: {head}{{}},"finish_reason":"stop"}}]}}\n\n'.encode())
    out.append(b"data: [DONE]\n\n")
    return out


def _serve_upstream(count: int) -> None:
    from llmchat.testing import Reply, ScriptedServer, Write

    body = b"".join(_frames(count))
    writes = [Write(body[i : i + 65536]) for i in range(0, len(body), 65536)]
    reply = Reply(200, {"Content-Type": "text/event-stream"}, framing="chunked", steps=writes)
    with ScriptedServer(reply) as url:
        print(url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


def _serve_proxy(upstream: str) -> None:
    from llmchat import OpenAICommon
    from llmchat.proxy import make_app, make_server

    server = make_server(make_app(OpenAICommon(upstream)), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.url, flush=True)
    for line in sys.stdin:  # each line asks for the memory figures
        print(json.dumps(_status()), flush=True)
        del line


def _status() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def _child(code: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(code))
    return subprocess.Popen(
        [sys.executable, str(HERE), "--code", str(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _measure(code: Path, count: int, streams: int) -> dict[str, Any]:
    import requests

    from llmchat import OpenAICommon

    result: dict[str, Any] = {"code": str(code)}
    wire = sum(len(f) for f in _frames(count)[:count]) / count
    result["wire_per_frame"] = wire
    upstream = _child(code, "--serve-upstream", "--frames", str(count))
    assert upstream.stdout is not None and upstream.stdin is not None
    url = upstream.stdout.readline().strip()
    try:
        try:
            OpenAICommon(url, keep_raw=False)
            modes: list[bool | None] = [False, True]
        except TypeError:  # a tree from before keep_raw: measured as it is
            modes = [None]
        for keep_raw in modes:
            options: dict[str, Any] = {} if keep_raw is None else {"keep_raw": keep_raw}
            backend = OpenAICommon(url, **options)
            assert backend.chat_completion_stream(HI).wait(60)  # warm: pool, imports
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            response = backend.chat_completion_stream(HI)
            assert response.wait(120) and response.is_success, response.err
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - base
            tracemalloc.stop()
            label = "as is" if keep_raw is None else f"keep_raw={keep_raw}"
            result[label] = kept / count
            del response
            backend.close()
        proxy = _child(code, "--serve-proxy", "--upstream", url)
        assert proxy.stdout is not None and proxy.stdin is not None
        proxy_url = proxy.stdout.readline().strip()
        try:

            def ask() -> dict[str, int]:
                assert proxy.stdin is not None and proxy.stdout is not None
                proxy.stdin.write("status\n")
                proxy.stdin.flush()
                return dict(json.loads(proxy.stdout.readline()))

            with requests.Session() as warm:  # one stream first: imports and pools
                _ollama_stream(warm, proxy_url)
            before = ask()
            lines: list[int] = []

            def client() -> None:
                # The server's listen backlog is small: a connect reset before any
                # byte (20 connecting at once) is tried again.
                for _ in range(10):
                    with requests.Session() as session:
                        try:
                            lines.append(_ollama_stream(session, proxy_url))
                            return
                        except requests.ConnectionError:
                            continue

            threads = [threading.Thread(target=client) for _ in range(streams)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            after = ask()
            assert lines == [count + 1] * streams, lines
            result["proxy_rss_before"] = before["VmRSS"]
            result["proxy_rss_peak"] = after["VmHWM"]
        finally:
            proxy.stdin.close()
            proxy.kill()
            proxy.wait()
    finally:
        upstream.stdin.close()
        upstream.wait(30)
    return result


def _ollama_stream(session: Any, url: str) -> int:
    body = {"model": "m", "messages": HI, "stream": True}
    with session.post(url + "/api/chat", json=body, stream=True, timeout=300) as answer:
        return sum(1 for line in answer.iter_lines() if line)


def _run(code: Path, count: int, streams: int) -> dict[str, Any]:
    child = _child(code, "--measure", "--frames", str(count), "--streams", str(streams))
    out, _ = child.communicate()
    if child.returncode:
        raise SystemExit(f"measuring {code} failed")
    return dict(json.loads(out.strip().splitlines()[-1]))


def _markdown(results: list[tuple[str, dict[str, Any]]], count: int, streams: int) -> str:
    from _report import stamp, table

    rows = []
    for name, r in results:
        wire = r["wire_per_frame"]
        for label in ("as is", "keep_raw=False", "keep_raw=True"):
            if label in r:
                kept = r[label]
                rows.append([name, label, f"{kept:,.0f}", f"{wire:,.0f}", f"{kept / wire:.1f}x"])
    proxy = [
        [
            name,
            f"{r['proxy_rss_before'] / 2**20:,.0f}",
            f"{r['proxy_rss_peak'] / 2**20:,.0f}",
            f"{(r['proxy_rss_peak'] - r['proxy_rss_before']) / 2**20:,.0f}",
        ]
        for name, r in results
    ]
    return "\n".join(
        [
            stamp(),
            "",
            f"Bytes a live Response keeps per streamed frame (tracemalloc, one stream of "
            f"{count:,} token-sized content frames from the loopback server):",
            "",
            table(
                ["llmchat", "mode", "kept B/frame", "wire B/frame", "kept/wire"],
                rows,
                "llrrr",
            ),
            "",
            f"The proxy's RSS for {streams} concurrent Ollama-face streams of {count:,} "
            "frames each (MiB; peak is VmHWM after all finished):",
            "",
            table(["llmchat", "before", "peak", "growth"], proxy, "lrrr"),
            "",
            "What stays per frame with `keep_raw=False`: the `Chunk` (slots) and its "
            "content string in the Response's chunk list; the text is also joined into the "
            "Response's answer. `keep_raw=True` adds the parsed JSON dict of each event.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--before", type=Path, help="an llmchat tree to measure beside this one")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.code is not None:
        sys.path.insert(0, str(args.code))  # ahead of the tree _report would add
        if args.serve_upstream:
            _serve_upstream(args.frames)
        elif args.serve_proxy:
            _serve_proxy(args.upstream)
        else:
            print(json.dumps(_measure(args.code, args.frames, args.streams)), flush=True)
        return 0
    sys.path.insert(0, str(HERE.parent))
    from _report import BENCHMARKS_MD, ROOT, write_section

    results = []
    if args.before is not None:
        before = _run(args.before, args.frames, args.streams)
        results.append((f"before ({args.before.name})", before))
    results.append(("this tree", _run(ROOT, args.frames, args.streams)))
    markdown = _markdown(results, args.frames, args.streams)
    print(markdown)
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
