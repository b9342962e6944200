"""Routing over real llama-servers: prompt-cache reuse by affinity, the routing decision's
latency, and failover when a node is killed or the config reloaded mid-run.

Three llama-server processes (the tests' tiny random-weight model, ``-np 2 -t 1``)
sit behind `llmchat.proxy` served in this interpreter (`make_server` on a thread),
driven through its OpenAI relay (POST /v1/chat/completions, streamed: llama-server's
last chunk carries ``timings.cache_n`` / ``prompt_n`` / ``prompt_ms``, relayed as
they are, and the answer's ``x-llmchat-node`` names the node).

1. Several concurrent multi-turn conversations (each turn appends the answer and
   a new user message) with ``affinity: prefix`` and ``affinity: none``, and the
   same workload against one node alone (the one-upstream proxy): prompt tokens
   served from the KV cache, and total prefill time. Each run uses conversations
   of its own, so no run reuses another's cache.
2. A short request through a one-node routed proxy against the one-upstream proxy
   over the same node, interleaved: p50/p99 and their difference (the routing
   decision's cost, plus whatever the relay does differently).
3. A reload and two kills under load: the config re-read mid-run (a node removed,
   one added), then one node terminated (SIGTERM), then one killed (SIGKILL), each
   while conversations run (`routing_disruptions`). Every request is accounted for
   (answered; failed before its first byte and retried on another node, counted by
   the router's `on_failure` hook; failed in-band; refused; lost), and the counted
   nodes' ``tokens_predicted_total`` is checked against the tokens they delivered
   (nothing served twice).

    pip install -e ".[real,bench]"
    python bench/bench_routing_real.py [--no-write] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _report import BENCHMARKS_MD, ROOT, stamp, table, write_section

SECTION = "Routing over real llama-servers"
MODEL = "tiny"
CLIENT_TIMEOUT = 150.0
"""The client's read timeout: longer than the proxy's 60 s `headers` timeout to a node."""
RUN_TIMEOUT = 300.0
"""The longest one run of conversations may take; a request running then is lost."""
FIRST_WORDS = 160
"""Words of a conversation's first user turn."""
WORDS = (
    "lighthouse harbour tide compass lantern anchor gull reef storm keeper rope "
    "island signal beacon fog shore wave cliff boat night"
).split()


# -- pure helpers (tests/test_bench_routing_real.py) ---------------------------------


@dataclass
class Outcome:
    """One request as the client saw it."""

    conversation: int
    turn: int
    status: int | None = None
    node: str = ""
    done: bool = False
    text: str = ""
    timings: dict[str, Any] = field(default_factory=dict)
    completion_tokens: int = 0
    error: str = ""
    started: float = 0.0
    first_byte: float | None = None
    ended: float = 0.0

    @property
    def kind(self) -> str:
        """answered | in-band | refused | lost."""
        if self.status == 200 and self.done:
            return "answered"
        if self.status == 200:
            return "in-band"
        if self.status is not None:
            return "refused"
        return "lost"


def parse_sse(lines: Iterable[bytes], outcome: Outcome) -> None:
    """Fill `outcome` from an OpenAI chat stream's lines: text, timings, usage, [DONE]."""
    parts: list[str] = []
    for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            outcome.done = True
            continue
        event = json.loads(payload)
        if "error" in event:
            outcome.error = str(event["error"])[:200]
            continue
        for choice in event.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if content:
                parts.append(content)
        if event.get("timings"):
            outcome.timings = event["timings"]
        if event.get("usage"):
            outcome.completion_tokens = int(event["usage"].get("completion_tokens") or 0)
    outcome.text = "".join(parts)


