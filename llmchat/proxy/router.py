"""The proxy's route table: which handler answers a method and path, and for which face.

Every face fills it the same way (its package's ``routes(completions)``
returns a list of `Route`), and so does the app for its own few routes; the
app then only looks a request up (`Router.find`) and tells 404 from 405
(`Router.knows`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from .client_exchange import ClientExchange

__all__ = ["Handler", "Route", "Router"]

Handler = Callable[[ClientExchange], Iterable[bytes]]
"""A route's handler: the request's exchange in, the WSGI body out."""


class Route(NamedTuple):
    """One method and path, the face whose shape its answers (errors included) take, its handler."""

    method: str
    path: str
    face: str
    handler: Handler


class Router:
    """The route table: one `Route` per method and path, registered once, looked up per request."""

    def __init__(self, routes: Iterable[Route] = ()) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self._paths: set[str] = set()
        self.add(routes)

    def add(self, routes: Iterable[Route]) -> None:
        """Register `routes`; a method and path registered twice is a programming error."""
        for route in routes:
            key = (route.method, route.path)
            if key in self.routes:
                raise ValueError(f"{route.method} {route.path} is registered twice")
            self.routes[key] = route
            self._paths.add(route.path)

    def find(self, method: str, path: str) -> Route | None:
        """The route for `method` and `path`; None when there is none."""
        return self.routes.get((method, path))

    def knows(self, path: str) -> bool:
        """Whether any method is registered on `path` (a 405 then, not a 404)."""
        return path in self._paths

    @property
    def paths(self) -> frozenset[str]:
        """Every registered path."""
        return frozenset(self._paths)
