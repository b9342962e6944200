"""``/metrics`` under real gunicorn with 2 workers: one scrape holds every worker's counts.

The arbiter makes the multi-process directory before it forks (in its
TMPDIR, here the test's) and removes it when it stops.
"""

from __future__ import annotations

import concurrent.futures
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
            text = requests.get(proxy.url + "/metrics", timeout=20).text
        finally:
            assert proxy.stop() == 0
    counted = 0.0
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llmchat_requests_total" and sample.labels["face"] != "proxy":
                assert sample.labels["alias"] == "fast" and sample.labels["node"] == "a"
                counted += sample.value
    assert counted == N, text
    assert not list(tmp_path.glob("llmchat-metrics-*"))  # removed with the arbiter
