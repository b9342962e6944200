"""What ``GET /health`` answers for a routing proxy: the proxy's status, each node, the live config.

Apart from the monitor (`health`), which it reads: the report is the one
place node state leaves the process, so every string in it is scrubbed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...redact import Redactor
from .health import HealthMonitor, HealthTarget, redactor_of

__all__ = ["health_report"]


def health_report(
    targets: Iterable[HealthTarget],
    *,
    config_source: str,
    config_digest: str,
    monitor: HealthMonitor | None = None,
) -> dict[str, Any]:
    """What ``GET /health`` answers for a routing proxy: its status, each node, the live config.

    ``status`` is ``ok`` when at least one node is eligible (its `report()`
    says ``"eligible": true``), else ``degraded``. Each node's entry is its
    `report()`, with the `monitor`'s view under ``health`` when given; every
    string in it goes through the node's redactor, so no key is in it.
    """
    nodes = []
    for target in targets:
        entry: dict[str, Any] = {"name": target.name, "dialect": target.dialect}
        entry.update(target.report())
        if monitor is not None:
            entry["health"] = monitor.report(target)
        nodes.append(_scrubbed(entry, redactor_of(target)))
    eligible = any(node.get("eligible") is True for node in nodes)
    return {
        "status": "ok" if eligible else "degraded",
        "nodes": nodes,
        "config": {"source": config_source, "digest": config_digest},
    }


def _scrubbed(value: Any, redactor: Redactor) -> Any:
    """`value` with every string (keys included) through `redactor`."""
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, Mapping):
        return {_scrubbed(k, redactor): _scrubbed(v, redactor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrubbed(item, redactor) for item in value]
    return value
