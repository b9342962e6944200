"""The proxy's HTTP/1.1 layer: the embedded server, gunicorn's glue, and their parts.

`make_server` / `ProxyServer` (the threaded server), `connection` (one
keep-alive connection: request head, body framing, the WSGI exchange, errors
answered before the app runs), `request_head`, `request_body`,
`wsgi_exchange`, `deadlines` (total read deadlines, the write stall limit),
`limits` (`ServerLimits`), `hangup` (notices a client that closed its
socket, for whichever app serves), and `gunicorn_app` / `gunicorn_worker`
(the same guarantees under gunicorn's gthread workers; gunicorn is optional,
so nothing here imports them).

The rule of this layer: it speaks WSGI and knows nothing of the faces. It may
import only the standard library, gunicorn, `llmchat.wire_json`,
`llmchat.transport.header_fields` and `llmchat.proxy.error_shapes` (the error
bodies, shared with the app); never `proxy.app`, `proxy.faces`,
`proxy.usage` or any other proxy module. tests/test_proxy_layers.py checks it.
"""

from __future__ import annotations

from .limits import ServerLimits
from .server import ProxyServer, make_server

__all__ = ["ProxyServer", "ServerLimits", "make_server"]
