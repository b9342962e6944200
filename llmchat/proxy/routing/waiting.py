"""Requests sent to a node and not yet answered: abandoned when the node is found gone.

A llama-server that gets SIGTERM closes its listener at once but neither
answers nor closes the connections it already holds: a request it had
accepted (or one written to a pooled keep-alive connection just then) gets
no headers until the proxy's `headers` timeout (60 s by default), then
fails over; its client has long given up. When another request to the same
node is refused (`RoutedUpstream.on_failure` with ``connection``), or a
health probe finds it down (`RoutedUpstream._probe`: how a request that
waits alone there is freed), the node is gone: the requests still waiting
there for their first answer are aborted (`ABANDONED`) and go to another
node like any failure before the first byte.
A stream that has started is not touched: its silence is bounded by the
node's read timeout, and a server that drains gracefully finishes it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["ABANDONED", "Waiting"]

ABANDONED: Final = "abandoned"
"""The `Exchange.abort` reason of a request whose node was found gone before it answered."""


class Waiting:
    """The abort of each request waiting for a node's headers, by node. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, dict[int, Callable[[], None]]] = {}
        self._ids = itertools.count()

    @contextlib.contextmanager
    def held(self, node: str, abort: Callable[[], None]) -> Iterator[None]:
        """While inside, `abandon(node)` calls `abort` (quick, never raising) once."""
        token = next(self._ids)
        with self._lock:
            self._by_node.setdefault(node, {})[token] = abort
        try:
            yield
        finally:
            with self._lock:
                self._by_node.get(node, {}).pop(token, None)

    def abandon(self, node: str) -> int:
        """Abort every request waiting on `node`'s headers; how many there were."""
        with self._lock:
            aborts = list(self._by_node.pop(node, {}).values())
        for abort in aborts:
            abort()
        return len(aborts)

    def count(self, node: str) -> int:
        """Requests waiting on `node`'s headers now."""
        with self._lock:
            return len(self._by_node.get(node, {}))
