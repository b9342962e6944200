"""Side requests beside a completion: server limits, and bounded JSON look-ups.

`probe_server_limits` asks llama.cpp's ``GET /props`` for its context size and
slot count; `side_request` is the one bounded, never-raising request a backend
makes beside its completions (a probe, a cost lookup, an abort). Every one is
bounded in total by the probe timeout (or its own limit), even against a
server that accepts and never answers, or trickles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .redact import Redactor
from .transport import Exchange, Timeouts, Transport, classify_exception, decode_body, parse_json

__all__ = ["ProbeHost", "probe_server_limits", "side_request"]


class ProbeHost(Protocol):
    """What a side request needs of its backend."""

    timeouts: Timeouts
    max_response_bytes: int | None
    _transport: Transport

    @property
    def probe_source(self) -> str: ...

    def _get_api_headers(self) -> dict[str, str]: ...
    def _redactor(self) -> Redactor: ...
    def _probe_json(self, path: str) -> tuple[Any, str | None]: ...


def probe_server_limits(host: ProbeHost) -> dict[str, Any]:
    """``{"source", "context_length", "slots"}`` from ``GET /props``, or ``{"source", "note"}``."""
    payload, note = host._probe_json("/props")
    if note is not None:
        return {"source": host.probe_source, "note": note}
    settings = payload.get("default_generation_settings") if isinstance(payload, Mapping) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, Mapping) else None
    if not _is_positive_int(n_ctx):
        return {
            "source": host.probe_source,
            "note": "GET /props has no default_generation_settings.n_ctx",
        }
    result: dict[str, Any] = {"source": host.probe_source, "context_length": n_ctx}
    slots = payload.get("total_slots")
    if _is_positive_int(slots):
        result["slots"] = slots
    return result


def side_request(
    host: ProbeHost,
    method: str,
    url: str,
    data: bytes | None = None,
    *,
    label: str,
    limit: float | None = None,
) -> tuple[int | None, Any, str | None]:
    """One bounded side request answering JSON: `(status, payload, note)`; never raises.

    `status` is None when no HTTP answer came (refused, timed out, cut off),
    which tells an unreachable server from one without the route.
    """
    timeouts = host.timeouts
    limit = timeouts.probe if limit is None else limit
    exchange = Exchange()
    exchange.arm_deadline(limit)
    headers = host._get_api_headers()
    if data is None:
        headers = {k: v for k, v in headers.items() if k != "Content-Type"}
    http = None
    try:
        http = host._transport.open(
            method,
            url,
            headers,
            data,
            exchange,
            connect_timeout=_min_limit(timeouts.connect, limit),
            read_timeout=_min_limit(timeouts.headers, limit),
        )
        body = http.read(host.max_response_bytes)
    except Exception as exc:
        _, message = classify_exception(
            exc, exchange=exchange, after_headers=http is not None, timeouts=timeouts
        )
        return None, None, host._redactor().text(f"{label} failed: {message}")
    finally:
        exchange.finish()
        if http is not None:
            http.close()
    status = http.status_code
    if status != 200:
        return status, None, f"{label} answered HTTP {status}"
    payload = parse_json(decode_body(body))
    if not isinstance(payload, Mapping):
        return status, None, f"{label} did not answer a JSON object"
    return status, payload, None


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _min_limit(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
