"""Node health over loopback servers: probes, loading, ejection with back-off, re-admission, report.

Every node is a real `ScriptedServer` (or a refused port) behind a real llmchat
backend; `Node` is a minimal `HealthTarget` around it. Time is a `FakeClock`:
rounds run with `probe_now()` / `run_due()`, never by sleeping.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.backends import Anthropic, Gemini, Ollama, OpenAIResponses
from llmchat.proxy import make_app, make_server
from llmchat.proxy.routing.ejections import Backoff, ejects
from llmchat.proxy.routing.health import HealthMonitor, HealthTarget
from llmchat.proxy.routing.health_report import health_report
from llmchat.proxy.routing.probes import ProbeResult
from llmchat.testing import Drop, RecordedRequest, Reply, ScriptedServer

KEY = "sk-node-secret-7f3a9"
LOADING = Reply.error(503, "Loading model", "unavailable_error")
PROPS = Reply.json({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 4})
MODELS = Reply.json({"object": "list", "data": [{"id": "qwen3-coder", "object": "model"}]})


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Node:
    """The smallest `HealthTarget`: a name, a dialect, a backend, and what the monitor did."""

    def __init__(self, name: str, backend: OpenAICommon, dialect: str = "openai") -> None:
        self.name = name
        self.dialect = dialect
        self.backend = backend
        self.ejections: list[tuple[float, str]] = []
        self.readmits = 0
        self.loading = False
        self.capacity: int | None = None
        self.capacity_set = threading.Event()

    @property
    def ejected(self) -> bool:
        return len(self.ejections) > self.readmits

    def eject(self, seconds: float, reason: str) -> None:
        self.ejections.append((seconds, reason))

    def readmit(self) -> None:
        self.readmits += 1

    def set_loading(self, loading: bool) -> None:
        self.loading = loading

    def set_capacity(self, slots: int) -> None:
        self.capacity = slots
        self.capacity_set.set()

    def report(self) -> dict[str, Any]:
        return {
            "eligible": not self.ejected and not self.loading,
            "url": self.backend.api_url,
            "max_conns": self.capacity,
        }


class ByPath:
    """A callable script: each path's replies in order, its last one kept; else a 404."""

    def __init__(self, replies: dict[str, list[Reply]]) -> None:
        self.replies = replies

    def __call__(self, request: RecordedRequest) -> Reply:
        replies = self.replies.get(request.path.split("?")[0])
        if not replies:
            return Reply.error(404, "File Not Found", "not_found_error")
        return replies.pop(0) if len(replies) > 1 else replies[0]


def paths(server: ScriptedServer) -> list[str]:
    return [r.path for r in server.requests]


