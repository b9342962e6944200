"""Usage events: one record per proxied request, to a JSON-lines file, a callback or a store.

A JSON line is written with one `os.write` on an ``O_APPEND`` descriptor, so
several processes (gunicorn workers) appending to one file never interleave or
lose a line: the kernel places each write at the end of the file whole. The
stores (`usage_store`) are for totals across processes and machines.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .. import wire_json

if TYPE_CHECKING:
    from .usage_store import UsageStore

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
    key_id: str | None = None
    """Which client key was accepted, as a non-reversible id (`key_id_of`); None when
    the proxy checks no key or the request presented none that passed."""

    def as_dict(self) -> dict[str, Any]:
        # Every field is a scalar: a shallow copy is the same dict as
        # `dataclasses.asdict`, at a twentieth of its cost per request.
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(UsageEvent))


class UsageLog:
    """Where usage events go: `target` is a path (JSON lines, appended) or a callable,
    and `store` a `UsageStore`; either may be None.

    A failing sink is logged and never fails the request it describes.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | Callable[[dict[str, Any]], Any] | None,
        store: UsageStore | None = None,
    ):
        if (
            target is not None
            and not callable(target)
            and not isinstance(target, (str, os.PathLike))
        ):
            raise TypeError("usage_log must be a file path, a callable taking a dict, or None")
        self._target = target
        self.store = store

    def emit(self, event: UsageEvent) -> None:
        target = self._target
        if target is not None:
            try:
                if callable(target):
                    target(event.as_dict())
                else:
                    _append_line(target, wire_json.encode_data(event.as_dict()) + b"\n")
            except Exception:
                log.warning("usage event for %s was not logged", event.request_id, exc_info=True)
        if self.store is not None:
            try:
                self.store.record(event)
            except Exception as exc:
                # No traceback: a database error's text is the store's to scrub.
                log.warning(
                    "usage event for %s was not stored: %s",
                    event.request_id,
                    self.store.describe_error(exc),
                )


def _append_line(path: str | os.PathLike[str], line: bytes) -> None:
    """Append `line` with one write, so concurrent writers never interleave.

    Opened per event, so a rotated log (renamed away by logrotate) is followed.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):
        # Only a full disk or a quota does this; the rest of the line would be a torn line.
        raise OSError(f"short write to the usage log: {written} of {len(line)} bytes")
