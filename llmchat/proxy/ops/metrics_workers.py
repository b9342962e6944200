"""Prometheus multi-process mode for gunicorn's workers: one directory, made by the arbiter.

prometheus-client reads ``PROMETHEUS_MULTIPROC_DIR`` when it is first
imported, so the arbiter sets it before its first build of the app (which imports
prometheus-client) and before it forks; each worker then writes its counts to files in it,
and a scrape in any worker merges them all. A worker's exit marks its gauge
files dead; the directory goes when the arbiter is done. An operator's own
``PROMETHEUS_MULTIPROC_DIR`` is used as it is and never removed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator

__all__ = ["ENV", "multiprocess_dir", "worker_exited"]

ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[str | None]:
    """In the arbiter, around the workers' life: the directory (None without prometheus-client)."""
    own = os.environ.get(ENV)
    if own or importlib.util.find_spec("prometheus_client") is None:
        yield own
        return
    path = tempfile.mkdtemp(prefix="llmchat-metrics-")
    os.environ[ENV] = path
    arbiter = os.getpid()
    try:
        yield path
    finally:
        # A worker leaves gunicorn through here too (its SystemExit): only the arbiter removes.
        if os.getpid() == arbiter:
            os.environ.pop(ENV, None)
            shutil.rmtree(path, ignore_errors=True)


def worker_exited(pid: int) -> None:
    """Mark worker `pid`'s live gauges dead (its counters stay in the sums)."""
    if not os.environ.get(ENV) or importlib.util.find_spec("prometheus_client") is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