@pytest.fixture
def serve() -> Iterator[Any]:
    """`serve({path: [replies]})`: a started loopback server playing them, stopped after."""
    servers: list[ScriptedServer] = []

    def start(replies: dict[str, list[Reply]]) -> ScriptedServer:
        server = ScriptedServer(ByPath(replies)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def refused_url() -> str:
    """A loopback URL nothing listens on: a port bound, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def llama(server: ScriptedServer, name: str = "gpu-a", **kwargs: Any) -> Node:
    return Node(name, OpenAICommon(server.url, api_key=KEY, **kwargs))


def test_a_node_satisfies_the_protocol() -> None:
    node: HealthTarget = Node("n", OpenAICommon("http://127.0.0.1:9/v1"))
    assert node.name == "n"


# -- llama-server: /health, /props, loading ------------------------------------------


def test_healthy_llama_server_gives_its_slots(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [PROPS]})
    node = llama(server)
    results = HealthMonitor([node], clock=FakeClock()).probe_now()
    assert results["gpu-a"] == ProbeResult("healthy", "GET /health", slots=4, context_length=8192)
    assert (node.capacity, node.loading, node.ejected) == (4, False, False)
    assert paths(server) == ["/health", "/props"]  # at the server root, not under /v1
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the node's own key


def test_loading_model_is_not_a_failure(serve: Any) -> None:
    server = serve({"/health": [LOADING, LOADING, Reply.json({"status": "ok"})], "/props": [PROPS]})
    node = llama(server)
    monitor = HealthMonitor([node], clock=FakeClock())
    assert monitor.probe_now()["gpu-a"].state == "loading"
    assert node.loading and not node.ejected and node.report()["eligible"] is False
    monitor.probe_now()
    assert node.loading and node.ejections == []
    assert monitor.probe_now()["gpu-a"].state == "healthy"
    assert not node.loading and node.report()["eligible"] is True and node.capacity == 4
    assert paths(server) == ["/health", "/health", "/health", "/props"]


def test_server_without_health_is_asked_for_its_models(serve: Any) -> None:
    server = serve({"/v1/models": [MODELS]})  # /health and /props: 404
    node = llama(server)
    result = HealthMonitor([node], clock=FakeClock()).probe_now()["gpu-a"]
    assert result == ProbeResult("healthy", "GET /models")
    assert paths(server) == ["/health", "/v1/models"]
    assert node.capacity is None and not node.ejected


def test_a_failing_fallback_is_down(serve: Any) -> None:
    server = serve({"/v1/models": [Reply.error(500, "boom")]})
    node = llama(server)
    result = HealthMonitor([node], clock=FakeClock()).probe_now()["gpu-a"]
    assert (result.state, result.route) == ("down", "GET /models")
    assert node.ejected and node.ejections[0][0] == 5.0


def test_a_props_failure_does_not_fail_a_healthy_node(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [Reply.error(500, "x")]})
    node = llama(server)
    assert HealthMonitor([node], clock=FakeClock()).probe_now()["gpu-a"].state == "healthy"
    assert node.capacity is None and not node.ejected


class BrokenLimits(OpenAICommon):
    def probe_server_limits(self) -> dict[str, Any]:
        raise RuntimeError("a subclass's own probe failed")


def test_a_raising_limits_probe_does_not_fail_a_healthy_node(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})]})
    node = Node("gpu-a", BrokenLimits(server.url))
    assert HealthMonitor([node], clock=FakeClock()).probe_now()["gpu-a"].state == "healthy"
    assert node.capacity is None and not node.ejected


def test_health_500_ejects(serve: Any) -> None:
    server = serve({"/health": [Reply.error(500, "Model failed to load")]})
    node = llama(server)
    result = HealthMonitor([node], clock=FakeClock()).probe_now()["gpu-a"]
    assert result.state == "down" and "HTTP 500" in (result.note or "")
    assert node.ejected


# -- refused, ejected, backed off, readmitted by a probe ------------------------------


def test_refused_connection_ejects_without_leaking_the_key() -> None:
    node = Node("gpu-b", OpenAICommon(refused_url(), api_key=KEY))
    result = HealthMonitor([node], clock=FakeClock()).probe_now()["gpu-b"]
    assert result.state == "down" and result.note and "GET /health failed" in result.note
    [(seconds, reason)] = node.ejections
    assert seconds == 5.0 and "GET /health" in reason and KEY not in reason


def test_readmitted_by_a_probe_after_the_backoff_not_before(serve: Any) -> None:
    ok = Reply.json({"status": "ok"})
    server = serve({"/health": [Reply(before_headers=[Drop()]), ok], "/props": [PROPS]})
    node, clock = llama(server), FakeClock()
    monitor = HealthMonitor([node], clock=clock)
    assert monitor.probe_now()["gpu-a"].state == "down"  # the connection cut: ejected
    assert node.ejections[0][0] == 5.0
    clock.now = 4.9
    assert monitor.probe_now()["gpu-a"].state == "healthy"  # back, but in its back-off
    assert node.ejected and node.readmits == 0
    clock.now = 5.0
    monitor.probe_now()
    assert not node.ejected and node.readmits == 1 and node.capacity == 4


def test_not_readmitted_by_time_alone(serve: Any) -> None:
    server = serve({"/health": [Reply.error(500, "down"), Reply.error(500, "down"), LOADING]})
    node, clock = llama(server), FakeClock()
    monitor = HealthMonitor([node], clock=clock)
    monitor.probe_now()
    clock.now = 1000.0
    assert node.ejected  # long past the back-off: still out until a probe says so
    monitor.probe_now()  # still failing: stays out, not ejected twice
    assert node.ejected and len(node.ejections) == 1
    monitor.probe_now()  # loading: up again, readmitted, not yet eligible
    assert not node.ejected and node.loading and node.report()["eligible"] is False


def test_request_failures_eject_with_a_doubling_backoff(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [PROPS]})
    node, clock = llama(server), FakeClock()
    monitor = HealthMonitor([node], clock=clock)
    backoffs = []
    for _ in range(7):
        assert monitor.note_failure(node, "connection")
        assert not monitor.note_failure(node, "timeout")  # already out: one ejection
        backoffs.append(node.ejections[-1][0])
        clock.now += backoffs[-1]
        monitor.probe_now()  # readmitted, strikes kept (it has not served yet)
        assert not node.ejected
    assert backoffs == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0]
    monitor.note_success(node)  # a request served: back to the base
    monitor.note_failure(node, "http", 502)
    assert node.ejections[-1] == (5.0, "a request failed (HTTP 502)")


def test_a_healthy_probe_while_admitted_resets_the_backoff(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [PROPS]})
    node, clock = llama(server), FakeClock()
    monitor = HealthMonitor([node], clock=clock)
    monitor.note_failure(node, "timeout")
    clock.now = 5.0
    monitor.probe_now()  # readmitted
    monitor.probe_now()  # healthy while admitted: it serves again
    monitor.note_failure(node, "timeout")
    assert [s for s, _ in node.ejections] == [5.0, 5.0]


KEPT = [("http", 400), ("http", 404), ("http", 422), ("http", 429), ("client_abort", None)]
KEPT += [("cancelled", None), (None, None), ("http", 503)]  # 503: not ready (no strike)
EJECTED = [("http", s) for s in (401, 403, 408, 500, 502, None)]
EJECTED += [(c, None) for c in ("connection", "timeout", "response", "unknown")]


@pytest.mark.parametrize(
    ("error_class", "status", "out"),
    [(*failure, False) for failure in KEPT] + [(*failure, True) for failure in EJECTED],
)
def test_which_failures_eject(error_class: str | None, status: int | None, out: bool) -> None:
    assert ejects(error_class, status) is out
    node = Node("n", OpenAICommon(refused_url()))
    assert HealthMonitor([node], clock=FakeClock()).note_failure(node, error_class, status) is out
    assert node.ejected is out


def test_backoff_bookkeeping() -> None:
    backoff = Backoff()
    assert not backoff.ejected and backoff.remaining(0.0) == 0.0
    assert backoff.eject(10.0, "x") == 5.0
    assert backoff.remaining(12.0) == 3.0 and not backoff.may_readmit(14.9)
    assert backoff.may_readmit(15.0)


# -- other dialects: their own model listing, their own key --------------------------


@pytest.mark.parametrize(
    ("dialect", "make", "route", "header", "value"),
    [
        ("anthropic", lambda url: Anthropic(url, api_key=KEY), "/v1/models", "x-api-key", KEY),
        ("responses", lambda url: OpenAIResponses(url, api_key=KEY), "/v1/models", "authorization",
         f"Bearer {KEY}"),
        ("gemini", lambda url: Gemini(url, api_key=KEY), "/v1/models", "x-goog-api-key", KEY),
        ("ollama", lambda url: Ollama(url.removesuffix("/v1"), api_key=KEY), "/api/tags",
         "authorization", f"Bearer {KEY}"),
    ],
)  # fmt: skip
def test_other_dialects_use_their_listing(
    serve: Any, dialect: str, make: Any, route: str, header: str, value: str
) -> None:
    server = serve({route: [Reply.json({"data": [], "models": []})]})
    node = Node("remote", make(server.url), dialect)
    assert HealthMonitor([node], clock=FakeClock()).probe_now()["remote"].state == "healthy"
    assert paths(server) == [route]  # no llama-server /health, no /props
    assert server.requests[0].headers[header] == value


def test_anthropic_node_refusing_the_key_is_down(serve: Any) -> None:
    server = serve({"/v1/models": [Reply.error(401, "invalid x-api-key", "authentication_error")]})
    node = Node("claude", Anthropic(server.url, api_key=KEY), "anthropic")
    result = HealthMonitor([node], clock=FakeClock()).probe_now()["claude"]
    assert (result.state, result.note) == ("down", "GET /models answered HTTP 401")
    assert node.ejected


# -- the schedule, the thread ---------------------------------------------------------


def test_readmission_delay_with_the_default_interval(serve: Any) -> None:
    """Computed on the monitor's own schedule (run_due with a fake clock), not slept."""
    health = [Reply.json({"status": "ok"})]
    server = serve({"/health": health, "/props": [PROPS]})
    node, clock = llama(server), FakeClock()
    monitor = HealthMonitor([node], clock=clock)  # interval 5.0
    assert monitor.run_due() == 5.0
    clock.now = 1.0
    monitor.note_failure(node, "connection")  # out until 6.0
    assert monitor.run_due() == 5.0  # the next probe is at the back-off's end
    clock.now = 6.0  # already back by then: readmitted at the back-off's end
    monitor.run_due()
    assert not node.ejected

    monitor.note_failure(node, "connection")  # out until 6 + 10 (a second strike)
    health[0] = Reply.error(500, "down")
    clock.now += monitor.run_due()  # 16.0: probed at the back-off's end, still down
    assert clock.now == 16.0 and node.ejected
    back_at = 17.0  # comes back a second later
    health[0] = Reply.json({"status": "ok"})
    clock.now += monitor.run_due()
    assert not node.ejected and clock.now == 21.0  # the next probe, an interval on
    assert clock.now - back_at <= monitor.interval


def test_thread_probes_and_closes_promptly(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [PROPS]})
    node = llama(server)
    monitor = HealthMonitor([node], interval=3600.0)
    monitor.start()
    assert node.capacity_set.wait(10.0)  # the first round runs at once
    started = time.monotonic()
    monitor.close()  # waiting an hour for its next round: woken, not slept out
    assert time.monotonic() - started < 1.0
    assert not any(t.name == "llmchat-health" for t in threading.enumerate())


