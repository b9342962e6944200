"""The cost of a routing decision: `choose` and the whole admission, for 3 and 100 nodes.

What `RoutedUpstream.start` adds to a request before the node is asked:
`prefix_key` (affinity only: the conversation prefix as canonical JSON,
hashed), `admission.admit` under the router's lock (eligibility, admission,
the choice, the slot taken) and the slot's release. Timed per call with
`perf_counter_ns` over many calls on one thread, nodes idle (every admitted):
the decision itself, not a wait. Prints p50/p99 in microseconds; the issue's
goal is <= 100 us p50 added per request.

    python bench/bench_routing.py [--calls N]
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

from llmchat.proxy.routing.admission import PlannedTier, Slot, admit
from llmchat.proxy.routing.choice import choose, prefix_key
from llmchat.proxy.routing.config import NodeConfig, Tier
from llmchat.proxy.routing.nodes import NodeState

BODY = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You are a careful coding assistant. " * 20},
        {"role": "user", "content": "Refactor this function to be iterative. " * 10},
        {"role": "assistant", "content": "Here is the iterative version. " * 30},
        {"role": "user", "content": "Now add type hints."},
    ],
}


LARGE = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "Tool definitions and house rules. " * 1200},
        {"role": "user", "content": "Fix the failing test in tests/test_app.py. " * 40},
    ],
}
"""A coding agent's first turn: a ~40 KB system prompt (the prefix every turn repeats)."""


def _nodes(count: int, lock: threading.Condition) -> list[NodeState]:
    return [
        NodeState(
            NodeConfig(f"gpu-{i:03d}", "http://127.0.0.1:9/v1", max_conns=4, weight=1 + i % 3),
            lock,
            clock=time.monotonic,
        )
        for i in range(count)
    ]


def _percentiles(samples: list[int]) -> tuple[float, float]:
    samples.sort()
    p50 = samples[len(samples) // 2] / 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000
    return p50, p99


def _timed(step: Callable[[], None], calls: int) -> tuple[float, float]:
    for _ in range(min(1000, calls)):
        step()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        step()
        samples.append(clock() - start)
    return _percentiles(samples)


def bench(
    count: int, affinity: bool, calls: int, body: dict[str, object] = BODY
) -> dict[str, tuple[float, float]]:
    lock = threading.Condition()
    nodes = _nodes(count, lock)
    now = time.monotonic()
    tiers = (PlannedTier(0, Tier("m", tuple(n.name for n in nodes)), tuple(nodes)),)
    key = prefix_key(body) if affinity else None

    planned = tiers[0]

    def choose_only() -> None:
        with lock:
            eligible = [n for n in nodes if n.eligible(now)]
            choose(eligible, key, planned.wrr, planned.rankings)

    def decision() -> None:
        k = prefix_key(body) if affinity else None
        slot = admit(tiers, lock=lock, clock=time.monotonic, default_wait_ms=2000, key=k)
        assert isinstance(slot, Slot)
        slot.release()

    def key_only() -> None:
        prefix_key(body)

    return {
        "choose": _timed(choose_only, calls),
        "prefix_key": _timed(key_only, calls),
        "decision": _timed(decision, calls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    print(f"{'nodes':>5} {'affinity':>8} {'what':>10} {'p50 us':>8} {'p99 us':>8}")
    for count in (3, 100):
        for affinity in (False, True):
            results = bench(count, affinity, args.calls)
            for what, (p50, p99) in results.items():
                if what == "prefix_key" and not affinity:
                    continue
                label = "prefix" if affinity else "none"
                print(f"{count:>5} {label:>8} {what:>10} {p50:>8.2f} {p99:>8.2f}")
    for what, (p50, p99) in bench(3, True, args.calls // 4, LARGE).items():
        print(f"{3:>5} {'40KB':>8} {what:>10} {p50:>8.2f} {p99:>8.2f}")


if __name__ == "__main__":
    main()
