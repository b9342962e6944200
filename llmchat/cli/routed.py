"""`llmchat proxy --config FILE`: serving a routing config, and re-reading it on SIGHUP.

The file is loaded and checked (`llmchat.proxy.routing.load_routing`) before
anything is bound or sent: a bad one ends the command with every error and
exit status 2. The embedded server re-reads it on SIGHUP; under gunicorn,
the arbiter re-reads and checks it on its own SIGHUP (its ``on_reload``
hook), before it forks the new workers: they are built with the last good
config the arbiter has read. A bad edit is logged once, by the arbiter, and
the old config stays (a worker that replaces a dead one gets it too). The
workers share one slot ledger, made by the arbiter before it forks and
deleted when it exits: each node's ``max_conns`` holds across all of them,
through reloads and worker deaths.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..errors import LLMChatError
from ..proxy.routing.config import RoutingConfig
from ..proxy.routing.reload import Loaded, ReloadStatus, load_routing, reload_from
from .proxy_command import app_options, serve
from .workers import serve_workers, wants_workers

__all__ = ["routed_app", "routed_upstream", "run_routed", "watch_hangups"]

log = logging.getLogger("llmchat.proxy")

_ONE_UPSTREAM = (("upstream", "--upstream"), ("model", "--model"), ("api_key_env", "--api-key-env"))
"""The shorthand's options, which a routing config replaces."""


def run_routed(args: argparse.Namespace) -> int:
    """Serve the routing config `args.config`; the exit code."""
    given = [flag for name, flag in _ONE_UPSTREAM if getattr(args, name) is not None]
    if given:
        raise LLMChatError(
            f"--config cannot be combined with {', '.join(given)}: the config names "
            "each node's URL, models and key (those options are the one-upstream shorthand)"
        )
    loaded = load_routing(args.config, os.environ)  # a ConfigError ends the command: status 2
    for warning in loaded.warnings:
        log.warning("routing config %s: %s", args.config, warning)
    over = _describe(loaded.config)
    if wants_workers(args):
        return _serve_sharing_slots(args, loaded, over)
    app, routed = routed_app(args, loaded)
    stop_watching = watch_hangups(args.config, app, routed)
    try:
        return serve(args, app, routed, over)
    finally:
        stop_watching()


def routed_upstream(config: RoutingConfig, ledger: Any = None) -> Any:
    """The routed upstream for `config` (`llmchat.proxy.routing.RoutedUpstream`), holding
    its slots in `ledger` (a `routing.slots.SlotLedger`; None: in this process alone)."""
    from ..proxy import routing

    routed = routing.RoutedUpstream(config, ledger=ledger)
    routed.health_on_first_use()  # a gunicorn worker's own prober, after its fork
    return routed


def routed_app(args: argparse.Namespace, loaded: Loaded) -> tuple[Any, Any]:
    """The proxy app over a routed upstream for `loaded`, and that upstream."""
    from ..proxy import make_app

    routed = routed_upstream(loaded.config, getattr(args, "slot_ledger", None))
    try:
        options = app_options(args)
        if loaded.admin_key is not None:  # the config's admin key takes the flag's place
            options["admin_key"] = loaded.admin_key
        app = make_app(routed, keys=loaded.keys, **options)
        apply_prices(app, loaded)
    except BaseException:
        _close(routed)
        raise
    return app, routed


def apply_prices(app: Any, loaded: Loaded) -> None:
    """Give `app` the config's prices (its usage log's) and its keys' budgets."""
    from ..proxy.usage.budgets import Budgets
    from ..proxy.usage.prices import PriceTable

    config = loaded.config
    app.usage.prices = PriceTable(config.prices) if config.prices else None
    limits = {key.name: key.budget for key in config.keys if key.budget is not None}
    old = app.budgets
    app.budgets = Budgets(limits, app.usage.store, config.budgets.refresh_s) if limits else None
    listeners = [f for f in app.usage.listeners if old is None or f != old.record]
    if app.budgets is not None:
        listeners.append(app.budgets.record)
    app.usage.listeners = listeners  # swapped whole: `emit` iterates the old list safely