def test_a_probe_that_raises_is_a_down_node() -> None:
    node = Node("n", OpenAICommon("http://127.0.0.1:9/v1", api_key=KEY))

    def probe(target: HealthTarget) -> ProbeResult:
        raise RuntimeError(f"bad {KEY}")

    result = HealthMonitor([node], clock=FakeClock(), probe=probe).probe_now()["n"]
    assert result.state == "down" and KEY not in (result.note or "") and node.ejected


def test_a_round_probes_nodes_side_by_side(serve: Any) -> None:
    gate = threading.Barrier(3, timeout=10.0)

    def probe(target: HealthTarget) -> ProbeResult:
        gate.wait()  # all three at once, or the barrier breaks
        return ProbeResult("healthy", "GET /health", slots=2)

    nodes = [Node(f"n{i}", OpenAICommon("http://127.0.0.1:9/v1")) for i in range(3)]
    monitor = HealthMonitor(nodes, clock=FakeClock(), probe=probe)
    assert {r.state for r in monitor.probe_now().values()} == {"healthy"}
    assert [n.capacity for n in nodes] == [2, 2, 2]
    monitor.close()


def test_reload_keeps_the_backoff_of_a_kept_node() -> None:
    kept, dropped = (Node(n, OpenAICommon(refused_url())) for n in ("kept", "dropped"))
    monitor = HealthMonitor([kept, dropped], clock=FakeClock())
    monitor.note_failure(kept, "connection")
    added = Node("added", OpenAICommon(refused_url()))
    monitor.set_targets([kept, added])
    assert monitor.targets == [kept, added]
    assert monitor.report(kept)["ejected"] is True and monitor.report(dropped) == {}
    assert not monitor.note_failure(dropped, "connection")


