"""Redirects stay on their origin: no key and no prompt ever reach another host.

Over real sockets: an upstream answers every request with a 301/302/307/308
to a second server (another port, so another origin). For every backend,
blocking and streamed, the second server must receive nothing at all, and the
Response is an ``http`` failure with the redirect's status. A redirect on the
same origin is still followed, key and all.
"""

from __future__ import annotations

import pytest

from llmchat.testing import ChatResponder, RecordedRequest, Reply, ScriptedServer

from .support.redirects import BACKENDS, KEY, run


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("mode", ["blocking", "stream"])
@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_redirect_to_another_host_is_not_followed(name: str, mode: str, status: int) -> None:
    elsewhere = ScriptedServer(ChatResponder("stolen")).start()
    target = elsewhere.url.removesuffix("/v1")

    def redirect(request: RecordedRequest) -> Reply:
        return Reply(status, [("Location", target + request.path)], b"")

    origin = ScriptedServer(redirect).start()
    try:
        with BACKENDS[name](origin.url.removesuffix("/v1")) as backend:
            response = run(backend, mode)
    finally:
        origin.stop()
        elsewhere.stop()
    assert len(origin.requests) == 1
    assert elsewhere.requests == []  # neither the key nor the prompt went there
    assert not response.is_success
    assert (response.error_class, response.error_status) == ("http", status)


@pytest.mark.parametrize("mode", ["blocking", "stream"])
@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_redirect_on_the_same_origin_is_followed_with_the_key(name: str, mode: str) -> None:
    honest = ChatResponder("moved but fine")

    def script(request: RecordedRequest) -> Reply:
        if not request.path.startswith("/moved"):
            return Reply(307, [("Location", "/moved" + request.path)], b"")
        # Each dialect's own answer is not what this test is about: a 200 of
        # the right kind is, so the OpenAI-shaped ones get the responder's.
        return honest(request) if "chat/completions" in request.path else Reply.json({})

    server = ScriptedServer(script).start()
    try:
        with BACKENDS[name](server.url.removesuffix("/v1")) as backend:
            run(backend, mode)
    finally:
        server.stop()
    # The completion itself (OpenRouter also asks its generation endpoint after it).
    moved = [r for r in server.requests if r.path.startswith("/moved") and r.method == "POST"]
    assert len(moved) == 1
    sent = {k.lower(): v for k, v in moved[0].headers.items()}
    assert any(KEY in value for value in sent.values()) or KEY in moved[0].path
    assert moved[0].json() == server.requests[0].json()  # the same body, re-sent
