"""`RoutedUpstream`: the `Completions` upstream that routes each request to a tier and a node.

What `Completions` asks of an upstream (`proxy.upstream.Upstream` is the
one-upstream version): `start(body, call)` resolves the client's model to an
alias (`table`), takes a slot on a node of its first tier that admits it
(`admission`, `choice`), rewrites the body's model to the tier's, and starts
the node's streaming completion through a one-node `Upstream` (the same
settings mapping and pacing). It returns once the first chunk has arrived or
the Response has settled: a node that refused the connection, timed out, or
answered 429 or 5xx before any chunk is left for another eligible node of the
tier, then the next tier; after the first chunk a failure is the face's
in-band error, never a silent switch. A client's model nothing matches is the
face's 404; no slot in time on any tier is a 429 with ``retry-after``; no
eligible node at all is a 503 with it.

The slot is held until the node's Response settles (streams included; a
cancel too) and released once. One ejection policy, the `health` monitor's
(`ejections`): a node that fails a request (`ejections.ejects`) is ejected
for a back-off (`PASSIVE_BACKOFF`, doubling to `MAX_BACKOFF`). After the
back-off it is eligible again for routing, and readmitted (its back-off
cleared) by the first probe that succeeds or by a request that starts on
it, whichever comes first; a failure then ejects it for twice as long. A
503 (`ejections.not_ready`: loading, or shedding load) is no failure: the
node is not eligible until a probe finds it healthy, as a probe's 503
would leave it, with no back-off. `start_health()`
starts the probing thread (after a fork, never at construction); without it
the passive rules alone apply. `health_report()` is ``GET /health``'s answer.

Metadata routes (`model_names` aside: the aliases), the token count, the side
requests and the OpenAI face's byte relay go to the *metadata node*: the first
eligible node of the first tier of the first alias in the config (else the
first node). `reload(config)` swaps the tables for new requests; requests in
flight keep the node objects they started on, and nodes that persist by name
keep their slots and health.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...redact import Redactor
from ...response import Response
from ..failures import Failure, client_message, failure_of, status_for
from ..relay import Relay
from ..upstream import Call, Upstream
from .admission import Busy, PlannedTier, Slot, admit, retryable
from .attempts import Next, over_route
from .choice import prefix_key
from .config import RoutingConfig
from .ejections import BACKOFF_BASE, BACKOFF_CAP, broke_off
from .health import HealthMonitor, HealthTarget, probe_target
from .health_report import health_report
from .nodes import NodeState
from .probes import ProbeResult
from .relayed import relay_routed
from .slots import SlotLedger
from .table import Route, RouteTable, unknown_model
from .waiting import Waiting

__all__ = ["MAX_BACKOFF", "PASSIVE_BACKOFF", "RoutedUpstream", "Tables"]

log = logging.getLogger("llmchat.proxy")

PASSIVE_BACKOFF: Final = BACKOFF_BASE
"""Seconds a node that failed a request is ejected for, the first time."""
MAX_BACKOFF: Final = BACKOFF_CAP
"""The longest ejection (each failure in a row doubles it)."""


_GONE: Final = Failure(
    status_for("connection", None), client_message("connection", None), "connection"
)
"""A request abandoned before its first chunk because its node was found gone."""


@dataclass(frozen=True)
class Tables:
    """One config's routing tables; replaced whole on reload (read without a lock)."""

    config: RoutingConfig
    table: RouteTable
    plans: Mapping[str, tuple[PlannedTier, ...]]
    nodes: Mapping[str, NodeState]


