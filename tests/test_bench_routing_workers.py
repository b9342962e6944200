"""The workers bench's pure helpers: the in-flight counter, the config it serves, the
summary and its tables. No sockets, no processes (the bench itself is run by hand)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import yaml

from llmchat.proxy.routing.config import parse_config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_routing_workers as bench
from bench_routing_real import Outcome


def test_in_flight_keeps_the_most_at_once() -> None:
    counter = bench.InFlight()
    counter.enter()
    counter.enter()
    counter.leave()
    counter.enter()
    counter.leave()
    counter.leave()
    assert (counter.now, counter.peak, counter.total) == (0, 2, 3)
    threads = [threading.Thread(target=counter.enter) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert counter.now == 8 and counter.peak == 8


def test_the_config_is_a_valid_routing_config() -> None:
    config = parse_config(yaml.safe_load(bench.config_text("http://127.0.0.1:9/v1", "none")))
    [node] = config.nodes
    assert node.max_conns == 2 and config.routing.affinity == "none"


def test_the_summary_and_its_tables() -> None:
    answered = Outcome(1, 0, status=200, done=True, timings={"cache_n": 30, "prompt_n": 10})
    refused = Outcome(2, 0, status=429)
    runs = [
        {"affinity": "prefix", "outcomes": [answered, refused]},
        {"affinity": "none", "outcomes": [answered]},
    ]
    result = bench.summary(runs, peak=2, max_conns=2)
    assert result["node_peak_inflight"] == 2
    assert result["modes"]["prefix"]["requests"] == {
        "answered": 1,
        "in-band": 0,
        "refused": 1,
        "lost": 0,
    }
    assert result["modes"]["none"]["cache"]["cached"] == 30
    log = "slot get_availabl: id  1 | task 3 | selected slot by id (1)\n" * 2
    result["slot_selections"] = bench.slot_selections(log + "selected slot by LRU, t_last = 5\n")
    assert result["slot_selections"] == {"id": 2, "LCP similarity": 0, "LRU": 1}
    text = bench.markdown(result)
    assert "| most chat requests in flight at the node at once | 2 |" in text
    assert "3 requests, 2 answered, 1 not" in text and "| `affinity: prefix` | 30 |" in text
