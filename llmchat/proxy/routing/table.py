"""Which tiers serve a client's model name: the alias table.

An exact alias wins; otherwise the longest matching glob (``fnmatch``, case
sensitive), the first configured among equally long ones. A name nothing
matches is not served by a default: the client gets the face's 404
model-not-found, so a typo never lands silently on some other model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from ..failures import Failure
from .config import Tier

__all__ = ["Route", "RouteTable", "is_glob", "unknown_model"]

_SHOWN: Final = 100
"""How much of an unknown model name a 404 repeats back."""


def is_glob(name: str) -> bool:
    """True when `name` is a pattern (``*``, ``?`` or ``[``), not a model name."""
    return any(c in name for c in "*?[")


@dataclass(frozen=True)
class Route:
    """What a client's model name resolved to: the alias (name or glob) and its tiers."""

    alias: str
    tiers: tuple[Tier, ...]


class RouteTable:
    """The aliases of one config, resolved per request. Immutable, so thread-safe."""

    def __init__(self, models: Mapping[str, tuple[Tier, ...]]) -> None:
        self._exact = {
            name: Route(name, tuple(t)) for name, t in models.items() if not is_glob(name)
        }
        globs = [(name, Route(name, tuple(t))) for name, t in models.items() if is_glob(name)]
        # Longest first; `sorted` is stable, so config order breaks ties.
        self._globs = sorted(globs, key=lambda item: -len(item[0]))

    def resolve(self, model: str) -> Route | None:
        """The route for the client's `model`; None when no alias matches it."""
        route = self._exact.get(model)
        if route is not None:
            return route
        for pattern, route in self._globs:
            if fnmatchcase(model, pattern):
                return route
        return None

    def names(self) -> list[str]:
        """The exact aliases, in config order, each once (globs name no model)."""
        return list(self._exact)


def unknown_model(model: Any) -> Failure:
    """The 404 (in the face's shape, from the proxy) for a model no alias matches."""
    name = model if isinstance(model, str) else ""
    shown = name if len(name) <= _SHOWN else name[:_SHOWN] + "..."
    return Failure(404, f"The model '{shown}' does not exist", "not_found")