def cache_figures(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """Cached and evaluated prompt tokens, their share, and prefill ms over answered requests."""
    cached = sum(int(o.timings.get("cache_n", 0)) for o in outcomes)
    evaluated = sum(int(o.timings.get("prompt_n", 0)) for o in outcomes)
    prefill = sum(float(o.timings.get("prompt_ms", 0.0)) for o in outcomes)
    total = cached + evaluated
    return {
        "cached": cached,
        "evaluated": evaluated,
        "share": cached / total if total else 0.0,
        "prefill_ms": prefill,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[rank]


def account(outcomes: Sequence[Outcome]) -> dict[str, int]:
    """Requests by kind (answered, in-band, refused, lost)."""
    counts = {"answered": 0, "in-band": 0, "refused": 0, "lost": 0}
    for outcome in outcomes:
        counts[outcome.kind] += 1
    return counts


def user_message(rng: random.Random, conversation: int, turn: int) -> str:
    """A distinct user turn: the conversation's number keeps first turns apart. The first
    turn is long (a document to talk about: the prefix worth caching), later ones short."""
    words = " ".join(rng.choice(WORDS) for _ in range(FIRST_WORDS if turn == 0 else 24))
    return f"Conversation {conversation}, turn {turn}: tell me about {words}."


# -- the run ---------------------------------------------------------------------------


def request(
    session: Any, url: str, messages: list[dict[str, str]], max_tokens: int, outcome: Outcome
) -> None:
    """POST one streamed chat completion to the proxy's OpenAI relay; fill `outcome`."""
    body = {
        "model": MODEL,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    outcome.started = time.perf_counter()
    try:
        with session.post(
            f"{url}/v1/chat/completions", json=body, stream=True, timeout=CLIENT_TIMEOUT
        ) as reply:
            outcome.status = reply.status_code
            outcome.node = reply.headers.get("x-llmchat-node", "")
            outcome.first_byte = time.perf_counter()
            if reply.status_code == 200:
                parse_sse(reply.iter_lines(), outcome)
            else:
                outcome.error = reply.text[:200]
    except Exception as exc:  # an in-band failure (status set) or a lost request
        outcome.error = f"{type(exc).__name__}: {exc}"[:200]
    outcome.ended = time.perf_counter()


def conversations(
    url: str,
    count: int,
    turns: int,
    max_tokens: int,
    seed: int,
    on_answer: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run `count` conversations of `turns` turns concurrently (one thread each)."""
    import requests

    results: list[Outcome] = []
    running: dict[int, Outcome] = {}
    lock = threading.Lock()

    def one(conversation: int) -> None:
        rng = random.Random(seed * 1000 + conversation)
        session = requests.Session()
        messages = [{"role": "system", "content": "You are a terse assistant."}]
        for turn in range(turns):
            messages.append(
                {"role": "user", "content": user_message(rng, seed * 100 + conversation, turn)}
            )
            outcome = Outcome(seed * 100 + conversation, turn)
            with lock:
                running[conversation] = outcome
            request(session, url, messages, max_tokens, outcome)
            with lock:
                if running.pop(conversation, None) is None:
                    return  # the run gave up on it (below): counted already
                results.append(outcome)
            if on_answer is not None:
                on_answer(outcome)
            messages.append({"role": "assistant", "content": outcome.text or "ok"})
        session.close()

    threads = [threading.Thread(target=one, args=(c,), daemon=True) for c in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + RUN_TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:  # a request still running now failed (lost if it had no status yet); its
        # conversation's later turns never ran
        for outcome in running.values():
            outcome.error = f"still running after the run's {RUN_TIMEOUT:.0f} s"
            outcome.ended = time.perf_counter()
            results.append(outcome)
        running.clear()
        return list(results)


class Served:
    """`make_server(make_app(upstream))` on a thread; `url` is its root."""

    def __init__(self, upstream: Any) -> None:
        from llmchat.proxy import make_app, make_server

        self.upstream = upstream
        self.server = make_server(make_app(upstream), "127.0.0.1", 0)
        self.url = self.server.url.rstrip("/")
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
        close = getattr(self.upstream, "close", None)
        if close is not None:
            close()


def routing_config(
    nodes: dict[str, Any], affinity: str, max_conns: int = 2, *, raw: bool = False
) -> Any:
    """The routing config over `nodes` (by name), one alias `MODEL`; `raw`: as a dict."""
    from llmchat.proxy.routing.config import parse_config

    data = {
        "nodes": [
            {"name": name, "url": node.url, "max_conns": max_conns} for name, node in nodes.items()
        ],
        "models": {MODEL: [{"model": MODEL, "nodes": list(nodes)}]},
        "routing": {"affinity": affinity, "wait_timeout_ms": 30000},
    }
    return data if raw else parse_config(data)


def routed(nodes: Sequence[Any], affinity: str, max_conns: int = 2) -> Served:
    from llmchat.proxy.routing import RoutedUpstream

    named = {f"n{i}": node for i, node in enumerate(nodes)}
    return Served(RoutedUpstream(routing_config(named, affinity, max_conns)))


def start_nodes(count: int, log_dir: Path, first: int = 0) -> list[Any]:
    from tests.real.server import LlamaServer, find_binary
    from tests.real.tiny_model import tiny_model_path

    binary, why = find_binary()
    if binary is None:
        raise SystemExit(f"no llama-server: {why}")
    model = tiny_model_path(Path.home() / ".cache" / "llmchat-tests")
    nodes = [
        LlamaServer(
            binary, model, ["--chat-template", "chatml", "-t", "1"], log_dir / f"node{i}.log"
        )
        for i in range(first, first + count)
    ]
    for node in nodes:
        node.wait_ready()
    return nodes


def short_latency(urls: dict[str, str], rounds: int) -> dict[str, list[float]]:
    """Seconds per short blocking request through each proxy, interleaved."""
    import requests

    sessions = {name: requests.Session() for name in urls}
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        "temperature": 0,
    }
    times: dict[str, list[float]] = {name: [] for name in urls}
    for round_ in range(rounds + 5):
        order = list(urls) if round_ % 2 == 0 else list(reversed(urls))
        for name in order:
            start = time.perf_counter()
            reply = sessions[name].post(f"{urls[name]}/v1/chat/completions", json=body, timeout=30)
            elapsed = time.perf_counter() - start
            assert reply.status_code == 200, reply.text
            if round_ >= 5:  # warm-up rounds: connections, the cache
                times[name].append(elapsed)
    for session in sessions.values():
        session.close()
    return times


def main(argv: list[str] | None = None) -> int:
    run(argv)
    return 0


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """The whole bench; returns its figures (`disruptions`: the accounted runs)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each workload")
    parser.add_argument("--short-rounds", type=int, default=200)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few requests of each part, nothing written (the tests' check of the accounting)",
    )
    args = parser.parse_args(argv)
    disrupted = (8, 8, 24)  # conversations, turns, max_tokens of each disruption run
    if args.quick:
        args.conversations, args.turns, args.tokens, args.repeats = 2, 2, 4, 1
        args.short_rounds, args.no_write = 10, True
        disrupted = (4, 4, 8)
    began = time.perf_counter()

    import faulthandler
    import logging
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)

    import llmchat

    logging.getLogger("llmchat.proxy").setLevel(logging.ERROR)
    log_dir = Path(tempfile.mkdtemp())
    nodes = start_nodes(3, log_dir)
    served: list[Served] = []
    try:
        prefix = routed(nodes, "prefix")
        queued = routed(nodes, "prefix", max_conns=4)
        none = routed(nodes, "none")
        single = Served(llmchat.OpenAICommon(nodes[0].url, model=MODEL))
        served += [prefix, queued, none, single]

        # -- 1. cache reuse ------------------------------------------------------------
        workloads = {
            "prefix": prefix.url,
            "queued": queued.url,
            "none": none.url,
            "single": single.url,
        }
        reuse: dict[str, list[Outcome]] = {name: [] for name in workloads}
        seed = 1
        for _ in range(args.repeats):
            for name, url in workloads.items():
                seed += 1
                outcomes = conversations(url, args.conversations, args.turns, args.tokens, seed)
                bad = [o for o in outcomes if o.kind != "answered"]
                assert not bad, f"{name}: {bad[0]}"
                reuse[name] += outcomes
                print(f"{name:<7} {cache_figures(outcomes)}")
        figures = {name: cache_figures(outcomes) for name, outcomes in reuse.items()}
        spread = {
            name: len({(o.conversation, o.node) for o in outcomes})
            / (args.conversations * args.repeats)
            for name, outcomes in reuse.items()
        }

        # -- 2. the routing decision's latency -----------------------------------------
        one_node = routed(nodes[:1], "prefix")
        served.append(one_node)
        times = short_latency(
            {"routed": one_node.url, "one-upstream": single.url}, args.short_rounds
        )

        # -- 3. reload under load, then failover: SIGTERM, then SIGKILL ----------------------
        from routing_disruptions import failover, reload_under_load

        runs = [reload_under_load(nodes, log_dir, disrupted, 777)]
        runs.append(failover(nodes, 2, signal.SIGTERM, disrupted, 999))
        # llama-server does not exit on SIGTERM while it holds connections: end it, and
        # start a fresh node in its place for the SIGKILL run.
        nodes[2].process.kill()
        nodes[2].stop()
        nodes[2] = start_nodes(1, log_dir, first=3)[0]
        runs.append(failover(nodes, 2, signal.SIGKILL, disrupted, 1999))
        for one in runs:
            print(f"{one.label}: {one.counts} retried={one.retried} twice={one.served_twice}")
    finally:
        for proxy in served:
            proxy.close()
        for node in nodes:
            node.stop()
    elapsed = time.perf_counter() - began
    print(f"total {elapsed:.0f} s")

    # -- the section -----------------------------------------------------------------------
    single_cached = figures["single"]["cached"]
    rows = []
    labels = {
        "prefix": "3 nodes, `affinity: prefix`",
        "queued": "3 nodes, `affinity: prefix`, `max_conns: 4` (queue at the node, not spill)",
        "none": "3 nodes, `affinity: none` (weighted round-robin)",
        "single": "1 node alone (one-upstream proxy)",
    }
    for name in ("prefix", "queued", "none", "single"):
        f = figures[name]
        rows.append(
            [
                labels[name],
                f"{f['cached']:,}",
                f"{f['evaluated']:,}",
                f"{f['share']:.0%}",
                f"{f['cached'] / single_cached:.2f}x" if single_cached else "—",
                f"{f['prefill_ms']:,.0f}",
                f"{f['prefill_ms'] / figures['prefix']['prefill_ms']:.2f}x",
                f"{spread[name]:.2f}",
            ]
        )
    routed_t, direct_t = times["routed"], times["one-upstream"]
    p50r, p50d = percentile(routed_t, 0.5) * 1e6, percentile(direct_t, 0.5) * 1e6
    p99r, p99d = percentile(routed_t, 0.99) * 1e6, percentile(direct_t, 0.99) * 1e6
    latency_rows = [
        ["one-node routed proxy (`RoutedUpstream`)", f"{p50r:,.0f}", f"{p99r:,.0f}"],
        ["one-upstream proxy (`OpenAICommon`)", f"{p50d:,.0f}", f"{p99d:,.0f}"],
        ["routed minus one-upstream", f"{p50r - p50d:+,.0f}", f"{p99r - p99d:+,.0f}"],
    ]
    from routing_disruptions import rows as disruption_rows

    labels = {"reload": "reload (n0 out, n2 in)", "SIGTERM": "SIGTERM n2", "SIGKILL": "SIGKILL n2"}
    failover_table = table(
        ["", *(labels[r.label] for r in runs)], disruption_rows(runs), "l" + "r" * len(runs)
    )

    def of_single(name: str) -> str:
        return f"{figures[name]['cached'] / single_cached:.0%}" if single_cached else "—"

    markdown = "\n\n".join(
        [
            f"{stamp()} The machine was shared with other work while this ran (2 cores); "
            f"the whole run took {elapsed:.0f} s.",
            "Three llama-server processes (the tests' tiny random-weight model, `-np 2 -t 1`, "
            "`-c 2048`) behind `llmchat.proxy` served in-process, driven through its OpenAI "
            "relay (streamed `POST /v1/chat/completions`; the cache figures are llama-server's "
            "own `timings.cache_n` / `prompt_n` / `prompt_ms` of each answer, relayed as they "
            "are). "
            "`python bench/bench_routing_real.py`.",
            f"**1. Prompt-cache reuse.** {args.conversations} concurrent conversations x "
            f"{args.turns} turns (a system prompt, a first user turn of {FIRST_WORDS} words, each "
            f"later turn appending the answer and a new user message of 24 words, `max_tokens` "
            f"{args.tokens}), run {args.repeats} times per row, interleaved, "
            "each run with conversations of its own. `max_conns: 2` per node (its slots) "
            "unless said. "
            '"nodes per conversation" is how many nodes a conversation\'s turns were spread over.',
            table(
                [
                    "setup",
                    "cached prompt tokens",
                    "evaluated prompt tokens",
                    "cached share",
                    "cached vs 1 node",
                    "prefill ms (sum)",
                    "prefill vs prefix",
                    "nodes per conversation",
                ],
                rows,
            ),
            f"With `affinity: prefix` the three nodes reused {of_single('prefix')} of the cached "
            f"prompt tokens one node alone reused on the same workload ({of_single('queued')} "
            f"with `max_conns: 4`, {of_single('none')} with `affinity: none`; the issue's goal: "
            "at least 90%). A conversation goes to its rendezvous node while that node has a free "
            "`max_conns` slot, else to the least-loaded node, where its prefix is not cached. "
            "The prefill ms are llama-server's own, summed; with three servers on two shared "
            "cores they measure CPU contention as much as tokens evaluated: read the token "
            "counts first.",
            f"**2. A routing decision's latency.** A short blocking request (`max_tokens` 1) "
            f"through a one-node routed proxy against the one-upstream proxy over the same "
            f"llama-server, {args.short_rounds} of each, interleaved; µs per request.",
            table(["path", "p50 µs", "p99 µs"], latency_rows),
            "bench/bench_routing.py times the decision alone (no sockets).",
            f"**3. A reload and two kills under load.** `affinity: prefix`, "
            f"{disrupted[0]} conversations x {disrupted[1]} turns (`max_tokens` {disrupted[2]}) "
            f"per column; the disruption comes once {disrupted[0] * 2} requests have been "
            "answered. *reload*: a proxy over n0 and n1 re-reads its file (what SIGHUP does) "
            "with n0 removed and n2 added; n0's streams in flight finish there. *SIGTERM*, "
            '*SIGKILL*: node n2 of three gets the signal. "served twice" compares the tokens '
            "the counted nodes (the survivors; for the reload all three) predicted "
            "(`llamacpp:tokens_predicted_total`) with what their answers delivered.",
            failover_table,
            "**4. `max_conns` with 2 gunicorn workers:** bench/bench_routing_workers.py "
            "measures it (its own table).",
        ]
    )
    print(markdown)
    if not args.no_write:
        write_section(BENCHMARKS_MD, SECTION, markdown)
        print(f"wrote {BENCHMARKS_MD.relative_to(ROOT)}")
    return {"disruptions": runs, "markdown": markdown}


if __name__ == "__main__":
    raise SystemExit(main())
