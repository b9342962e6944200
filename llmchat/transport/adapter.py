"""CancellableAdapter: requests' connection pools, with every socket registered on its exchange."""

from __future__ import annotations

import socket
from typing import Any, Final

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .exchange import _attach_to_current

__all__ = ["DEFAULT_POOL_SIZE", "CancellableAdapter", "new_session"]


class _TrackedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _attach_to_current(sock)  # before TLS: an abort can cut the handshake too
        return sock


class _TrackedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _attach_to_current(sock)  # covers the moment between connect and wrap only
        return sock

    def connect(self) -> None:
        super().connect()
        # Wrapping detaches the TCP socket registered above (its fileno becomes -1,
        # so shutting it down does nothing): register the TLS socket that replaced
        # it. An abort during the handshake lands as this attaches (shut down at
        # once), as one during the TCP connect lands when `_new_conn` returns.
        _attach_to_current(self.sock)


class _TrackedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _attach_to_current(getattr(conn, "sock", None))  # a pooled, already open socket
        return conn


class _TrackedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _attach_to_current(getattr(conn, "sock", None))
        return conn


_TRACKED_POOLS: Final = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


class CancellableAdapter(HTTPAdapter):
    """A requests adapter whose sockets llmchat can shut down from another thread.

    llmchat mounts it on the sessions it creates. Mount it on your own session
    (``session.mount("http://", CancellableAdapter())``, likewise https) to get
    prefill cancels there too; without it a cancel lands once headers arrive.
    SOCKS proxies are not tracked.
    """

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_TRACKED_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = dict(_TRACKED_POOLS)
        return manager


DEFAULT_POOL_SIZE: Final = 64


def new_session(pool_size: int = DEFAULT_POOL_SIZE) -> requests.Session:
    """A `requests.Session` with `CancellableAdapter` on http and https.

    `pool_size` is how many idle connections each host keeps: a backend shared
    by more threads than that opens extra connections and drops them after use
    (urllib3 logs "Connection pool is full" for each).
    """
    session = requests.Session()
    session.trust_env = True
    for prefix in ("http://", "https://"):
        session.mount(prefix, CancellableAdapter(pool_maxsize=pool_size))
    return session
