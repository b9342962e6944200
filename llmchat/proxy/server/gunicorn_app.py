"""The proxy under gunicorn's threaded (``gthread``) workers, run in-process.

`llmchat proxy --workers N --threads M` lands here; so can any program that
wants several worker processes without an import string:

    from llmchat.proxy.gunicorn_app import WorkerOptions, serve
    serve(build, "127.0.0.1", 11434, WorkerOptions(workers=4, threads=32))

`build` makes the WSGI app and returns it with the function that releases
it. It runs once in every worker, after the fork (the app is never
preloaded): an upstream backend holds a `requests` Session whose pooled
sockets two processes must never share, so each worker gets its own.

Needs the ``proxy`` extra (``pip install 'llmchat[proxy]'``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from .gunicorn_worker import deadline_worker
from .limits import ServerLimits

if TYPE_CHECKING:
    from gunicorn._types import _WSGIAppType

__all__ = ["WorkerOptions", "gunicorn_settings", "serve"]

Build = Callable[[], "tuple[Any, Callable[[], None]]"]
"""Makes the WSGI app (any WSGI callable) and returns it with its release function."""

HEARTBEAT_TIMEOUT = 30
"""gunicorn's ``timeout``, which under gthread is no request timeout: the worker's
main loop reports in at least once a second while its threads serve requests,
so a stream may last hours. Only a worker whose main loop is stuck this long
is killed and replaced."""


@dataclass(frozen=True)
class WorkerOptions:
    """How many processes and threads serve, and how long connections live."""

    workers: int = 1
    threads: int = 32
    """Requests one worker serves at once; a stream holds its thread to the end,
    so give at least as many as the streams you expect per worker."""
    keepalive: int = 75
    """Seconds an idle client connection is kept open (0: close after each
    answer). Above the 60 s idle timeout of nginx's upstream keep-alive and of
    AWS load balancers, so the balancer, not the proxy, closes an idle
    connection and never sends a request down one the proxy is closing. An
    idle connection costs a descriptor in the worker's poller, not a thread."""
    graceful_timeout: int = 30
    """Seconds in-flight requests get to finish after SIGTERM (Kubernetes'
    default grace period); streams still running then are cut off."""
    max_connections: int = 256
    """Connections one worker holds, busy or idle (gunicorn's ``worker_connections``,
    raised to `threads` at least). Only the part above `threads` is kept alive
    between requests; past it the worker stops accepting, and new connections
    wait in the listen backlog (no 503, unlike the embedded server)."""
    header_timeout: float | None = 10.0
    """Seconds from a request's first byte to the end of its headers, in total
    (`ServerLimits.header_timeout`); a slower head is closed unanswered."""
    body_timeout: float | None = 60.0
    """Seconds from the end of the headers to the end of the body, in total; a
    slower body is a 408 in the face's shape."""
    send_timeout: float | None = 60.0
    """Seconds one write may wait for a client that reads nothing; then the
    client is let go and its upstream generation cancelled."""
    max_body_bytes: int = 10_000_000
    """The app's largest request body: the most of one a worker's poller buffers
    while the request arrives (`gunicorn_prebuffer`)."""

    def __post_init__(self) -> None:
        for name in (
            "workers",
            "threads",
            "keepalive",
            "graceful_timeout",
            "max_connections",
            "max_body_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            least = 0 if name == "keepalive" else 1
            if value < least:
                raise ValueError(f"{name} must be >= {least}, got {value}")
        _ = self.limits  # checks the timeouts, naming a bad one

    @property
    def limits(self) -> ServerLimits:
        """The read and write deadlines each worker's connections get."""
        return ServerLimits(
            header_timeout=self.header_timeout,
            body_timeout=self.body_timeout,
            send_timeout=self.send_timeout,
        )

    @property
    def worker_connections(self) -> int:
        # Fewer than `threads` would leave threads idle. gthread keeps only
        # worker_connections - threads connections alive between requests:
        # at `threads` exactly it closes each one after its answer (and says so).
        return max(self.max_connections, self.threads)


def gunicorn_settings(host: str, port: int, options: WorkerOptions) -> dict[str, Any]:
    """gunicorn's settings for serving on `host`:`port` with `options`."""
    return {
        "bind": [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"],
        # gthread, reading every request under total deadlines (gunicorn_worker).
        "worker_class": deadline_worker(options.limits, options.max_body_bytes),
        # As `make_server`: 100 header fields, a header line up to 64 KiB. A
        # request line stays at gunicorn's cap (8,190 bytes; more is a 414).
        "limit_request_fields": 100,
        "limit_request_field_size": 65536,
        "limit_request_line": 8190,
        "workers": options.workers,
        "threads": options.threads,
        "worker_connections": options.worker_connections,
        "keepalive": options.keepalive,
        "timeout": HEARTBEAT_TIMEOUT,
        "graceful_timeout": options.graceful_timeout,
        "preload_app": False,  # `build` runs in each worker, after the fork
        # No access log: the app's usage events are the record, and nothing
        # about a request line or its headers (keys) is written anywhere.
        "accesslog": None,
        "errorlog": "-",
        "proc_name": "llmchat-proxy",
        # Newer gunicorn opens a control socket at one fixed path per user;
        # two proxies on one machine would fight over it.
        "control_socket_disable": True,
    }


def serve(
    build: Build,
    host: str,
    port: int,
    options: WorkerOptions,
    *,
    announce: Callable[[str], None] | None = None,
    on_reload: Callable[[], None] | None = None,
    on_worker_exit: Callable[[int], None] | None = None,
) -> int:
    """Serve the app `build` makes until SIGTERM (graceful) or SIGINT (quick); the exit code.

    `announce` gets the URL once the socket is bound, before any worker
    starts (port 0 binds a free port: this is where to learn which).
    `on_reload` runs in the arbiter at its reload (SIGHUP), before it forks
    the new workers: what it changes there, they inherit.
    `on_worker_exit` gets a worker's pid as it exits (metrics clean up its
    files there); the server itself knows nothing of what it is for.
    """
    settings = gunicorn_settings(host, port, options)
    application = _ProxyApplication(build, settings, announce, on_reload, on_worker_exit)
    try:
        application.run()
    except SystemExit as stop:  # the arbiter's way of returning
        return stop.code if isinstance(stop.code, int) else 1
    return 0


class _ProxyApplication(BaseApplication):
    def __init__(
        self,
        build: Build,
        settings: dict[str, Any],
        announce: Callable[[str], None] | None,
        on_reload: Callable[[], None] | None = None,
        on_worker_exit: Callable[[int], None] | None = None,
    ) -> None:
        self._build = build
        self._settings = settings
        self._announce = announce
        self._on_reload = on_reload
        self._on_worker_exit = on_worker_exit
        self._release: Callable[[], None] | None = None
        super().__init__()

    def load_config(self) -> None:
        known = self.cfg.settings
        for name, value in self._settings.items():
            if name in known:  # an older gunicorn lacks some (the control socket)
                self.cfg.set(name, value)
        self.cfg.set("when_ready", self._when_ready)
        self.cfg.set("worker_exit", self._worker_exit)
        self.cfg.set("on_reload", self._reloading)

    def load(self) -> _WSGIAppType:
        app, self._release = self._build()
        wsgi: _WSGIAppType = app
        return wsgi

    def _when_ready(self, arbiter: Any) -> None:
        if self._announce is None:
            return
        for listener in arbiter.LISTENERS:
            host, port = listener.sock.getsockname()[:2]
            self._announce(f"http://{f'[{host}]' if ':' in host else host}:{port}")

    def _reloading(self, arbiter: Any) -> None:
        # gunicorn's on_reload hook: in the arbiter, after it re-read its own
        # settings and before it forks the new workers.
        if self._on_reload is not None:
            self._on_reload()

    def _worker_exit(self, arbiter: Any, worker: Any) -> None:
        if self._on_worker_exit is not None:
            self._on_worker_exit(worker.pid)
        release, self._release = self._release, None
        if release is not None:
            try:
                release()
            except Exception as exc:  # exiting anyway; say so and go
                # Only the type: a message could quote a URL with credentials in it.
                failure = type(exc).__name__
                print(f"llmchat proxy: closing the upstream failed: {failure}", file=sys.stderr)
