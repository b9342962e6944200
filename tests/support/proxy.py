"""Running the proxy for tests: the real WSGI server on loopback, in a thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from llmchat import OpenAICommon
from llmchat.proxy import make_app, make_server
from llmchat.testing import Script, ScriptedServer


class UsageSink:
    """Collects usage events; `wait(n)` blocks until n arrived (they land after the body)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait(
        self, n: int, timeout: float = 10.0, *, route: str | None = None
    ) -> list[dict[str, Any]]:
        """The events once `n` arrived (only those for `route`, when given)."""

        def matching() -> list[dict[str, Any]]:
            return [e for e in self.events if route is None or e["route"] == route]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= n, timeout):
                raise AssertionError(f"expected {n} usage events, got {self.events}")
            return matching()


@contextlib.contextmanager
def running_proxy(upstream: Any, **options: Any) -> Iterator[str]:
    """Serve `make_app(upstream, **options)` on a free loopback port; yield its base URL."""
    server = make_server(make_app(upstream, **options), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, name="test-proxy", daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def proxy_over(script: Script, **options: Any) -> Iterator[tuple[str, ScriptedServer]]:
    """The proxy over a loopback upstream playing `script`; yield its base URL and the upstream."""
    upstream = ScriptedServer(script).start()
    try:
        with OpenAICommon(upstream.url) as backend, running_proxy(backend, **options) as url:
            yield url, upstream
    finally:
        upstream.stop()
