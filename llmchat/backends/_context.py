"""Per-request headers a caller adds to a backend's requests, without an API of its own.

The proxy sends each request's ``x-request-id`` upstream so a node's logs
name it. The backends' methods take no headers argument (their callers never
needed one), so the proxy sets them here for the duration of a call, in its
own thread; `_wire_request` adds them to what it builds. Nothing else sets them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["added_headers", "extra_headers"]

_HEADERS: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "llmchat_extra_headers", default=()
)


@contextlib.contextmanager
def extra_headers(*pairs: tuple[str, str]) -> Iterator[None]:
    """Add `pairs` to every request a backend builds in this context."""
    token = _HEADERS.set(_HEADERS.get() + pairs)
    try:
        yield
    finally:
        _HEADERS.reset(token)


def added_headers() -> tuple[tuple[str, str], ...]:
    """The pairs `extra_headers` set for this context (usually none)."""
    return _HEADERS.get()