@pytest.mark.parametrize("bad", [0, -1.0, True, "5"])
def test_interval_is_checked(bad: Any) -> None:
    with pytest.raises(ValueError, match="interval"):
        HealthMonitor([], interval=bad)


# -- GET /health ---------------------------------------------------------------------


def test_health_report_says_ok_degraded_and_the_live_config(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [PROPS]})
    good, bad = llama(server, "gpu-a"), Node("gpu-b", OpenAICommon(refused_url(), api_key=KEY))
    monitor = HealthMonitor([good, bad], clock=FakeClock())
    monitor.probe_now()
    report = health_report(
        [good, bad],
        config_source="/etc/llmchat/routing.yaml",
        config_digest="ab12",
        monitor=monitor,
    )
    assert report["status"] == "ok"
    assert report["config"] == {"source": "/etc/llmchat/routing.yaml", "digest": "ab12"}
    a, b = report["nodes"]
    assert (a["name"], a["eligible"], a["max_conns"]) == ("gpu-a", True, 4)
    assert a["health"]["last_probe"]["state"] == "healthy"
    assert (b["name"], b["eligible"], b["health"]["ejected"]) == ("gpu-b", False, True)
    assert b["health"]["backoff_remaining_s"] == 5.0
    assert KEY not in json.dumps(report)

    monitor.note_failure(good, "connection")
    degraded = health_report([good, bad], config_source="x", config_digest="y")
    assert degraded["status"] == "degraded" and "health" not in degraded["nodes"][0]


