"""Sending through a `requests.Session` without re-reading the environment per request.

`Session.request` asks the environment for proxies on every call (with
`trust_env`, the default): `get_environ_proxies` walks every environment
variable two or three times and matches ``no_proxy`` — about 100 µs, the
largest single cost of a short blocking call. The answer depends only on the
URL and on the ``*_proxy`` variables (and ``REQUEST_METHOD``, which makes
urllib ignore ``HTTP_PROXY`` under CGI), so `send` computes it once per URL
and environment and remembers it. Everything else is exactly
`Session.request`: the same prepared request, the same `verify` from
``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE``, the same merge with the session's
own settings, read on every call so a change to the session or the
environment takes effect at once.

A session whose class overrides `request` or `merge_environment_settings` is
sent through its own `request`, untouched.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

import requests
from requests import sessions, utils

from .prepare import prepare
from .redirects import stay_on_origin

__all__ = ["environment_proxies", "send"]

_merge_setting = cast("Callable[[Any, Any], Any]", sessions.merge_setting)
_environ_proxies = cast("Callable[..., dict[str, str]]", utils.get_environ_proxies)
_CACHE_SIZE: Final = 256
_cache: dict[tuple[str, tuple[Any, ...]], dict[str, str]] = {}
_lock = threading.Lock()


def send(
    session: requests.Session,
    method: str,
    url: str,
    headers: Mapping[str, str],
    data: bytes | None,
    timeout: tuple[float | None, float | None],
) -> requests.Response:
    """`session.request(method, url, headers=, data=, stream=True, timeout=)`, minus the walk."""
    cls = type(session)
    if (
        cls.request is not requests.Session.request
        or cls.merge_environment_settings is not requests.Session.merge_environment_settings
    ):
        return session.request(
            method,
            url,
            headers=dict(headers),
            data=data,
            stream=True,
            timeout=timeout,
            hooks={"response": [stay_on_origin]},
        )
    prepared = prepare(session, method, url, headers, data)
    # A new list: the session's own hook lists may be the ones in `prepared`.
    prepared.hooks = {**prepared.hooks, "response": [*prepared.hooks["response"], stay_on_origin]}
    proxies: dict[str, str] = {}
    verify: Any = None
    if session.trust_env:
        proxies.update(environment_proxies(prepared.url or url))
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None
    return session.send(
        prepared,
        timeout=timeout,
        allow_redirects=True,
        proxies=_merge(proxies, session.proxies),
        stream=_merge(True, session.stream),
        verify=_merge(verify, session.verify),
        cert=_merge(None, session.cert),
    )


def _merge(request_setting: Any, session_setting: Any) -> Any:
    """`requests.sessions.merge_setting`, answered at once for the common cases.

    Two empty mappings (no proxies anywhere) merge to an empty one without
    requests' walk of both, whose runtime-protocol checks cost more than the
    rest of the merge."""
    if session_setting is None:
        return request_setting
    if request_setting is None:
        return session_setting
    if type(request_setting) is dict and type(session_setting) is dict:
        if not request_setting and not session_setting:
            return OrderedDict()  # what merge_setting builds
    return _merge_setting(request_setting, session_setting)


def environment_proxies(url: str) -> dict[str, str]:
    """`requests.utils.get_environ_proxies(url)`, remembered per URL and proxy environment."""
    key = (url, _proxy_environment())
    found = _cache.get(key)
    if found is None:
        found = _environ_proxies(url, no_proxy=None)
        with _lock:
            if len(_cache) >= _CACHE_SIZE:
                _cache.clear()
            _cache[key] = found
    return dict(found)


def _proxy_environment() -> tuple[Any, ...]:
    """Every environment variable urllib's proxy lookup reads, as a hashable snapshot.

    (On macOS and Windows urllib also reads the system's proxy settings; those
    are read once per URL and environment, not per request.)
    """
    data = getattr(os.environ, "_data", None)  # CPython: the encoded mapping, cheap to walk
    encoded = isinstance(data, dict) and os.name != "nt"  # POSIX keys are bytes there
    # One C-level copy first: a Python-level walk could see another thread's change.
    items: tuple[tuple[Any, Any], ...] = tuple(
        data.items() if isinstance(data, dict) else os.environ.items()
    )
    suffix: Any = b"_proxy" if encoded else "_proxy"
    method: Any = b"REQUEST_METHOD" if encoded else "REQUEST_METHOD"
    return tuple(item for item in items if item[0][-6:].lower() == suffix or item[0] == method)
