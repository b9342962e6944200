"""A routed proxy whose one key, ``alice``, has a budget: for the budget and metrics tests."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from llmchat.cli.routed import apply_prices
from llmchat.proxy import make_app, make_server
from llmchat.proxy.routing import KeyPolicy, KeyRing
from llmchat.proxy.routing.config import Budget, Price, Tier
from llmchat.proxy.routing.reload import Loaded
from llmchat.proxy.routing.upstream import RoutedUpstream

from ...support.proxy import UsageSink
from ..routing.nodes_support import config, node_config

ENV = {"ALICE_KEY": "sk-alice-SECRET"}
"""The key variable alice's key is read from, and the key."""


@contextlib.contextmanager
def budget_proxy(node: Any, budget: Budget) -> Iterator[tuple[str, Any, UsageSink]]:
    """The proxy over `node` (alias ``m``), alice's key under `budget`, priced;
    yields its URL, the app and the usage events."""
    base = config([node_config(node)], {"m": [Tier("m", ("a",))]})
    keys = (KeyPolicy("alice", "ALICE_KEY", budget=budget),)
    cfg = replace(base, keys=keys, prices={"m": Price(input=1.0, output=2.0)})
    routed = RoutedUpstream(cfg)
    ring = KeyRing(list(keys), ENV)
    sink = UsageSink()
    app = make_app(routed, keys=ring, usage_log=sink)
    apply_prices(app, Loaded(cfg, ring))
    server = make_server(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url, app, sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        routed.close()
