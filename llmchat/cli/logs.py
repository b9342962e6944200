"""`llmchat proxy`'s log lines: one handler on stderr, every line with its request's id.

Installed before anything is bound or forked, so gunicorn's workers inherit
it. A line reads ``2025-01-01 12:00:00,123 WARNING llmchat.proxy [req_0af3...]
upstream failed (HTTP 500): ...``; ``[-]`` for one logged outside a request
(start-up, health probes, reloads).
"""

from __future__ import annotations

import logging
import sys
from typing import Final, TextIO

__all__ = ["LOG_FORMAT", "LOG_LEVELS", "configure_logging"]

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
"""The proxy's log line: time, level, logger, the request's id, the message."""

LOG_LEVELS: Final = ("debug", "info", "warning", "error")


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler on whatever `sys.stderr` is when a record comes (it may be replaced)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current stderr


def configure_logging(level: str) -> bool:
    """Log llmchat's records at `level` and above to stderr in `LOG_FORMAT`; whether it did.

    Like `logging.basicConfig`, nothing is changed when the root logger has a
    handler already: the program (or test runner) embedding the command
    configured logging itself, and keeps it. The request-id filter sits on the
    handler, so it stamps every logger's records, not only llmchat's.
    """
    from ..proxy.request_scope import RequestIdFilter

    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    root = logging.getLogger()
    if root.handlers:
        return False
    handler = _Stderr()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(RequestIdFilter())
    root.addHandler(handler)
    # Only llmchat's loggers change level: a library's DEBUG lines stay out.
    logging.getLogger("llmchat").setLevel(level.upper())
    return True
