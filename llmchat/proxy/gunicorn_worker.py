"""The documented path of the deadline worker, ``llmchat.proxy.gunicorn_worker``.

It lives in `server/`; this module only re-exports it.
"""

from __future__ import annotations

from .server.gunicorn_worker import BadRequestBody, DeadlineWorker, deadline_worker

__all__ = ["BadRequestBody", "DeadlineWorker", "deadline_worker"]