def test_health_report_scrubs_a_key_a_node_reports() -> None:
    node = Node("n", OpenAICommon(f"http://127.0.0.1:9/v1?key={KEY}", api_key=KEY))
    report = health_report([node], config_source="c", config_digest="d")
    assert KEY not in json.dumps(report) and "[redacted]" in report["nodes"][0]["url"]


class RoutingStub:
    """What the app asks of a routing upstream for GET /health."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes

    def health_report(self) -> dict[str, Any]:
        return health_report(self.nodes, config_source="routing.yaml", config_digest="d1")


def test_app_health_includes_the_routing_report(serve: Any) -> None:
    server = serve({"/health": [Reply.json({"status": "ok"})], "/props": [PROPS]})
    node = llama(server)
    app = make_app(OpenAICommon(server.url), api_key="proxy-key")
    one_upstream = app.completions.upstream
    httpd = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with requests.Session() as http:
            plain = http.get(httpd.url + "/health", timeout=10)
            assert (plain.status_code, plain.json()) == (200, {"status": "ok"})
            app.completions.upstream = RoutingStub([node])  # type: ignore[assignment]
            clock = FakeClock()
            monitor = HealthMonitor([node], clock=clock)
            monitor.note_failure(node, "connection")  # no node eligible
            down = http.get(httpd.url + "/health", timeout=10)
            assert down.status_code == 503 and down.json()["status"] == "degraded"
            clock.now = 5.0
            monitor.probe_now()  # readmitted
            up = http.get(httpd.url + "/health", timeout=10)
            assert up.status_code == 200 and up.json()["status"] == "ok"
            assert up.json()["config"] == {"source": "routing.yaml", "digest": "d1"}
            assert KEY not in up.text
    finally:
        app.completions.upstream = one_upstream
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
