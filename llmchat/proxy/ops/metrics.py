"""``GET /metrics``: the proxy's counts in the Prometheus text format (`prometheus-client`).

Counting comes from the usage events (`UsageLog.listeners`): one event per
request when it ends, so nothing is done per streamed delta. Label values are
bounded: the key's name (never the key), the configured alias (a model name a
client invents is "other"), the node, the face and the status class. Time to
first byte and the wait for an admitted slot come from the event's ``ttfb_ms``
and ``wait_ms``; routing's 429s and budget refusals are counted apart too. Node
gauges (in-flight, health) are read at scrape time from the routed upstream.
Without `prometheus-client` installed the route answers a 503 naming the
``metrics`` extra. Under gunicorn with ``PROMETHEUS_MULTIPROC_DIR`` set, the
scrape merges every worker's files (prometheus-client's multi-process mode).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..client_exchange import ClientExchange
from ..router import Route
from ..usage.event import UsageEvent

__all__ = ["ProxyMetrics", "metrics_routes"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TOKEN_KINDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cached_tokens"),
    ("cache_write", "cache_write_tokens"),
    ("reasoning", "reasoning_tokens"),
)
_LABELS = ("key", "alias", "node", "face")
_WAIT_LABELS = ("alias", "node", "face")
# A wait is usually none at all, else up to the tier's wait_ms (2 s by default).
_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_ADMISSION_REFUSAL = "overloaded"
"""The error class of routing's 429 (`routing.attempts.refusal`)."""
_BUDGET_REFUSAL = "budget"
"""The error class of a key over its budget (`budget_refusal.over_budget`)."""


def _status_class(status: int) -> str:
    # 499 (the client went away) is its own class: it is neither the proxy's nor the client's error.
    return "499" if status == 499 else f"{status // 100}xx"


class ProxyMetrics:
    """The proxy's metrics in one registry; `observe` counts one usage event."""

    def __init__(self, app: Any) -> None:
        import prometheus_client as pc

        self._pc = pc
        self._app = app
        self.registry = pc.CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.requests = pc.Counter(
            "llmchat_requests", "Requests answered", (*_LABELS, "status_class"), registry=reg
        )
        self.duration = pc.Histogram(
            "llmchat_request_duration_seconds",
            "Time from the request to the answer's end",
            _LABELS,
            buckets=_BUCKETS,
            registry=reg,
        )
        self.ttfb = pc.Histogram(
            "llmchat_time_to_first_byte_seconds",
            "Time from the request to the first byte of the answer's body",
            _LABELS,
            buckets=_BUCKETS,
            registry=reg,
        )
        self.admission_wait = pc.Histogram(
            "llmchat_admission_wait_seconds",
            "Time a routed request waited for a slot on a node (refused ones too)",
            _WAIT_LABELS,
            buckets=_WAIT_BUCKETS,
            registry=reg,
        )
        self.admission_refusals = pc.Counter(
            "llmchat_admission_refusals",
            "Routed requests refused with a 429: every node busy past the wait",
            ("alias", "face"),
            registry=reg,
        )
        self.budget_refusals = pc.Counter(
            "llmchat_budget_refusals",
            "Requests refused with a 429 because their key was over its budget",
            ("key",),
            registry=reg,
        )
        self.tokens = pc.Counter(
            "llmchat_tokens", "Tokens by kind", (*_LABELS, "kind"), registry=reg
        )
        self.cost = pc.Counter(
            "llmchat_cost", "Cost of the requests, in the prices' unit", _LABELS, registry=reg
        )
        self.aborts = pc.Counter(
            "llmchat_client_aborts", "Requests the client abandoned (499)", _LABELS, registry=reg
        )
        self.failures = pc.Counter(
            "llmchat_upstream_failures",
            "Failed requests by error class",
            (*_LABELS, "error_type"),
            registry=reg,
        )
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            reg.register(_NodeCollector(app))

    def observe(self, event: UsageEvent) -> None:
        """Count one finished request (a usage event)."""
        if event.is_probe:
            return
        labels = (
            event.key_id or "none",
            event.alias or "other",
            event.node or "none",
            event.face,
        )
        self.requests.labels(*labels, _status_class(event.status)).inc()
        self.duration.labels(*labels).observe(event.duration_ms / 1000.0)
        if event.ttfb_ms is not None:
            self.ttfb.labels(*labels).observe(event.ttfb_ms / 1000.0)
        if event.wait_ms is not None:
            self.admission_wait.labels(labels[1], labels[2], labels[3]).observe(
                event.wait_ms / 1000.0
            )
        for kind, name in _TOKEN_KINDS:
            count = getattr(event, name, None)
            if count:
                self.tokens.labels(*labels, kind).inc(count)
        if event.cost is not None:
            self.cost.labels(*labels).inc(event.cost)
        if event.status == 499 or event.error_type == "client_abort":
            self.aborts.labels(*labels).inc()
        elif event.error_type is not None:
            self.failures.labels(*labels, event.error_type[:40]).inc()
            if event.error_type == _ADMISSION_REFUSAL:
                self.admission_refusals.labels(labels[1], labels[3]).inc()
            elif event.error_type == _BUDGET_REFUSAL:
                self.budget_refusals.labels(labels[0]).inc()

    def scrape(self) -> tuple[bytes, str]:
        """The exposition text and its content type (every worker's, in multi-process mode)."""
        pc = self._pc
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = pc.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            registry.register(_NodeCollector(self._app))
        return pc.generate_latest(registry), pc.CONTENT_TYPE_LATEST


class _NodeCollector:
    """In-flight requests and health per node, read at scrape time (this process's view)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        inflight = GaugeMetricFamily(
            "llmchat_node_inflight_requests", "Requests in flight per node", labels=["node"]
        )
        health = GaugeMetricFamily(
            "llmchat_node_healthy",
            "1 when the node can serve, 0 when ejected or not ready",
            labels=["node"],
        )
        nodes = getattr(self._app.upstream, "nodes", None) or {}
        for name, node in dict(nodes).items():
            inflight.add_metric([name], float(node.inflight))
            health.add_metric([name], 1.0 if node.can_serve() else 0.0)
        yield inflight
        yield health

    def describe(self) -> list[Any]:
        return []


def metrics_routes(app: Any) -> list[Route]:
    """The ``/metrics`` route, counting `app`'s usage events from now on."""
    try:
        metrics: ProxyMetrics | None = ProxyMetrics(app)
    except ImportError:
        metrics = None
    if metrics is not None:
        app.usage.listeners.append(metrics.observe)

    def _metrics(exchange: ClientExchange) -> list[bytes]:
        if metrics is None:
            return exchange.error(
                503, "metrics need prometheus-client: pip install 'llmchat[metrics]'", "api_error"
            )
        body, content_type = metrics.scrape()
        return exchange.text(200, body, content_type)

    return [Route("GET", "/metrics", "proxy", _metrics)]
