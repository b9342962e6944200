"""Routing: many client-facing models over many upstream nodes.

What lives here: the config (`config`: YAML or JSON, checked against the
shipped ``config.schema.json``; `config_checks`: the checks and their
path-naming messages), client keys and their model policies (`keys`),
re-reading the config on SIGHUP (`reload`), and the routed upstream that
replaces the proxy's one `Upstream` (`RoutedUpstream`: nodes, aliases and
tiers, eligibility then admission, health, the cache-affine choice).

What it may import: llmchat's client side (backends, transport, errors,
redact) and the proxy's shared, face-free modules (`upstream`, `failures`,
`usage`); never a face (`proxy/faces/`), the app (`proxy.app`) or the server
(`proxy/server/`). The app and the command line import this package, not the
other way round.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import (
        DIALECTS,
        ConfigError,
        KeyPolicy,
        NodeConfig,
        RoutingConfig,
        RoutingOptions,
        Tier,
        load_config,
        parse_config,
    )
    from .keys import KeyRing, allows
    from .upstream import RoutedUpstream as RoutedUpstream  # re-exported, lazily

__all__ = [
    "DIALECTS",
    "ConfigError",
    "KeyPolicy",
    "KeyRing",
    "NodeConfig",
    "RoutingConfig",
    "RoutingOptions",
    "Tier",
    "allows",
    "load_config",
    "parse_config",
]

_HOMES = {"KeyRing": "keys", "allows": "keys", "RoutedUpstream": "upstream"}
"""The public names not from `config`, by module. Each name is imported when first asked
for: the one-upstream proxy checks key policies (`keys`) on every request but never loads
the config, its schema checks or the routed upstream (nodes, backends, health)."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name) or ("config" if name in __all__ else None)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