def watch_hangups(path: str, app: Any, routed: Any) -> Callable[[], None]:
    """Re-read `path` on every SIGHUP, for `routed` and `app`'s keys; returns the undo.

    The handler only starts a thread: the reload takes locks the interrupted
    main thread might hold. Reloads run one at a time.
    """
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None:  # Windows
        return lambda: None
    one_at_a_time = threading.Lock()

    def reload() -> None:
        with one_at_a_time:
            loaded = reload_from(
                path,
                routed,
                log,
                on_keys=lambda keys: setattr(app, "keys", keys),
                on_status=lambda status: setattr(app, "reload_status", status),
            )
            if loaded is not None and loaded.admin_key is not None:
                app.admin_key = loaded.admin_key.encode("utf-8")
            if loaded is not None:
                apply_prices(app, loaded)
        if loaded is not None:
            print(
                f"llmchat proxy: reloaded {_describe(loaded.config)}", file=sys.stderr, flush=True
            )

    def on_hangup(signum: int, frame: object) -> None:
        threading.Thread(target=reload, name="llmchat-reload", daemon=True).start()

    previous = signal.signal(hangup, on_hangup)

    def undo() -> None:
        signal.signal(hangup, previous)

    return undo


def _serve_sharing_slots(args: argparse.Namespace, loaded: Loaded, over: str) -> int:
    """`serve_workers` with one slot ledger for every worker: made here, in the arbiter,
    before any fork (`args.slot_ledger` reaches each worker's build), and deleted when
    the arbiter is done (a worker returns through here too: `remove` spares it)."""
    from ..proxy.routing.slots import SlotLedger

    ledger = args.slot_ledger = SlotLedger.create()
    arbiter = _LastGood(args, loaded)
    try:
        return serve_workers(args, arbiter.build, over, on_reload=arbiter.reread)
    finally:
        ledger.remove()


class _LastGood:
    """Under gunicorn, the arbiter's routing config: the start-up one, then each good edit.

    `reread` runs in the arbiter on SIGHUP, before it forks the new workers,
    so `build` (in each worker, after the fork) needs no file of its own: a
    bad edit is refused once, here, and every new worker gets the last good
    config. `reload` is `reload_from`'s hand-over; the arbiter serves nothing.
    """

    def __init__(self, args: argparse.Namespace, first: Loaded) -> None:
        self.args = args
        self.loaded = first
        self.status: ReloadStatus | None = None
        """The last reload's outcome: each worker forked after it reports it."""

    def reload(self, config: RoutingConfig) -> None:
        """Nothing to swap in the arbiter; `reread` keeps what `reload_from` returns."""

    def reread(self) -> None:
        loaded = reload_from(self.args.config, self, log, on_status=self._record)
        if loaded is None:
            return  # refused, the errors logged: the old config stays
        self.loaded = loaded
        print(
            f"llmchat proxy: reloaded {_describe(loaded.config)}; new workers serve it",
            file=sys.stderr,
            flush=True,
        )

    def _record(self, status: ReloadStatus) -> None:
        self.status = status

    def build(self) -> tuple[Any, Any]:
        """The app over the last good config (in a worker, after the fork), knowing
        the last reload's outcome (the arbiter's, inherited through the fork)."""
        app, routed = routed_app(self.args, self.loaded)
        app.reload_status = self.status
        return app, routed


def _describe(config: RoutingConfig) -> str:
    nodes = len(config.nodes)
    return (
        f"over {nodes} node{'s' if nodes != 1 else ''} "
        f"from {config.source} (sha256 {config.digest[:12]})"
    )


def _close(routed: Any) -> None:
    close = getattr(routed, "close", None)
    if callable(close):
        close()
