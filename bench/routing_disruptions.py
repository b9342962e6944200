"""The disruptions of bench_routing_real: a node killed (SIGTERM, SIGKILL) or the config
reloaded (a node removed, one added) while multi-turn conversations run, and every
request accounted for.

Each request ends as one kind (`bench_routing_real.Outcome.kind`): answered (200 and
``[DONE]``), in-band (200, then the stream broke), refused (an HTTP error), lost (no
status). The router's `on_failure` calls for the disrupted node count the requests
that failed there before their first byte and were retried on another node. A
node's ``tokens_predicted_total`` against the tokens its answers delivered says
whether anything was served twice.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_routing_real import MODEL, Outcome, Served, account, conversations, routing_config


@dataclass
class Disruption:
    """One run: its outcomes and what the router and the nodes counted."""

    label: str
    outcomes: list[Outcome]
    at: float
    """perf_counter() when the disruption happened."""
    gone: str
    """The node the disruption took away (killed, or removed by the reload)."""
    retried: int
    """Requests that failed on `gone` before their first byte (the router's on_failure)."""
    predicted: float
    delivered: int
    moved: list[float] = field(default_factory=list)
    """Seconds from the disruption to the end of each request of a `gone`-homed
    conversation answered elsewhere."""
    exited: float | None = None
    """Seconds from the signal to the killed process's exit; None: not within the wait."""

    @property
    def counts(self) -> dict[str, int]:
        return account(self.outcomes)

    @property
    def served_twice(self) -> int:
        return max(0, round(self.predicted) - self.delivered)


def predicted(nodes: Sequence[Any]) -> float:
    return sum(n.metrics().get("llamacpp:tokens_predicted_total", 0.0) for n in nodes)


def disrupt(
    proxy: Served,
    gone: str,
    counted: dict[str, Any],
    act: Callable[[], None],
    shape: tuple[int, int, int],
    seed: int,
    label: str,
) -> Disruption:
    """Run `shape` (conversations, turns, max_tokens) through `proxy`; `act()` once
    2 x conversations requests are answered. `counted` are the nodes whose predicted
    tokens must equal what their answers delivered (by the node names answers carry)."""
    upstream = proxy.upstream
    failures: list[str] = []
    hook = upstream.on_failure

    def noted(node: Any, error_class: str, status: int | None = None) -> None:
        failures.append(node.name)
        hook(node, error_class, status)

    upstream.on_failure = noted
    count, turns, tokens = shape
    before = predicted(list(counted.values()))
    answered = 0
    at: list[float] = []
    lock = threading.Lock()

    def on_answer(outcome: Outcome) -> None:
        nonlocal answered
        with lock:
            answered += 1
            if answered == count * 2 and not at:
                at.append(time.perf_counter())
                act()

    run = conversations(proxy.url, count, turns, tokens, seed, on_answer)
    upstream.on_failure = hook
    after = predicted(list(counted.values()))
    kill = at[0] if at else time.perf_counter()
    home = {o.conversation: o.node for o in run if o.turn == 0}
    moved = sorted(
        o.ended - kill
        for o in run
        if o.kind == "answered"
        and home.get(o.conversation) == gone
        and o.node != gone
        and o.ended > kill
    )
    delivered = sum(o.completion_tokens for o in run if o.kind == "answered" and o.node in counted)
    for o in run:
        if o.kind != "answered":
            print(
                f"  {label} {o.kind}: conversation {o.conversation} turn {o.turn} node {o.node!r} "
                f"started {o.started - kill:+.3f} s, ended {o.ended - kill:+.3f} s: {o.error}"
            )
    return Disruption(
        label,
        run,
        kill,
        gone,
        retried=sum(1 for name in failures if name == gone),
        predicted=after - before,
        delivered=delivered,
        moved=moved,
    )


def failover(
    nodes: Sequence[Any], victim: int, how: signal.Signals, shape: tuple[int, int, int], seed: int
) -> Disruption:
    """Node `victim` of a 3-node `affinity: prefix` proxy gets `how` mid-run."""
    from llmchat.proxy.routing import RoutedUpstream

    names = [f"n{i}" for i in range(len(nodes))]
    upstream = RoutedUpstream(routing_config(dict(zip(names, nodes, strict=True)), "prefix"))
    upstream.start_health()  # as `llmchat proxy --config` does: the probes find a node gone
    proxy = Served(upstream)
    survivors = {
        name: n for i, (name, n) in enumerate(zip(names, nodes, strict=True)) if i != victim
    }
    process = nodes[victim].process
    exited: list[float] = []

    def act() -> None:
        sent = time.perf_counter()
        process.send_signal(how)

        def note_exit() -> None:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                return
            exited.append(time.perf_counter() - sent)

        threading.Thread(target=note_exit, daemon=True).start()

    try:
        result = disrupt(proxy, names[victim], survivors, act, shape, seed, how.name)
    finally:
        proxy.close()
    result.exited = exited[0] if exited else None
    return result


def reload_under_load(
    nodes: Sequence[Any], config_dir: Path, shape: tuple[int, int, int], seed: int
) -> Disruption:
    """A proxy over n0 and n1 re-reads its file mid-run (as on SIGHUP): n0 removed, n2 added.

    Streams in flight on n0 finish there; new requests go to n1 and n2.
    """
    from llmchat.proxy.routing import RoutedUpstream
    from llmchat.proxy.routing.reload import load_routing, reload_from

    names = {f"n{i}": node for i, node in enumerate(nodes)}
    path = config_dir / "routing.json"
    path.write_text(
        json.dumps(routing_config({k: names[k] for k in ("n0", "n1")}, "prefix", raw=True))
    )
    upstream = RoutedUpstream(load_routing(path, {}).config)
    upstream.start_health()
    proxy = Served(upstream)
    log = logging.getLogger("llmchat.proxy")

    def act() -> None:
        new = routing_config({k: names[k] for k in ("n1", "n2")}, "prefix", raw=True)
        path.write_text(json.dumps(new))
        assert reload_from(path, upstream, log) is not None

    try:
        return disrupt(proxy, "n0", names, act, shape, seed, "reload")
    finally:
        proxy.close()


def rows(runs: Sequence[Disruption]) -> list[list[str]]:
    """The accounting table's rows, one column per run."""

    def each(value: Callable[[Disruption], str]) -> list[str]:
        return [value(run) for run in runs]

    def first_moved(run: Disruption) -> str:
        return f"{run.moved[0] * 1e3:,.0f} ms ({len(run.moved)})" if run.moved else "—"

    def exited(run: Disruption) -> str:
        if run.label == "reload":
            return "(not killed)"
        return f"{run.exited * 1e3:,.0f} ms" if run.exited is not None else "not within 60 s"

    return [
        ["requests", *each(lambda r: f"{len(r.outcomes)}")],
        ["answered (200 and `[DONE]`)", *each(lambda r: f"{r.counts['answered']}")],
        [
            "… after failing on the node before the first byte, retried on another",
            *each(lambda r: f"{r.retried}"),
        ],
        ["failed in-band (after the first byte)", *each(lambda r: f"{r.counts['in-band']}")],
        ["refused (an HTTP error)", *each(lambda r: f"{r.counts['refused']}")],
        ["lost (no status)", *each(lambda r: f"{r.counts['lost']}")],
        ["served twice", *each(lambda r: f"{r.served_twice}")],
        [
            "tokens the counted nodes predicted / delivered",
            *each(lambda r: f"{r.predicted:,.0f} / {r.delivered:,}"),
        ],
        ["disruption → first of the node's conversations served elsewhere", *each(first_moved)],
        ["the signalled process exited after", *each(exited)],
    ]


__all__ = ["MODEL", "Disruption", "disrupt", "failover", "reload_under_load", "rows"]
