"""``/admin/``: the operator's JSON views of the proxy's live state.

Each handler is a thin view over what the app already has (the routed
upstream's node reports, its live config, the usage store's totals, the
budgets' report), so nothing here keeps state. The admin key is checked by
the app before any of these runs (`ProxyApp._operator_refusal`): with a key
set, an unauthenticated caller gets a 401 on every ``/admin/`` path, known
or not, so it cannot map the routes.
"""

from __future__ import annotations

import dataclasses
import datetime
import urllib.parse
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..client_exchange import ClientExchange
from ..router import Route
from ..usage.store import combined

if TYPE_CHECKING:
    from . import OperatedApp

__all__ = ["admin_routes"]


def admin_routes(app: OperatedApp) -> list[Route]:
    """The ``/admin/`` routes, each reading `app`'s live state per request."""
    views = {
        "/admin/nodes": _nodes,
        "/admin/config": _config,
        "/admin/usage": _usage,
        "/admin/budgets": _budgets,
    }
    return [Route("GET", path, "proxy", _bound(view, app)) for path, view in views.items()]


def _bound(view: Any, app: OperatedApp) -> Any:
    def handler(exchange: ClientExchange) -> Iterable[bytes]:
        return view(exchange, app)  # type: ignore[no-any-return]

    return handler


def _nodes(exchange: ClientExchange, app: OperatedApp) -> list[bytes]:
    upstream = app.upstream
    report = getattr(upstream, "report", None)
    if report is not None:  # a routing upstream: one entry per node, already redacted
        return exchange.json(200, {"nodes": report()})
    url = getattr(getattr(upstream, "backend", None), "api_url", None)
    node = {"name": "upstream", "url": _no_userinfo(url) if isinstance(url, str) else None}
    return exchange.json(200, {"nodes": [node]})


def _config(exchange: ClientExchange, app: OperatedApp) -> list[bytes]:
    config = getattr(app.upstream, "config", None)
    # Set by the CLI's reload (`reload_from`'s on_status); None: no reload since start.
    status = getattr(app, "reload_status", None)
    reload = status.as_dict() if status is not None else None
    if config is None or not dataclasses.is_dataclass(config):
        return exchange.json(200, {"routed": False, "config": None, "reload": None})
    # The config holds no secret (keys are named by their variables); urls may
    # carry userinfo, which is dropped.
    body = _plain(config)
    for node in body.get("nodes", []):
        node["url"] = _no_userinfo(node["url"])
    return exchange.json(
        200,
        {
            "routed": True,
            "config": body,
            "source": getattr(config, "source", None),
            "digest": getattr(config, "digest", None),
            "reload": reload,
        },
    )


def _usage(exchange: ClientExchange, app: OperatedApp) -> list[bytes]:
    store = getattr(app.usage, "store", None)
    if store is None:
        return exchange.error(409, "No usage store is configured (--usage-db)", "not_found")
    query = urllib.parse.parse_qs(exchange.environ.get("QUERY_STRING", ""))
    since, until = (_day(query, name) for name in ("since", "until"))
    by = query.get("by", ["model"])[-1]
    totals = store.totals(by, since=since, until=until)
    # `llmchat usage --json`'s numbers: each cost is the exact decimal text (`Total.as_dict`).
    return exchange.json(
        200,
        {
            "by": by,
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "totals": [total.as_dict() for total in totals],
            "total": combined(totals, key=None).as_dict(),
        },
    )


def _budgets(exchange: ClientExchange, app: OperatedApp) -> list[bytes]:
    budgets = getattr(app, "budgets", None)
    return exchange.json(200, {"budgets": [] if budgets is None else budgets.report()})


def _day(query: dict[str, list[str]], name: str) -> datetime.date | None:
    values = query.get(name)
    if not values:
        return None
    try:
        return datetime.date.fromisoformat(values[-1])
    except ValueError:
        raise ValueError(f"{name} must be a day, YYYY-MM-DD") from None


def _no_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def _plain(value: Any) -> Any:
    """JSON-ready: dataclasses and mappings to dicts, tuples to lists (asdict cannot
    copy the config's read-only mappings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
