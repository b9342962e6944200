"""What operating the proxy costs: metrics and budget checks, per request and per delta.

Three proxies over one loopback upstream (`ChatResponder`), each in its own
process, the same app but for what is measured:

- ``plain``: no usage listener (the metrics unhooked), no budgets;
- ``metrics``: the Prometheus metrics counting every request's usage event;
- ``metrics + budget``: that, plus a token budget on the client's key (checked
  before the upstream call, counted after it).

A short blocking request through the OpenAI relay and through the Anthropic
face, and a 1,000-delta stream through the relay, are timed in interleaved
rounds (best of), with a raw `requests` client; the added time is the row's
minus ``plain``'s. Every answer's text is checked before anything is timed.

    python bench/bench_ops.py [--rounds N] [--calls M] [--no-write]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections.abc import Callable
from typing import Any

from _report import BENCHMARKS_MD, best_of_interleaved, stamp, table, write_section

SECTION = "Operating the proxy: what metrics and budgets cost"
KEY = "bench-client-key-0123456789"
DELTAS = 1000
SHORT = "ok"
VARIANTS = ("plain", "metrics", "metrics + budget")


def serve(variant: str, upstream: str, ports: Any) -> None:
    """A proxy of `variant` over `upstream`, serving until killed (a child process)."""
    from llmchat import OpenAICommon
    from llmchat.proxy import make_app, make_server
    from llmchat.proxy.routing.config import Budget
    from llmchat.proxy.usage.budgets import Budgets
    from llmchat.proxy.usage.event import key_id_of

    app = make_app(OpenAICommon(upstream), api_key=KEY)
    if variant == "plain":
        app.usage.listeners.clear()  # the metrics count nothing
    if variant == "metrics + budget":
        app.budgets = Budgets({key_id_of(KEY): Budget(tokens=10**15)})
    server = make_server(app, "127.0.0.1", 0)
    ports.put((variant, server.url.rstrip("/")))
    server.serve_forever()


def paths(url: str) -> dict[str, Callable[[], str]]:
    """The timed paths against one proxy; each returns the answer's text."""
    import json

    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {KEY}"

    def relay_short() -> str:
        body = {"model": "m", "messages": [{"role": "user", "content": "short"}]}
        reply = session.post(url + "/v1/chat/completions", json=body, timeout=30)
        return str(reply.json()["choices"][0]["message"]["content"])

    def anthropic_short() -> str:
        body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "short"}]}
        reply = session.post(url + "/v1/messages", json=body, timeout=30)
        return str(reply.json()["content"][0]["text"])

    def relay_stream() -> str:
        body = {
            "model": "m",
            "stream": True,
            "messages": [{"role": "user", "content": "long"}],
        }
        parts = []
        with session.post(url + "/v1/chat/completions", json=body, stream=True, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: {"):
                    for choice in json.loads(line[6:]).get("choices") or ():
                        parts.append((choice.get("delta") or {}).get("content") or "")
        return "".join(parts)

    return {"relay short": relay_short, "anthropic short": anthropic_short, "stream": relay_stream}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (best of)")
    parser.add_argument("--calls", type=int, default=20, help="short requests per round")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args(argv)

    from llmchat.testing import ChatResponder, Reply, ScriptedServer

    long_text = "tok " * DELTAS
    responder = ChatResponder(SHORT)
    streamer = ChatResponder(long_text, chunk_size=4)

    def script(request: Any) -> Reply:
        long = b'"long"' in request.body
        return (streamer if long else responder)(request)

    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    with ScriptedServer(script) as upstream:
        children = [
            context.Process(target=serve, args=(v, upstream, ports), daemon=True) for v in VARIANTS
        ]
        for child in children:
            child.start()
        try:
            urls = dict(ports.get(timeout=60) for _ in VARIANTS)
            fns: dict[tuple[str, str], Callable[[], str]] = {}
            for variant in VARIANTS:
                for name, fn in paths(urls[variant]).items():
                    expected = long_text if name == "stream" else SHORT
                    got = fn()
                    assert got == expected, (variant, name, got[:80])
                    fns[(name, variant)] = fn
            short = {k: v for k, v in fns.items() if k[0] != "stream"}
            long = {k: v for k, v in fns.items() if k[0] == "stream"}
            timed = best_of_interleaved(
                {f"{n}|{v}": f for (n, v), f in short.items()}, args.rounds, args.calls
            )
            timed |= best_of_interleaved(
                {f"{n}|{v}": f for (n, v), f in long.items()}, args.rounds, 2
            )
        finally:
            for child in children:
                child.kill()
                child.join(10)

    rows = []
    for name in ("relay short", "anthropic short", "stream"):
        base = timed[f"{name}|plain"]
        for variant in VARIANTS:
            seconds = timed[f"{name}|{variant}"]
            added = seconds - base
            per_delta = f"{added / DELTAS * 1e6:+.2f}" if name == "stream" else ""
            rows.append(
                [
                    f"{name}, {variant}",
                    f"{seconds * 1e3:.3f}",
                    f"{added * 1e6:+.0f}" if variant != "plain" else "",
                    per_delta if variant != "plain" else "",
                ]
            )
    markdown = "\n\n".join(
        [
            stamp(),
            "Three proxies over one loopback upstream, each in its own process, timed in "
            "interleaved rounds (best of) with a raw `requests` client; the stream is "
            f"{DELTAS:,} deltas through the OpenAI relay. Added = the row minus `plain`; "
            "on this 2-core machine differences under ~50 µs are noise.",
            table(["path, proxy", "ms per request", "added µs", "added µs per delta"], rows),
            "Command: `python bench/bench_ops.py`.",
        ]
    )
    print(markdown)
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
