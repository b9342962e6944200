"""One node's health probe: is it up, loading a model, or down, and how many slots it has.

`probe_backend(backend, dialect)` asks the node the way its dialect allows:

- ``openai`` (llama-server, or any OpenAI-compatible server): ``GET /health``
  at the server root. 200 is healthy, and ``GET /props`` then gives the slot
  count (``total_slots``) and context size (`probe_server_limits`); 503 is
  llama-server's "Loading model" (the only 503 its ``/health`` answers); a
  server without the route (404, 405) is asked ``GET {api_url}/models``
  instead. A listing's 503 is loading too (`ejections.not_ready`: up, not
  serving yet), never down.
- ``anthropic``, ``responses``, ``gemini``: the dialect's model listing,
  ``GET {api_url}/models``; ``ollama``: ``GET {api_url}/api/tags``.

Every request is the backend's own bounded, never-raising side request
(`llmchat.probe.SideRequests._side_request`): the node's key, headers,
probe deadline and key scrubbing apply, and a probe never raises. The probe
only reports; `health.HealthMonitor` decides what a result does to a node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from ...backends.openai_common import OpenAICommon
from ...counts import is_positive_int
from .ejections import not_ready

__all__ = ["LISTING_ROUTES", "ProbeResult", "ProbeState", "probe_backend"]

ProbeState: TypeAlias = Literal["healthy", "loading", "down"]

LISTING_ROUTES: Final[Mapping[str, str]] = {
    "openai": "/models",
    "anthropic": "/models",
    "responses": "/models",
    "gemini": "/models",
    "ollama": "/api/tags",
}
"""Each dialect's model listing, under the node's api_url: the probe of a node
without llama-server's ``/health``."""

_NO_ROUTE: Final = frozenset({404, 405})
"""Statuses that say the server has no such route (not that it is unwell)."""


@dataclass(frozen=True)
class ProbeResult:
    """What one probe of a node learnt. Never holds a key: notes are scrubbed by the backend."""

    state: ProbeState
    """``healthy`` (serving), ``loading`` (up, model not loaded yet: not a
    failure) or ``down`` (refused, timed out, or an error status)."""
    route: str
    """The route whose answer decided `state` (``GET /health``, ``GET /models``...)."""
    note: str | None = None
    """Why the node is not healthy, in llmchat's words; None when healthy."""
    slots: int | None = None
    """llama-server's ``total_slots`` from ``/props``; None when not learnt."""
    context_length: int | None = None
    """llama-server's per-slot ``n_ctx`` from ``/props``; None when not learnt."""

    def as_dict(self) -> dict[str, object]:
        """The result for a report: the members that are set."""
        out: dict[str, object] = {"state": self.state, "route": self.route}
        for name in ("note", "slots", "context_length"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


def probe_backend(backend: OpenAICommon, dialect: str) -> ProbeResult:
    """Probe the node `backend` speaks to, as its `dialect` allows; never raises.

    Bounded by the backend's probe timeout per request (two requests at
    most for a healthy llama-server: ``/health`` and ``/props``).
    """
    if dialect == "openai":
        return _probe_llama(backend)
    return _probe_listing(backend, LISTING_ROUTES.get(dialect, "/models"))


def _probe_llama(backend: OpenAICommon) -> ProbeResult:
    label = "GET /health"
    status, _, note = backend._side_request(
        "GET", backend._url("/health", at_root=True), label=label
    )
    if status in _NO_ROUTE:
        return _probe_listing(backend, LISTING_ROUTES["openai"])
    if not_ready("http", status):
        return ProbeResult("loading", label, "the server is loading its model (HTTP 503)")
    if status != 200:
        # A 200 whose body is not JSON (vLLM answers an empty one) is still healthy.
        return ProbeResult("down", label, note or f"{label} answered HTTP {status}")
    try:
        limits = backend.probe_server_limits()
    except Exception:  # a subclass's probe: the node answered /health, so it is still healthy
        limits = {}
    slots = limits.get("slots")
    n_ctx = limits.get("context_length")
    return ProbeResult(
        "healthy",
        label,
        slots=slots if is_positive_int(slots) else None,
        context_length=n_ctx if is_positive_int(n_ctx) else None,
    )


def _probe_listing(backend: OpenAICommon, route: str) -> ProbeResult:
    label = f"GET {route}"
    status, _, note = backend._side_request("GET", backend._url(route), label=label)
    if status == 200:
        return ProbeResult("healthy", label)
    if not_ready("http", status):  # up, not serving yet: `ejections`' one 503 rule
        return ProbeResult("loading", label, f"{label} answered HTTP {status}")
    return ProbeResult("down", label, note or f"{label} answered HTTP {status}")
