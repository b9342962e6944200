"""A small threaded WSGI server for the proxy, from the standard library.

`wsgiref` writes every chunk the app yields straight to the socket (no output
buffering), which streaming needs. This adds a thread per connection, quiet
handling of clients that hang up, and the client socket in the environ
(``llmchat.client_socket``) so the app can notice a hang-up during prefill.
For production, any WSGI server that does not buffer responses works the same
way; see the README (gunicorn's ``gthread`` workers, which also pass the socket).
"""

from __future__ import annotations

import logging
import socketserver
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

__all__ = ["ProxyServer", "make_server"]

log = logging.getLogger("llmchat.proxy")


class _Handler(WSGIRequestHandler):
    def get_environ(self) -> dict[str, Any]:
        environ = super().get_environ()
        environ["llmchat.client_socket"] = self.connection
        return environ

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


class ProxyServer(socketserver.ThreadingMixIn, WSGIServer):
    """`WSGIServer` with a daemon thread per connection."""

    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response is routine for a streaming proxy.
        log.debug("connection from %s ended with an error", client_address, exc_info=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


def make_server(app: Any, host: str = "127.0.0.1", port: int = 11434) -> ProxyServer:
    """Bind `app` to `host:port` (port 0 picks a free one); call `serve_forever()` on it."""
    server = ProxyServer((host, port), _Handler)
    server.set_app(app)
    return server
