"""The operator's side of the proxy: ``/metrics`` (Prometheus), ``/admin/``, traces.

Every route here sits behind the admin key (`ProxyApp._operator_refusal`:
with no admin key ``/admin/`` is a 404 and ``/metrics`` is open, like
``/health``). What it may import: the proxy's shared modules (`router`,
`client_exchange`, `usage`, `failures`) and, lazily, `routing`; never a face
(`proxy/faces/`) or the server (`proxy/server/`). The app passes itself to
`register`, so the routes read its live state (a reload swaps it).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..router import Route, Router
from .admin import admin_routes

__all__ = ["OperatedApp", "register"]


class OperatedApp(Protocol):
    """What the operator's routes read of the app (`ProxyApp`; nothing imports the app)."""

    admin_key: bytes | None
    upstream: Any
    usage: Any


def register(router: Router, app: OperatedApp) -> None:
    """Add the operator's routes to `router`, each reading `app`'s live state."""
    routes: list[Route] = []
    from .metrics import metrics_routes

    routes += metrics_routes(app)
    routes += admin_routes(app)
    router.add(routes)
