"""Joining a route onto a backend's `api_url`, which may carry a query string.

Azure-style endpoints put required parameters in the base URL
(``https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01``);
appending a path to that text would land it inside the query. The path goes
before the query, and a route's own query is merged after the base's.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["join_url", "server_root"]


def join_url(base: str, route: str) -> str:
    """`base` with `route` (``/path`` or ``/path?query``) appended to its path.

    The base's query (if any) comes first, then the route's; a fragment is
    dropped, as HTTP never sends one.
    """
    parts = urlsplit(base)
    path, _, route_query = route.partition("?")
    query = "&".join(q for q in (parts.query, route_query) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, query, ""))


def server_root(base: str) -> str:
    """`base` without a trailing ``/v1`` path segment, its query kept: a server's own routes."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
