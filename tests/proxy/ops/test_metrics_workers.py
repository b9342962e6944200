"""``/metrics`` under real gunicorn with 2 workers: one scrape holds every worker's counts.

The arbiter makes the multi-process directory before it forks (in its
TMPDIR, here the test's) and removes it when it stops.
"""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path

import pytest
import requests

from ...cli.test_cli_workers_slots import Proxy
from ..routing.nodes_support import nodes

parser = pytest.importorskip("prometheus_client.parser", reason="needs the metrics extra")

N = 12


def _chat(url: str) -> int:
    answer = requests.post(  # a new connection each time: either worker may take it
        url + "/v1/chat/completions",
        json={"model": "fast", "messages": [{"role": "user", "content": "hi"}]},
        timeout=20,
    )
    return answer.status_code


def test_the_counts_add_up_across_two_workers(tmp_path: Path) -> None:
    with nodes("a") as [node]:
        config = tmp_path / "routing.yaml"
        config.write_text(
            f'nodes:\n  - {{name: a, url: "{node.url}"}}\n'
            "models:\n  fast: [{model: x, nodes: [a]}]\n"
        )
        proxy = Proxy(config, tmp_path)
        try:
            assert len(list(tmp_path.glob("llmchat-metrics-*"))) == 1
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                assert list(pool.map(_chat, [proxy.url] * N)) == [200] * N
            # A request is counted when its answer closes, which may come just after the
            # client read it: scrape until all are in (each scrape is one more request).
            deadline = time.monotonic() + 20
            while True:
                text = requests.get(proxy.url + "/metrics", timeout=20).text
                if _counted(text) >= N or time.monotonic() > deadline:
                    break
        finally:
            assert proxy.stop() == 0
    assert _counted(text) == N, text
    assert not list(tmp_path.glob("llmchat-metrics-*"))  # removed with the arbiter


def _counted(text: str) -> float:
    """The chat requests a scrape counts (the scrapes themselves are the proxy's own)."""
    counted = 0.0
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llmchat_requests_total" and sample.labels["face"] != "proxy":
                assert sample.labels["alias"] == "fast" and sample.labels["node"] == "a"
                counted += sample.value
    return counted
