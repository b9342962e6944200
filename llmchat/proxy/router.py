"""The proxy's route table: which handler answers a method and path, and for which face.

Every face fills it the same way (its package's ``routes(completions)``
returns a list of `Route`), and so does the app for its own few routes; the
app then only looks a request up (`Router.find`) and tells 404 from 405
(`Router.knows`).

Most routes are one exact path, found by one dict lookup. A face whose paths
carry a parameter (Gemini's ``/v1beta/models/{model}:generateContent``)
registers a prefix route instead (``prefix=True``): it answers every longer
path under its prefix, and its handler reads the rest from ``PATH_INFO``.
Prefixes are tried only when the exact lookup misses, longest first, so the
exact routes cost what they did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from .client_exchange import ClientExchange

__all__ = ["Handler", "Route", "Router"]

Handler = Callable[[ClientExchange], Iterable[bytes]]
"""A route's handler: the request's exchange in, the WSGI body out."""


class Route(NamedTuple):
    """One method and path, the face whose shape its answers (errors included) take, its handler.

    With `prefix`, `path` is a prefix (ending in ``/``) and the route answers
    every path that continues it.
    """

    method: str
    path: str
    face: str
    handler: Handler
    prefix: bool = False


class Router:
    """The route table: one `Route` per method and path, registered once, looked up per request."""

    def __init__(self, routes: Iterable[Route] = ()) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self.prefixes: dict[tuple[str, str], Route] = {}
        self._paths: set[str] = set()
        self._ordered: tuple[Route, ...] = ()
        """The prefix routes, longest prefix first: a longer one is the more specific."""
        self.add(routes)

    def add(self, routes: Iterable[Route]) -> None:
        """Register `routes`; a method and path registered twice is a programming error."""
        for route in routes:
            key = (route.method, route.path)
            table = self.prefixes if route.prefix else self.routes
            if key in table:
                kind = "prefix " if route.prefix else ""
                raise ValueError(f"{route.method} {kind}{route.path} is registered twice")
            if route.prefix and not route.path.endswith("/"):
                raise ValueError(f"prefix route {route.path} must end with '/'")
            table[key] = route
            self._paths.add(route.path)
        self._ordered = tuple(sorted(self.prefixes.values(), key=lambda r: -len(r.path)))

    def find(self, method: str, path: str) -> Route | None:
        """The route for `method` and `path`; None when there is none."""
        route = self.routes.get((method, path))
        if route is not None or not self._ordered:
            return route
        for candidate in self._ordered:
            if (
                candidate.method == method
                and len(path) > len(candidate.path)
                and path.startswith(candidate.path)
            ):
                return candidate
        return None

    def knows(self, path: str) -> bool:
        """Whether any method is registered on `path` (a 405 then, not a 404)."""
        return self.recorded(path) is not None

    def recorded(self, path: str) -> str | None:
        """What a usage event records as the route of `path`: the path when it is registered,
        the prefix and ``*`` when a prefix route's (the rest is the client's own text:
        the handler may say more), None when no method is registered on it."""
        if path in self._paths:
            return path
        for route in self._ordered:
            if len(path) > len(route.path) and path.startswith(route.path):
                return f"{route.path}*"
        return None

    @property
    def paths(self) -> frozenset[str]:
        """Every registered path (a prefix route's prefix among them)."""
        return frozenset(self._paths)
