"""Proxies and CA bundles from the environment, read as `Session.request` reads them, remembered.

`transport.environment.send` must hand `Session.send` exactly what
`Session.merge_environment_settings` would, for every environment, and see a
change to the environment on the very next request. Over real sockets, a
loopback server plays the HTTP proxy.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from llmchat import OpenAICommon
from llmchat.testing import ChatResponder, ScriptedServer
from llmchat.transport import RequestsTransport, environment

URL = "http://api.example.test:8080/v1/chat/completions"

ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"HTTP_PROXY": "http://proxy.test:3128"},
    {"http_proxy": "http://lower.test:1", "HTTP_PROXY": "http://upper.test:2"},
    {"HTTPS_PROXY": "http://p.test:1", "ALL_PROXY": "socks5://all.test:1080"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "example.test"},
    {"HTTP_PROXY": "http://proxy.test:3128", "no_proxy": "api.example.test:8080"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "*"},
    {"HTTP_PROXY": "http://proxy.test:3128", "NO_PROXY": "other.test"},
    {"HTTP_PROXY": "http://proxy.test:3128", "REQUEST_METHOD": "GET"},  # CGI: HTTP_PROXY ignored
    {"ftp_proxy": "http://ftp.test:21", "socks_proxy": "socks5://s.test:1"},
    {"REQUESTS_CA_BUNDLE": "/etc/ca.pem"},
    {"CURL_CA_BUNDLE": "/etc/curl.pem"},
    {"REQUESTS_CA_BUNDLE": "/etc/ca.pem", "CURL_CA_BUNDLE": "/etc/curl.pem"},
]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name in (
            "REQUEST_METHOD",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
        ):
            monkeypatch.delenv(name)
    return monkeypatch


class Captured(Exception):
    """Raised by the fake `send`, carrying what it was given."""


def settings_given(session: requests.Session, url: str) -> dict[str, object]:
    """What `environment.send` passes to `Session.send` (the send is stopped there)."""
    seen: dict[str, object] = {}

    def fake_send(request: requests.PreparedRequest, **kwargs: object) -> requests.Response:
        seen.update(kwargs)
        raise Captured

    session.send = fake_send  # type: ignore[method-assign]
    with pytest.raises(Captured):
        environment.send(session, "post", url, {"X": "1"}, b"{}", (1.0, 2.0))
    return seen


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda env: ",".join(env) or "empty")
@pytest.mark.parametrize("session_side", ["plain", "session settings"])
def test_the_same_settings_as_session_request(
    clean_env: pytest.MonkeyPatch, env: dict[str, str], session_side: str
) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    session = requests.Session()
    if session_side == "session settings":
        session.proxies = {"https": "http://session.test:9", "http": None}  # type: ignore[dict-item]
        session.verify = "/session/ca.pem"
        session.cert = "/session/cert.pem"
    expected = session.merge_environment_settings(URL, {}, True, None, None)
    for _ in range(2):  # computed, then remembered: the same both times
        got = settings_given(session, URL)
        assert {k: got[k] for k in expected} == expected
        assert got["timeout"] == (1.0, 2.0) and got["allow_redirects"] is True


def test_a_change_to_the_environment_is_seen_on_the_next_request(
    clean_env: pytest.MonkeyPatch,
) -> None:
    session = requests.Session()
    assert settings_given(session, URL)["proxies"] == {}
    clean_env.setenv("HTTP_PROXY", "http://proxy.test:3128")
    assert settings_given(session, URL)["proxies"] == {"http": "http://proxy.test:3128"}
    clean_env.setenv("NO_PROXY", "api.example.test")
    assert settings_given(session, URL)["proxies"] == {}
    clean_env.delenv("NO_PROXY")
    session.trust_env = False
    assert settings_given(session, URL)["proxies"] == {}


def test_the_prepared_request_is_session_requests(clean_env: pytest.MonkeyPatch) -> None:
    session = requests.Session()
    session.headers["X-Session"] = "s"
    prepared: list[requests.PreparedRequest] = []

    def fake_send(request: requests.PreparedRequest, **kwargs: object) -> requests.Response:
        prepared.append(request)
        raise Captured

    session.send = fake_send  # type: ignore[method-assign]
    with pytest.raises(Captured):
        environment.send(session, "post", URL, {"X": "1"}, b'{"a":1}', (1.0, 2.0))
    with pytest.raises(Captured):
        session.request("post", URL, headers={"X": "1"}, data=b'{"a":1}', stream=True)
    mine, theirs = prepared
    assert (mine.method, mine.url, mine.body) == (theirs.method, theirs.url, theirs.body)
    assert dict(mine.headers) == dict(theirs.headers)


def test_a_session_that_overrides_request_is_sent_through_it() -> None:
    calls: list[str] = []

    class Mine(requests.Session):
        def request(
            self, method: str, url: str, *args: object, **kwargs: object
        ) -> requests.Response:  # type: ignore[override]
            calls.append(url)
            raise Captured

    with pytest.raises(Captured):
        environment.send(Mine(), "POST", URL, {}, b"{}", (1.0, 2.0))
    assert calls == [URL]


@pytest.fixture
def two_servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    proxy, upstream = (
        ScriptedServer(ChatResponder("via proxy")),
        ScriptedServer(ChatResponder("direct")),
    )
    with proxy, upstream:
        yield proxy, upstream


def test_http_proxy_and_no_proxy_over_real_sockets(
    clean_env: pytest.MonkeyPatch, two_servers: tuple[ScriptedServer, ScriptedServer]
) -> None:
    proxy, upstream = two_servers
    backend = OpenAICommon(upstream.url, model="m", transport=RequestsTransport())
    hi = [{"role": "user", "content": "Hi"}]
    assert backend.chat_completion(hi).msg == "direct"
    clean_env.setenv("HTTP_PROXY", proxy.root)
    r = backend.chat_completion(hi)
    assert r.msg == "via proxy"
    # A proxy is sent the absolute URL as the request target.
    assert proxy.requests[-1].path == upstream.url + "/chat/completions"
    clean_env.setenv("NO_PROXY", "127.0.0.1")
    assert backend.chat_completion(hi).msg == "direct"
    assert len(proxy.requests) == 1 and len(upstream.requests) == 2
