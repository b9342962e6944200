"""CancellableAdapter: requests' connection pools, with every socket registered on its exchange.

The pools and connections themselves are `pool`'s.
"""

from __future__ import annotations

from typing import Any, Final

import requests
from requests.adapters import HTTPAdapter

from .pool import TrackedHTTPPool, TrackedHTTPSPool

__all__ = ["DEFAULT_POOL_SIZE", "CancellableAdapter", "new_session"]

_TRACKED_POOLS: Final = {"http": TrackedHTTPPool, "https": TrackedHTTPSPool}


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
