"""`llmchat proxy --workers N --threads M`: the options, and the hand-off to gunicorn.

Kept apart from `llmchat.proxy` so the command line does not import the proxy
(or gunicorn) until the `proxy` command runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any

from ..errors import LLMChatError

__all__ = ["add_worker_options", "serve_workers", "wants_workers"]

_MISSING = (
    "--workers and --threads run the proxy under gunicorn, which is not installed: "
    "pip install 'llmchat[proxy]'"
)


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    """Add the gunicorn options to the `proxy` subcommand's `parser`."""
    group = parser.add_argument_group(
        "worker processes (gunicorn; needs the proxy extra)",
        "Any of --workers or --threads serves under gunicorn's threaded workers instead of "
        "the embedded server; --max-connections is then per worker.",
    )
    group.add_argument(
        "--workers", type=_at_least(1), help="worker processes (default with --threads: 1)"
    )
    group.add_argument(
        "--threads",
        type=_at_least(1),
        help="requests each worker serves at once; at least the concurrent streams "
        "(default with --workers: 32)",
    )
    group.add_argument(
        "--graceful-timeout",
        type=_at_least(1),
        default=30,
        help="seconds in-flight requests get to finish after SIGTERM (default: 30)",
    )


def wants_workers(args: argparse.Namespace) -> bool:
    """Whether the command line asked for gunicorn's workers."""
    return args.workers is not None or args.threads is not None


def serve_workers(
    args: argparse.Namespace,
    build: Callable[[], tuple[Any, Any]],
    over: str | None = None,
    on_reload: Callable[[], None] | None = None,
) -> int:
    """Serve `build`'s app under gunicorn as `args` say; the exit code.

    `build` returns the app and its upstream backend. It runs here once first,
    so a bad option fails before anything is bound, and then again in every
    worker after the fork: the upstream's connection pool is never shared.
    `over` says what is served in the start-up line (default: the upstream's URL).
    `on_reload` runs in the arbiter on its SIGHUP, before the new workers fork.
    """
    try:
        from ..proxy.server.gunicorn_app import WorkerOptions
    except ImportError:
        raise LLMChatError(_MISSING) from None
    options = WorkerOptions(
        workers=args.workers or 1,
        threads=args.threads or 32,
        keepalive=math.ceil(args.keep_alive),  # gunicorn takes whole seconds
        graceful_timeout=args.graceful_timeout,
        max_connections=args.max_connections,
        header_timeout=args.header_timeout or None,
        body_timeout=args.body_timeout or None,
        send_timeout=args.send_timeout or None,
        max_body_bytes=args.max_body_bytes,
    )
    # Every connection a worker holds may hold one upstream connection.
    args.max_connections = options.worker_connections
    from ..proxy.ops.metrics_workers import multiprocess_dir

    with multiprocess_dir():  # before the first build: every worker's metrics in one scrape
        return _serve(args, build, options, over, on_reload)


def _serve(
    args: argparse.Namespace,
    build: Callable[[], tuple[Any, Any]],
    options: Any,
    over: str | None,
    on_reload: Callable[[], None] | None,
) -> int:
    from ..proxy.ops.metrics_workers import worker_exited
    from ..proxy.server.gunicorn_app import serve

    checked, upstream = build()
    over = over or f"over {upstream.api_url}"
    _close(checked, upstream)  # its usage store too: every worker opens its own

    def worker_app() -> tuple[Any, Callable[[], None]]:
        app, backend = build()
        return app, lambda: _close(app, backend)

    def announce(url: str) -> None:
        print(
            f"llmchat proxy: serving {url} {over} "
            f"(gunicorn: {options.workers} workers x {options.threads} threads)",
            file=sys.stderr,
            flush=True,
        )

    return serve(
        worker_app,
        args.host,
        args.port,
        options,
        announce=announce,
        on_reload=on_reload,
        on_worker_exit=worker_exited,
    )


def _close(app: Any, upstream: Any) -> None:
    try:
        app.close()
    finally:
        upstream.close()


def _at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
        return value

    return parse
