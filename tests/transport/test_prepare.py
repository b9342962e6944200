"""`transport.prepare.prepare` builds what `Session.prepare_request` builds, or calls it.

Every case compares the two PreparedRequests field by field (method, URL,
headers in order, body, hooks, cookies), for sessions with nothing to merge
(the fast path) and with something (cookies, auth, params, hooks, URL
credentials, a netrc entry, an overriding class: requests' own path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from llmchat.transport import new_session
from llmchat.transport.prepare import prepare

HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-x", "User-Agent": "u"}

URLS = [
    "http://127.0.0.1:8080/v1/chat/completions",
    "https://api.example.test/v1/chat/completions?api-version=2024-10-21",
    "http://[::1]:8080/v1/messages",
    "http://example.test/a path/ü?q=a b",
    "http://EXAMPLE.test:80/v1/",
    "https://bücher.example/v1/models",
]


def requests_own(session: requests.Session, method: str, url: str, headers: Any, data: Any) -> Any:
    return session.prepare_request(
        requests.Request(method.upper(), url, headers=dict(headers), data=data or {}, params={})
    )


def same(a: requests.PreparedRequest, b: requests.PreparedRequest) -> None:
    assert (a.method, a.url, a.body) == (b.method, b.url, b.body)
    assert list(a.headers.items()) == list(b.headers.items())
    assert a.hooks == b.hooks
    assert dict(a._cookies) == dict(b._cookies)  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def no_netrc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(path))  # absent unless a test writes it
    return path


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("method", ["post", "POST", "get"])
@pytest.mark.parametrize("data", [b'{"a":1}', b"", None])
@pytest.mark.parametrize("kind", ["requests", "llmchat"])
def test_the_same_request_as_prepare_request(url: str, method: str, data: Any, kind: str) -> None:
    session = requests.Session() if kind == "requests" else new_session()
    for _ in range(2):  # the URL is prepared once, then remembered
        same(
            prepare(session, method, url, HEADERS, data),
            requests_own(session, method, url, HEADERS, data),
        )


def test_session_headers_merge_as_requests_merges_them() -> None:
    session = requests.Session()
    session.headers["X-Session"] = "s"
    session.headers["User-Agent"] = "session-agent"
    session.headers["Accept"] = None  # type: ignore[assignment]  # removes requests' default
    headers = {"user-agent": "mine", "X-Mine": "m"}
    same(
        prepare(session, "POST", URLS[0], headers, b"{}"),
        requests_own(session, "POST", URLS[0], headers, b"{}"),
    )


@pytest.mark.parametrize("bad", ["a\r\nInjected: 1", " leading", "x\n"])
def test_a_bad_header_value_is_refused_as_requests_refuses_it(bad: str) -> None:
    session = requests.Session()
    with pytest.raises(requests.exceptions.InvalidHeader):
        requests_own(session, "POST", URLS[0], {"X": bad}, b"{}")
    with pytest.raises(requests.exceptions.InvalidHeader):
        prepare(session, "POST", URLS[0], {"X": bad}, b"{}")


def _with_cookie(session: requests.Session) -> None:
    session.cookies.set("sid", "1", domain="127.0.0.1")


def _with_auth(session: requests.Session) -> None:
    session.auth = ("user", "pass")


def _with_params(session: requests.Session) -> None:
    session.params = {"key": "v"}


def _with_hook(session: requests.Session) -> None:
    session.hooks["response"].append(lambda r, **kw: r)


@pytest.mark.parametrize("configure", [_with_cookie, _with_auth, _with_params, _with_hook])
def test_a_session_with_something_to_merge_goes_through_requests(configure: Any) -> None:
    session = requests.Session()
    configure(session)
    same(
        prepare(session, "POST", URLS[0], HEADERS, b"{}"),
        requests_own(session, "POST", URLS[0], HEADERS, b"{}"),
    )


def test_credentials_in_the_url_become_basic_auth_as_in_requests() -> None:
    session = requests.Session()
    url = "http://user:secret@127.0.0.1:8080/v1/chat/completions"
    mine = prepare(session, "POST", url, {}, b"{}")
    same(mine, requests_own(session, "POST", url, {}, b"{}"))
    assert mine.headers["Authorization"].startswith("Basic ")


def test_a_netrc_entry_is_honoured_as_in_requests(no_netrc: Path) -> None:
    no_netrc.write_text("machine 127.0.0.1 login me password pw\n")
    no_netrc.chmod(0o600)
    session = requests.Session()
    mine = prepare(session, "POST", URLS[0], {}, b"{}")
    same(mine, requests_own(session, "POST", URLS[0], {}, b"{}"))
    assert mine.headers["Authorization"].startswith("Basic ")
    session.trust_env = False  # requests reads no netrc then
    mine = prepare(session, "POST", URLS[0], {}, b"{}")
    assert "Authorization" not in mine.headers
    same(mine, requests_own(session, "POST", URLS[0], {}, b"{}"))


def test_a_session_class_that_overrides_prepare_request_is_called() -> None:
    calls: list[str] = []

    class Mine(requests.Session):
        def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
            calls.append(request.url)
            return super().prepare_request(request)

    prepare(Mine(), "POST", URLS[0], {}, b"{}")
    assert calls == [URLS[0]]


def test_a_session_with_nothing_to_merge_never_calls_prepare_request() -> None:
    session = new_session()
    expected = requests_own(session, "POST", URLS[1], HEADERS, b"{}")

    def refuse(request: requests.Request) -> requests.PreparedRequest:
        raise AssertionError("the fast path was not taken")

    session.prepare_request = refuse  # type: ignore[method-assign]
    same(prepare(session, "POST", URLS[1], HEADERS, b"{}"), expected)
