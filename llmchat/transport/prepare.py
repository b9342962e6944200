"""Preparing a request as `Session.prepare_request` does, without its per-call merges.

`Session.prepare_request` merges the session's cookies, headers, params, auth
and hooks into every request, and re-parses and re-quotes the URL: about half
of requests' own cost on a short call, and nearly all of it is merging things
llmchat's sessions never hold. When the session has nothing to merge — no
cookies, no auth, no params, no hooks, no credentials in the URL, none in
``~/.netrc`` — `prepare` builds the same `PreparedRequest` directly: the same
method, URL (prepared once per URL string and remembered), headers (the
session's, then the request's, each checked as requests checks it), body and
``Content-Length``, an empty cookie jar for response cookies, default hooks.
Otherwise, and for a session class that overrides `prepare_request`, it is
`session.prepare_request` itself.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

import requests
from requests import utils
from requests.cookies import RequestsCookieJar
from requests.structures import CaseInsensitiveDict

__all__ = ["prepare"]

_check_header = cast("Callable[[tuple[str, str]], None]", utils.check_header_validity)
_netrc_auth = cast("Callable[[str], Any]", utils.get_netrc_auth)
_CACHE_SIZE: Final = 256
_urls: dict[str, str] = {}
_netrc_places: dict[tuple[str | None, str | None], tuple[str, ...]] = {}
_lock = threading.Lock()


def prepare(
    session: requests.Session, method: str, url: str, headers: Mapping[str, str], data: bytes | None
) -> requests.PreparedRequest:
    """What ``session.prepare_request(Request(method, url, headers=, data=data or {}))`` gives."""
    if not _nothing_to_merge(session, url):
        return session.prepare_request(
            requests.Request(method.upper(), url, headers=dict(headers), data=data or {}, params={})
        )
    prepared = requests.PreparedRequest()
    prepared.method = method.upper()
    prepared.url = _prepared_url(url)
    merged: CaseInsensitiveDict[Any] = CaseInsensitiveDict()
    for name, value in session.headers.items():
        if value is not None:  # a session header set to None is removed, as merge_setting does
            merged[name] = value
    for name, value in headers.items():
        merged[name] = value
    for pair in merged.items():
        _check_header(pair)
    prepared.headers = merged
    prepared.body = data or None
    if data:
        merged["Content-Length"] = str(len(data))
    elif prepared.method not in ("GET", "HEAD") and merged.get("Content-Length") is None:
        merged["Content-Length"] = "0"
    # requests' redirect handling reads the jar `prepare_cookies` would store;
    # setting an empty one spares that method's cookie-header walk (nothing to add).
    prepared._cookies = RequestsCookieJar()  # type: ignore[attr-defined]
    return prepared


def _nothing_to_merge(session: requests.Session, url: str) -> bool:
    if type(session).prepare_request is not requests.Session.prepare_request:
        return False
    if len(session.cookies) or session.auth is not None or session.params:
        return False
    if any(session.hooks.get(event) for event in session.hooks):
        return False
    if "@" in url.split("/", 3)[2 if "://" in url else 0]:
        return False  # credentials in the URL become basic auth there
    # requests reads ~/.netrc (or $NETRC) for every request without auth.
    return not (session.trust_env and _netrc_exists() and _netrc_auth(url))


def _netrc_exists() -> bool:
    """Whether a netrc file is where `requests.utils.get_netrc_auth` looks for one.

    Only when one is does requests' own lookup (and its URL parse) run: the
    files are looked for on every call, as requests does, but the
    ``~`` expansion is remembered per ``$NETRC`` and ``$HOME``.
    """
    key = (os.environ.get("NETRC"), os.environ.get("HOME"))
    places = _netrc_places.get(key)
    if places is None:
        names = (key[0],) if key[0] is not None else tuple(f"~/{f}" for f in utils.NETRC_FILES)
        places = tuple(os.path.expanduser(name) for name in names)
        with _lock:
            if len(_netrc_places) >= _CACHE_SIZE:
                _netrc_places.clear()
            _netrc_places[key] = places
    return any(os.path.exists(place) for place in places)


def _prepared_url(url: str) -> str:
    """`PreparedRequest.prepare_url(url, {})`'s result: a pure function of the string."""
    found = _urls.get(url)
    if found is None:
        probe = requests.PreparedRequest()
        probe.prepare_url(url, {})
        found = probe.url or url
        with _lock:
            if len(_urls) >= _CACHE_SIZE:
                _urls.clear()
            _urls[url] = found
    return found