class RoutedUpstream:
    """Many nodes behind aliases with ordered tiers. Thread-safe: one serves every request."""

    inference: None = None
    """No `Inference` chain: the faces call `start` on their own thread."""

    def __init__(
        self,
        config: RoutingConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        environ: Mapping[str, str] | None = None,
        ledger: SlotLedger | None = None,
    ) -> None:
        self._clock = clock
        self._environ = environ
        self._ledger = ledger  # the slots every worker holds (``--workers N``); None: this process
        self._lock = threading.Condition()
        self._reload_lock = threading.Lock()
        self._tables = self._build(config, {})
        self.health = HealthMonitor(
            list(self._tables.nodes.values()),
            interval=config.routing.health_interval_s,
            clock=clock,
            probe=self._probe,
        )
        """The nodes' one ejection policy; its probing thread starts with `start_health`."""
        self.waiting = Waiting()
        """The requests waiting for a node's first answer (`waiting`: abandoned when
        another request to that node is refused or dropped)."""
        self._probe_on_use = False

    def __repr__(self) -> str:
        tables = self._tables
        return (
            f"RoutedUpstream({len(tables.nodes)} nodes, "
            f"{len(tables.plans)} aliases, from {tables.config.source!r})"
        )

    # -- configuration ------------------------------------------------------

    @property
    def config(self) -> RoutingConfig:
        """The live config."""
        return self._tables.config

    @property
    def nodes(self) -> dict[str, NodeState]:
        """The live config's nodes by name (the health prober's targets)."""
        return dict(self._tables.nodes)

    def reload(self, config: RoutingConfig) -> None:
        """Route new requests by `config`; in-flight ones finish where they started."""
        with self._reload_lock:
            self._tables = self._build(config, self._tables.nodes)
            self.health.interval = config.routing.health_interval_s
            self.health.set_targets(list(self._tables.nodes.values()))

    def start_health(self) -> None:
        """Start probing the nodes on a daemon thread (once; after any fork)."""
        self.health.start()

    def health_on_first_use(self) -> None:
        """Start probing at the first request or ``/health`` (in a worker: after its fork)."""
        self._probe_on_use = True

    def _used(self) -> None:
        if self._probe_on_use:
            self._probe_on_use = False
            self.health.start()

    def health_report(self) -> dict[str, Any]:
        """``GET /health``'s answer: every node with the monitor's view, and the live config."""
        self._used()
        tables = self._tables
        return health_report(
            tables.nodes.values(),
            config_source=tables.config.source,
            config_digest=tables.config.digest,
            monitor=self.health,
        )

    def _build(self, config: RoutingConfig, old: Mapping[str, NodeState]) -> Tables:
        nodes: dict[str, NodeState] = {}
        for node_config in config.nodes:
            node = old.get(node_config.name)
            if node is None:
                node = NodeState(
                    node_config,
                    self._lock,
                    clock=self._clock,
                    environ=self._environ,
                    ledger=self._ledger,
                )
            elif node.config != node_config:
                node.reconfigure(node_config, self._environ)
            nodes[node_config.name] = node
        plans = {
            alias: tuple(
                PlannedTier(i, tier, tuple(nodes[name] for name in tier.nodes if name in nodes))
                for i, tier in enumerate(tiers)
            )
            for alias, tiers in config.models.items()
        }
        return Tables(config, RouteTable(config.models), plans, nodes)

    def close(self) -> None:
        """Stop the health probes and close every node's backend (its connection pool)."""
        self.health.close()
        for node in self._tables.nodes.values():
            node.backend.close()

    def report(self) -> list[dict[str, Any]]:
        """Every node's `NodeState.report`, in config order."""
        return [node.report() for node in self._tables.nodes.values()]

    # -- completions --------------------------------------------------------

    def start(self, body: Mapping[str, Any], call: Call) -> Response | Failure:
        """Route the OpenAI chat `body` and start it: the live Response, or a Failure.

        Returns after the node's first chunk or its settle; `call` says which
        node, tier and alias served it.
        """
        self._used()
        tables = self._tables
        model = body.get("model")
        route = tables.table.resolve(model) if isinstance(model, str) else None
        if route is None:
            return unknown_model(model)
        call.alias = route.alias
        key = prefix_key(body) if tables.config.routing.affinity == "prefix" else None
        call.on_cancel(self.wake)
        return over_route(
            self,
            tables,
            route,
            key,
            lambda: call.cancelled,
            lambda slot: self._try(slot, route, body, call),
            call,
        )

    def _try(
        self, slot: Slot, route: Route, body: Mapping[str, Any], call: Call
    ) -> Response | Next:
        """One node's attempt: its Response once it has a chunk or settled; `Next` to retry."""
        node = slot.node
        call.node, call.tier = node.name, slot.tier
        tier = route.tiers[slot.tier]
        try:
            started = Upstream(node.backend).start(slot.request_body(body, tier.model), call)
        except BaseException:
            slot.release()
            raise
        if isinstance(started, Failure):  # a one-backend Upstream returns none; kept safe
            slot.release()
            return Next(started)
        if not started._add_settle_hook(slot.release):
            slot.release()
        abandoned = threading.Event()

        def abandon() -> None:  # the node was found gone (`waiting`)
            abandoned.set()
            started.cancel()

        arrived = False
        with self.waiting.held(node.name, abandon):
            for _ in started:  # the first chunk, or the settle (a hang-up cancels it)
                arrived = True
                break
        if abandoned.is_set() and not arrived and not call.cancelled:
            return Next(_GONE)  # nothing reached the client: another node may serve it
        if arrived or not started.is_done or started.is_success or started.is_cancelled:
            if not started.is_cancelled:
                self.on_success(node)
                # A stream that breaks off or goes silent later ejects its node too.
                started._add_settle_hook(lambda: self._ended(node, started))
            return started
        error_class = started.error_class or "unknown"
        status = started.error_status
        if not retryable(error_class, status):
            return started
        self.on_failure(node, error_class, status)
        return Next(failure_of(started))

    def _ended(self, node: NodeState, response: Response) -> None:
        """A Response that had started on `node` settled: a stream that broke off ejects it."""
        if response.is_cancelled or response.error_class is None:
            return
        self.on_broken(node, response.error_class, response.err)

    def on_broken(self, node: NodeState, error_class: str, err: str | None = None) -> None:
        """A stream that had started on `node` failed: the node is ejected only if it broke
        off (`ejections.broke_off`: cut, silent, gone), on the Response path and the byte
        relay alike; one the model ended or that passed a size limit leaves it eligible."""
        if broke_off(error_class, err):
            self.on_failure(node, error_class)

    def snapshot(self) -> Tables:
        """The live tables (one request routes by one snapshot, whatever reloads meanwhile)."""
        return self._tables

    def admit(
        self,
        tables: Tables,
        route: Route,
        key: int | None,
        failed: set[str],
        cancelled: Callable[[], bool],
    ) -> Slot | Busy:
        """A slot for `route` by `tables` (`admission.admit`), skipping the `failed` nodes."""
        return admit(
            tables.plans[route.alias],
            lock=self._lock,
            clock=self._clock,
            default_wait_ms=tables.config.routing.wait_timeout_ms,
            key=key,
            skip=failed,
            cancelled=cancelled,
        )

    def wake(self) -> None:
        """Wake the requests waiting for a slot (one of them was cancelled)."""
        with self._lock:
            self._lock.notify_all()

    # -- passive health -----------------------------------------------------

    def on_failure(self, node: NodeState, error_class: str, status: int | None = None) -> None:
        """A request failed on `node`: the monitor judges it by `ejections`' rules, as it
        judges a probe (ejected when at fault; held for the prober on a 503)."""
        self.health.note_failure(node, error_class, status)
        if error_class == "connection":  # refused or dropped: what waits there is lost
            self.waiting.abandon(node.name)

    def _probe(self, target: HealthTarget) -> ProbeResult:
        """The monitor's probe; a node found down loses the requests waiting on it (`waiting`)."""
        result = probe_target(target)
        if result.state == "down":
            self.waiting.abandon(target.name)
        return result

    def on_success(self, node: NodeState) -> None:
        """A request started on `node`: its back-off, if over, ends (the monitor readmits it)."""
        self.health.note_success(node)

    # -- what the metadata routes ask ---------------------------------------

    def redactor(self) -> Redactor:
        """Takes every node's key out of text and bytes bound for clients or logs."""
        secrets: list[str] = []
        for node in self._tables.nodes.values():
            secrets.extend(node.backend._secrets())
        return Redactor.of(secrets)

    def model_names(self) -> list[str]:
        """The configured aliases (globs name no model), each once, in config order."""
        return self._tables.table.names()

    @property
    def backend(self) -> Any:
        """The metadata node's backend."""
        return self.metadata_node().backend

    def metadata_node(self) -> NodeState:
        """The first eligible node of the first alias's first tier, else the first node."""
        tables = self._tables
        now = self._clock()
        for plan in tables.plans.values():
            for planned in plan[:1]:
                with self._lock:
                    for node in planned.nodes:
                        if node.eligible(now):
                            return node
            break
        return next(iter(tables.nodes.values()))

    def _one(self) -> Upstream:
        return Upstream(self.metadata_node().backend)

    def limits(self) -> dict[str, Any]:
        """The metadata node's `probe_server_limits()`."""
        return self._one().limits()

    def count_tokens(self, body: Mapping[str, Any]) -> int:
        """Prompt tokens of `body` by the metadata node's tokenizer."""
        return self._one().count_tokens(body)

    def get_json(self, route: str) -> tuple[int | None, Any, str | None]:
        """`Upstream.get_json` on the metadata node."""
        return self._one().get_json(route)

    def post_json(
        self, route: str, body: Mapping[str, Any], **how: Any
    ) -> tuple[int | None, Any, str | None]:
        """`Upstream.post_json` (its keywords) on the metadata node."""
        return self._one().post_json(route, body, **how)

    def probe_json(self, path: str) -> tuple[Any, str | None]:
        """`Upstream.probe_json` on the metadata node."""
        return self._one().probe_json(path)

    def relay(self, relay: Relay, method: str, path: str, data: bytes | None) -> None:
        """The OpenAI face's byte relay, routed by the body's model (`relayed`)."""
        self._used()
        relay_routed(self, relay, method, path, data)
