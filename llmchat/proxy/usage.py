"""Usage events: one record per proxied request, to a JSON-lines file or a callback."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import wire_json

__all__ = ["UsageEvent", "UsageLog"]

log = logging.getLogger("llmchat.proxy")

CLIENT_ABORT_STATUS = 499
"""The status recorded when the client hung up (nginx's convention; never sent)."""


@dataclass
class UsageEvent:
    """What one request cost and how it ended. Never holds a credential or any text."""

    request_id: str
    face: str
    """``ollama``, ``anthropic``, ``openai`` or ``proxy`` (health, models, …)."""
    route: str
    """The request path, e.g. ``/api/chat``."""
    model: str | None = None
    """The model the client asked for (the upstream's when it named its own)."""
    stream: bool = False
    status: int = 200
    """The HTTP status sent; 499 when the client hung up."""
    ok: bool = True
    """False for any failure, including an error line after a 200."""
    duration_ms: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    content_bytes: int = 0
    """UTF-8 bytes of answer text written to the client: an observation, not an estimate."""
    error_type: str | None = None
    """``client_abort``, an upstream error class (``http``, ``timeout``, …), or a
    face error (``invalid_request``, ``unauthorized``, ``too_large``, ``not_found``)."""
    started_at: float = field(default_factory=time.time)
    """Unix time the request arrived."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class UsageLog:
    """Where usage events go: `target` is a path (JSON lines, appended) or a callable.

    A failing sink is logged and never fails the request it describes.
    """

    def __init__(self, target: str | os.PathLike[str] | Callable[[dict[str, Any]], Any] | None):
        if (
            target is not None
            and not callable(target)
            and not isinstance(target, (str, os.PathLike))
        ):
            raise TypeError("usage_log must be a file path, a callable taking a dict, or None")
        self._target = target
        self._lock = threading.Lock()

    def emit(self, event: UsageEvent) -> None:
        target = self._target
        if target is None:
            return
        record = event.as_dict()
        try:
            if callable(target):
                target(record)
                return
            line = wire_json.encode_data(record) + b"\n"
            with self._lock, open(target, "ab") as out:
                out.write(line)
        except Exception:
            log.warning("usage event for %s was not recorded", event.request_id, exc_info=True)
