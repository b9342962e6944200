"""Scraping the proxy's ``GET /metrics`` and reading it with prometheus-client's own parser."""

from __future__ import annotations

import time
from collections.abc import Callable

import requests

Samples = dict[str, list[tuple[dict[str, str], float]]]
"""Each sample's name (``_total``, ``_count``, ``_sum``, ``_bucket`` included) to its
label sets and values."""


def scrape(url: str, key: str | None = None) -> Samples:
    """One scrape of the proxy at `url` (with the admin `key`, if given), parsed."""
    from prometheus_client import parser

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    answer = requests.get(url + "/metrics", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in parser.text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def scrape_until(url: str, done: Callable[[Samples], bool]) -> Samples:
    """Scrape until `done`: a request is counted when its answer closes, which may come
    just after the client read it (each scrape is one more request, of the proxy's own)."""
    deadline = time.monotonic() + 10
    while True:
        samples = scrape(url)
        if done(samples) or time.monotonic() > deadline:
            return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there are none)."""
    return sum(
        value
        for found, value in samples.get(name, [])
        if all(found.get(label) == want for label, want in labels.items())
    )
