"""Redirects stay on the origin they started from: no key, and no prompt, crosses to another host.

requests follows redirects and strips only ``Authorization`` when the host
changes; ``x-api-key`` (Anthropic), ``x-goog-api-key`` (Gemini) and any
header a subclass adds would go to the new host, and a 307 or 308 re-sends
the whole prompt there. So llmchat follows a redirect only to the same
scheme, host and port (a gateway moving a route, say). One to another origin
is not followed: the 3xx is the answer, an ``http`` failure with its status,
as the OpenAI and Anthropic SDKs refuse cross-host redirects for a POST. The
hook takes the ``Location`` out of such a response before requests reads it,
so no request goes to that host, whoever the session's owner is.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

__all__ = ["stay_on_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1  # unparseable: never the same origin as anything
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


def stay_on_origin(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
    """A requests ``response`` hook: a redirect to another origin loses its ``Location``."""
    location = response.headers.get("location")
    if location is None or not response.is_redirect:
        return response
    target = urljoin(response.url, location)
    if _origin(target) != _origin(response.url):
        del response.headers["location"]  # requests now sees no redirect to follow
    return response
