"""Node health: probes on a thread, ejection with back-off, and the ``GET /health`` report.

`HealthMonitor` watches the routing's nodes (anything satisfying
`HealthTarget`: the routing core's node state). A daemon thread probes each
node every `interval` seconds (`probes.probe_backend`: llama-server's
``/health`` and ``/props``, else the dialect's model listing), and the
routing core tells it of every failed request (`note_failure`). What a
result does to a node:

- healthy: the node's slot count goes to `set_capacity`; an ejected node
  whose back-off is over is readmitted (never by time alone);
- loading (a 503: llama-server loading its model, a server shedding load):
  `set_loading(True)`, not a failure; the node is not eligible until a probe
  finds it healthy. A request answered 503 (`ejections.not_ready`, the same
  rule) does the same and has the node probed at once, when a prober runs
  (`start`, or a test driving `run_due`): without one nothing would ever
  make the node eligible again, so the 503 is only the request's;
- down, or a request failure that `ejections.ejects`: the node is ejected
  for a back-off (5 s, doubling to 60 s while it keeps failing, back to 5 s
  once it serves), and probed again when the back-off ends, then every
  `interval` until it answers.

An ejected node is readmitted by the first successful probe at or after the
end of its back-off: at that end when it is already back, else at most
`interval` after it comes back. `health_report.health_report` is what ``GET /health``
answers for a routing proxy.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ...backends.openai_common import OpenAICommon
from ...redact import Redactor
from .ejections import BACKOFF_BASE, BACKOFF_CAP, Backoff, ejects, not_ready
from .probes import ProbeResult, probe_backend

__all__ = ["DEFAULT_INTERVAL", "HealthMonitor", "HealthTarget", "probe_target", "redactor_of"]

log = logging.getLogger("llmchat.proxy")

DEFAULT_INTERVAL: Final = 5.0
"""Seconds between two probes of a healthy node."""

_MAX_PARALLEL: Final = 8
"""Probes of one round that run at once (each is bounded by its node's probe timeout)."""


class HealthTarget(Protocol):
    """A node as the health monitor drives it (the routing core's node state satisfies it).

    The monitor calls these under its own lock: they must be quick and must
    not call back into the monitor.
    """

    name: str
    dialect: str
    backend: OpenAICommon  # the node's llmchat backend (any dialect), the node's own key

    def eject(self, seconds: float, reason: str) -> None: ...  # not eligible until readmitted
    def readmit(self) -> None: ...
    def set_loading(self, loading: bool) -> None: ...  # llama-server 503 "loading model"
    def set_capacity(self, slots: int) -> None: ...  # max_conns default from /props
    def report(self) -> dict[str, Any]: ...  # for GET /health


Probe = Callable[[HealthTarget], ProbeResult]
"""How the monitor probes one node: `probe_target`, or a test's own."""


def probe_target(target: HealthTarget) -> ProbeResult:
    """The default probe: `probes.probe_backend` on the node's backend and dialect."""
    return probe_backend(target.backend, target.dialect)


@dataclass
class _Watch:
    """The monitor's record of one node."""

    target: HealthTarget
    backoff: Backoff
    next_probe: float = 0.0
    last: ProbeResult | None = None
    probed_at: float | None = None
    failures: int = 0
    """Requests that ejected the node, in all (a count for the report)."""


class HealthMonitor:
    """Probes `targets` on a daemon thread and ejects, backs off and readmits them.

        monitor = HealthMonitor(nodes)
        monitor.start()
        ...
        monitor.note_failure(node, response.error_class, response.error_status)
        ...
        monitor.close()

    `clock` (seconds, monotonic) times the back-offs and the schedule;
    `probe` probes one node (default `probe_target`). `probe_now()` runs one
    round over every node, synchronously, and `run_due()` one step of the
    thread's schedule: tests drive both with their own clock. Thread-safe.
    """

    def __init__(
        self,
        targets: Sequence[HealthTarget],
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        probe: Probe = probe_target,
        backoff: float = BACKOFF_BASE,
        max_backoff: float = BACKOFF_CAP,
    ) -> None:
        for name, value in (("interval", interval), ("backoff", backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a number of seconds above 0, got {value!r}")
        if isinstance(max_backoff, bool) or not isinstance(max_backoff, (int, float)):
            raise ValueError(f"max_backoff must be a number of seconds, got {max_backoff!r}")
        if max_backoff < backoff:
            raise ValueError(f"max_backoff ({max_backoff}) must be >= backoff ({backoff})")
        self.interval = float(interval)
        self._clock = clock
        self._probe = probe
        self._backoff = (float(backoff), float(max_backoff))
        self._lock = threading.Lock()
        self._watches: dict[int, _Watch] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._scheduled = False
        """Whether probes run on a schedule (`start`, `run_due`): a 503 may then hold a node."""
        self.set_targets(targets)

    def __repr__(self) -> str:
        return f"HealthMonitor({len(self._watches)} nodes, interval={self.interval})"

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Start the probing thread (once; again after `close` is an error)."""
        if self._stop.is_set():
            raise RuntimeError("this HealthMonitor is closed")
        with self._lock:
            if self._thread is not None:
                return
            self._scheduled = True
            self._thread = threading.Thread(target=self._run, name="llmchat-health", daemon=True)
        self._thread.start()

    @property
    def probing(self) -> bool:
        """Whether the probing thread runs (started and not closed)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stop.is_set()

    def close(self, timeout: float | None = None) -> None:
        """Stop the thread: its wait ends at once, a probe in flight within its own deadline."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def __enter__(self) -> HealthMonitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_targets(self, targets: Sequence[HealthTarget]) -> None:
        """Watch `targets` from now on (a reload): kept nodes keep their back-off."""
        now = self._clock()
        with self._lock:
            old = self._watches
            self._watches = {
                id(t): old.get(id(t)) or _Watch(t, Backoff(*self._backoff), next_probe=now)
                for t in targets
            }
        self._wake.set()

    @property
    def targets(self) -> list[HealthTarget]:
        """The nodes watched, in the order given."""
        with self._lock:
            return [watch.target for watch in self._watches.values()]

    # -- what the routing core tells -----------------------------------------

    def note_failure(
        self, target: HealthTarget, error_class: str | None, status: int | None = None
    ) -> bool:
        """A request to `target` failed with `error_class` (and HTTP `status`): eject it?

        Ejects (and returns True) when `ejections.ejects` says the failure is
        the node's and the node is not out already (a failure after its
        back-off, before a probe readmitted it, ejects it again for longer):
        many requests failing at once on a dying node are one ejection. A
        client's failure (a 400) or a cancel never ejects. The node is
        probed again when its back-off ends. A 503 (`ejections.not_ready`)
        is not a failure: `hold` the node for the prober instead.
        """
        if not_ready(error_class, status):
            self.hold(target)
            return False
        if not ejects(error_class, status):
            return False
        shown = f"HTTP {status}" if error_class == "http" and status is not None else error_class
        with self._lock:
            watch = self._watches.get(id(target))
            now = self._clock()
            if watch is None or (watch.backoff.ejected and not watch.backoff.may_readmit(now)):
                return False
            watch.failures += 1
            self._eject(watch, now, f"a request failed ({shown})")
        self._wake.set()
        return True

    def hold(self, target: HealthTarget) -> bool:
        """A request to `target` was answered 503: not eligible until a probe finds it healthy.

        As a probe's 503 would: `set_loading(True)`, no strike, no back-off,
        and the node probed at once (a server shedding load is back in one
        probe; one loading its model stays out until it has loaded). Only
        while probes run on a schedule, else nothing would readmit it; an
        ejected node keeps its back-off. Returns whether the node is held.
        """
        with self._lock:
            watch = self._watches.get(id(target))
            if watch is None or not self._scheduled or watch.backoff.ejected:
                return False
            target.set_loading(True)
            watch.next_probe = min(watch.next_probe, self._clock())
        self._wake.set()
        log.info("node %s answered 503: not eligible until a probe finds it healthy", target.name)
        return True

    def note_success(self, target: HealthTarget) -> None:
        """A request to `target` succeeded: its next back-off starts at the base again.

        A request the routing sent after the back-off (the node is eligible
        again by then) readmits the node as a successful probe would.
        """
        with self._lock:
            watch = self._watches.get(id(target))
            if watch is None:
                return
            if watch.backoff.ejected:
                if not watch.backoff.may_readmit(self._clock()):
                    return
                watch.backoff.readmit()
                target.readmit()
            watch.backoff.served()

    # -- probing ----------------------------------------------------------------

    def probe_now(self) -> dict[str, ProbeResult]:
        """Probe every node once, now, and act on the results; returns them by node name.

        Synchronous (the probes of one round run side by side); for tests
        and for a first round before serving.
        """
        with self._lock:
            watches = list(self._watches.values())
        return self._round(watches)

    def run_due(self) -> float:
        """Probe the nodes whose time has come; returns seconds until the next one is due.

        One step of the thread's loop, callable with a test's own clock.
        """
        now = self._clock()
        with self._lock:
            self._scheduled = True
            due = [w for w in self._watches.values() if w.next_probe <= now]
        if due:
            self._round(due)
        with self._lock:
            upcoming = [w.next_probe for w in self._watches.values()]
        if not upcoming:
            return self.interval
        return max(0.0, min(upcoming) - self._clock())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self.run_due()
            except Exception as exc:  # never leave the nodes unwatched
                log.error("health probe round failed: %s", type(exc).__name__)
                delay = self.interval
            self._wake.wait(delay)
            self._wake.clear()

    def _round(self, watches: list[_Watch]) -> dict[str, ProbeResult]:
        results = self._probe_all(watches)
        now = self._clock()
        with self._lock:
            for watch, result in zip(watches, results, strict=True):
                if self._watches.get(id(watch.target)) is watch:  # not dropped by a reload
                    self._apply(watch, result, now)
        return {watch.target.name: result for watch, result in zip(watches, results, strict=True)}

    def _probe_all(self, watches: list[_Watch]) -> list[ProbeResult]:
        pool = self._executor() if len(watches) > 1 else None
        if pool is None:
            return [self._probe_one(watch.target) for watch in watches]
        return list(pool.map(self._probe_one, [watch.target for watch in watches]))

    def _executor(self) -> ThreadPoolExecutor | None:
        with self._lock:
            if self._pool is None and not self._stop.is_set():
                self._pool = ThreadPoolExecutor(_MAX_PARALLEL, "llmchat-health-probe")
            return self._pool

    def _probe_one(self, target: HealthTarget) -> ProbeResult:
        try:
            return self._probe(target)
        except Exception as exc:  # a subclass's probe must not stop the monitor
            note = redactor_of(target).exception(exc)
            return ProbeResult("down", "probe", f"the probe raised: {note}")

    # -- decisions (under the lock) ---------------------------------------------

    def _apply(self, watch: _Watch, result: ProbeResult, now: float) -> None:
        """Act on one probe's `result` at `now`, and schedule the node's next probe."""
        watch.last, watch.probed_at = result, now
        target, backoff = watch.target, watch.backoff
        if result.state == "down":
            target.set_loading(False)
            if not backoff.ejected:
                self._eject(watch, now, result.note or f"{result.route} failed")
            else:
                watch.next_probe = self._next_probe(backoff, now)
            return
        if backoff.ejected:
            if not backoff.may_readmit(now):
                watch.next_probe = self._next_probe(backoff, now)
                return
            backoff.readmit()
            target.readmit()
            log.info("node %s is back (%s)", target.name, result.state)
        elif result.state == "healthy":
            backoff.served()
        target.set_loading(result.state == "loading")
        if result.slots is not None:
            target.set_capacity(result.slots)
        watch.next_probe = now + self.interval

    def _eject(self, watch: _Watch, now: float, reason: str) -> None:
        seconds = watch.backoff.eject(now, reason)
        watch.target.eject(seconds, reason)
        watch.next_probe = self._next_probe(watch.backoff, now)
        log.warning("node %s ejected for %.0f s: %s", watch.target.name, seconds, reason)

    def _next_probe(self, backoff: Backoff, now: float) -> float:
        """The back-off's end while it runs; after it, every `interval` until the node answers."""
        if backoff.until is not None and backoff.until > now:
            return backoff.until
        return now + self.interval

    # -- the report -------------------------------------------------------------

    def report(self, target: HealthTarget) -> dict[str, Any]:
        """The monitor's view of `target`: its last probe and its back-off; {} if not watched."""
        with self._lock:
            watch = self._watches.get(id(target))
            if watch is None:
                return {}
            now = self._clock()
            out: dict[str, Any] = {"ejected": watch.backoff.ejected}
            if watch.backoff.ejected:
                out["reason"] = watch.backoff.reason
                out["backoff_remaining_s"] = round(watch.backoff.remaining(now), 3)
            out["strikes"] = watch.backoff.strikes
            if watch.last is not None and watch.probed_at is not None:
                out["last_probe"] = {
                    **watch.last.as_dict(),
                    "age_s": round(max(0.0, now - watch.probed_at), 3),
                }
            return out


def redactor_of(target: HealthTarget) -> Redactor:
    """The redactor of `target`'s backend: what takes its key out of a probe's note or a report."""
    try:
        return target.backend._redactor()
    except Exception:  # a target without a usable backend: scrub nothing rather than fail
        return Redactor(())
