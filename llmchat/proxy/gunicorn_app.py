"""The documented path of the gunicorn glue, ``llmchat.proxy.gunicorn_app``; it lives in `server/`.

from llmchat.proxy.gunicorn_app import WorkerOptions, serve
"""

from __future__ import annotations

from .server.gunicorn_app import WorkerOptions, gunicorn_settings, serve

__all__ = ["WorkerOptions", "gunicorn_settings", "serve"]
