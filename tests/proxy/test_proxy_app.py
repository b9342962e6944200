"""The proxy's WSGI app called directly: routes, bodies, limits, request ids, and no secret
in any log, answer or repr.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from llmchat import OpenAICommon
from llmchat.proxy import make_app
from llmchat.testing import ChatResponder, ScriptedServer

NOWHERE = "http://127.0.0.1:9/v1"  # never contacted: these tests fail before any I/O

# -- calling the WSGI app directly ----------------------------------------------------


class _Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = int(status.split()[0])
        self.status_line = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def _call(
    app: Any,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    stream: Any = None,
    content_length: str | None = None,
    extra: dict[str, Any] | None = None,
) -> _Answer:
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ["REQUEST_METHOD"] = method
    environ["PATH_INFO"] = path
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    environ["wsgi.input"] = stream if stream is not None else io.BytesIO(data)
    environ["CONTENT_LENGTH"] = content_length if content_length is not None else str(len(data))
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    environ.update(extra or {})
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, response_headers: list[tuple[str, str]], *_: Any) -> Any:
        started.append((status, response_headers))
        return lambda _data: None

    result = app(environ, start_response)
    try:
        out = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    assert len(started) == 1
    return _Answer(started[0][0], started[0][1], out)


@pytest.fixture
def offline_app() -> Any:
    return make_app(OpenAICommon(NOWHERE))


def test_health_and_root(offline_app: Any) -> None:
    health = _call(offline_app, "GET", "/health")
    assert (health.status, health.json()) == (200, {"status": "ok"})
    assert health.headers["content-type"] == "application/json"

    root = _call(offline_app, "GET", "/")
    assert (root.status, root.body) == (200, b"Ollama is running")
    assert root.headers["content-type"].startswith("text/plain")

    head = _call(offline_app, "HEAD", "/")
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-length"] == str(len(b"Ollama is running"))


def test_not_found_is_shaped_for_the_face_asked(offline_app: Any) -> None:
    ollama = _call(offline_app, "GET", "/api/x")
    assert ollama.status == 404
    assert set(ollama.json()) == {"error"} and isinstance(ollama.json()["error"], str)

    anthropic = _call(offline_app, "POST", "/v1/messages/x")
    assert anthropic.status == 404
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "not_found_error"
    assert isinstance(anthropic.json()["error"]["message"], str)
    assert anthropic.headers["request-id"] == anthropic.headers["x-request-id"]

    openai = _call(offline_app, "GET", "/v1/x")
    assert openai.status == 404
    error = openai.json()["error"]
    assert isinstance(error["message"], str)
    assert (error["type"], error["code"]) == ("invalid_request_error", 404)

    other = _call(offline_app, "GET", "/elsewhere")
    assert other.status == 404 and "message" in other.json()["error"]


def test_wrong_method_is_405(offline_app: Any) -> None:
    answer = _call(offline_app, "GET", "/api/chat")
    assert answer.status == 405
    assert answer.status_line == "405 Method Not Allowed"
    assert "GET" in answer.json()["error"]

    relay = _call(offline_app, "DELETE", "/v1/chat/completions")
    assert relay.status == 405 and relay.json()["error"]["code"] == 405


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"", "needs a JSON object"),
        (b"[1, 2]", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
    ],
)
@pytest.mark.parametrize("path", ["/api/chat", "/v1/messages", "/v1/chat/completions"])
def test_bad_bodies_are_400(offline_app: Any, path: str, body: bytes, says: str) -> None:
    answer = _call(offline_app, "POST", path, body)
    assert answer.status == 400
    assert says in answer.body.decode()


def test_non_numeric_content_length_is_400(offline_app: Any) -> None:
    answer = _call(offline_app, "POST", "/api/chat", b"{}", content_length="ten")
    assert answer.status == 400


class _Untouchable(io.RawIOBase):
    """A request body that fails the test if anyone reads it."""

    def read(self, *args: Any) -> bytes:  # type: ignore[override]
        raise AssertionError("the body was read")

    readline = readlines = read  # type: ignore[assignment]


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate", "/v1/messages"])
def test_oversized_content_length_is_413_unread(path: str) -> None:
    app = make_app(OpenAICommon(NOWHERE), max_body_bytes=100)
    answer = _call(app, "POST", path, stream=_Untouchable(), content_length="101")
    assert answer.status == 413
    assert "100 bytes" in answer.body.decode()


def test_oversized_relay_body_is_413_unread() -> None:
    app = make_app(OpenAICommon(NOWHERE), max_body_bytes=100)
    answer = _call(
        app, "POST", "/v1/chat/completions", stream=_Untouchable(), content_length="5000000"
    )
    assert answer.status == 413
    assert answer.json()["error"]["code"] == 413


def test_chunked_body_over_the_limit_is_413() -> None:
    app = make_app(OpenAICommon(NOWHERE), max_body_bytes=100)
    answer = _call(
        app,
        "POST",
        "/api/chat",
        stream=io.BytesIO(b"{" + b" " * 200 + b"}"),
        content_length="",
        headers={"Transfer-Encoding": "chunked"},
        extra={"wsgi.input_terminated": True},  # a server that de-chunks (gunicorn)
    )
    assert answer.status == 413


def test_chunked_body_under_a_server_that_cannot_end_it_is_411() -> None:
    class Unreadable(io.RawIOBase):
        def read(self, size: int = -1) -> bytes:
            raise AssertionError("the body must not be read: wsgiref would block here")

    app = make_app(OpenAICommon(NOWHERE))
    answer = _call(
        app,
        "POST",
        "/api/chat",
        stream=Unreadable(),
        content_length="",
        headers={"Transfer-Encoding": "chunked"},
    )
    assert answer.status == 411


GENERATED_ID = re.compile(r"req_[0-9a-f]{32}")


@pytest.mark.parametrize("given", ["trace-1", "a.b:c_d-E9", "x" * 128])
def test_well_formed_request_id_is_echoed(offline_app: Any, given: str) -> None:
    answer = _call(offline_app, "GET", "/health", headers={"X-Request-Id": given})
    assert answer.headers["x-request-id"] == given


@pytest.mark.parametrize(
    "given",
    [
        "abc def",
        "abc\r\nSet-Cookie: x=1",
        "abc\n",
        "x" * 129,
        "",
        "naïve",
        "a/b",
    ],
)
def test_malformed_request_id_is_replaced(offline_app: Any, given: str) -> None:
    answer = _call(offline_app, "GET", "/health", headers={"X-Request-Id": given})
    assert GENERATED_ID.fullmatch(answer.headers["x-request-id"])
    assert all("\n" not in v and "\r" not in v for v in answer.headers.values())


def test_generated_request_ids_differ(offline_app: Any) -> None:
    ids = {_call(offline_app, "GET", "/health").headers["x-request-id"] for _ in range(5)}
    assert len(ids) == 5


# -- secrets never leak ---------------------------------------------------------------


UPSTREAM_KEY = "sk-secret-123"
PROXY_KEY = "proxy-key"


@pytest.fixture
def upstream_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer(ChatResponder("Bonjour from upstream.", chunk_size=5))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_no_secret_reaches_log_responses_or_repr(
    tmp_path: Any, upstream_server: ScriptedServer
) -> None:
    log_path = tmp_path / "usage.jsonl"
    app = make_app(
        OpenAICommon(upstream_server.url, api_key=UPSTREAM_KEY),
        usage_log=log_path,
        api_key=PROXY_KEY,
    )
    bearer = {"Authorization": f"Bearer {PROXY_KEY}"}
    messages = [{"role": "user", "content": "Hi"}]
    answers = [
        _call(
            app,
            "POST",
            "/api/chat",
            {"model": "m", "messages": messages, "stream": False},
            headers=bearer,
        ),
        _call(app, "POST", "/api/chat", {"model": "m", "messages": messages}, headers=bearer),
        _call(
            app,
            "POST",
            "/v1/messages",
            {"model": "m", "max_tokens": 20, "messages": messages},
            headers={"x-api-key": PROXY_KEY},
        ),
        _call(
            app,
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": messages, "stream": True},
            headers=bearer,
        ),
        _call(app, "GET", "/api/tags", headers=bearer),
        _call(app, "GET", "/api/tags", headers={"Authorization": "Bearer wrong"}),
        _call(app, "GET", "/api/tags"),
    ]
    assert [a.status for a in answers] == [200, 200, 200, 200, 200, 401, 401]
    assert answers[0].json()["message"]["content"] == "Bonjour from upstream."
    assert b'"content":"Bonjo"' in answers[1].body  # streamed in 5-character pieces
    assert b'"content":"Bonjo"' in answers[3].body
    assert answers[2].json()["content"][0]["text"] == "Bonjour from upstream."

    records = [json.loads(line) for line in log_path.read_bytes().splitlines()]
    assert len(records) == len(answers)  # one event per request, streams included
    assert [r["status"] for r in records] == [a.status for a in answers]
    assert [r["request_id"] for r in records] == [a.headers["x-request-id"] for a in answers]
    assert [r["face"] for r in records] == ["ollama"] * 2 + ["anthropic", "openai"] + ["ollama"] * 3
    assert all(r["content_bytes"] == len(b"Bonjour from upstream.") for r in records[:4])

    everything = [log_path.read_bytes(), repr(app).encode()]
    for answer in answers:
        everything.append(answer.body)
        everything.extend(f"{k}: {v}".encode() for k, v in answer.headers.items())
    for secret in (UPSTREAM_KEY, PROXY_KEY):
        assert not any(secret.encode() in blob for blob in everything), secret

    # The upstream key was really in play, and the client's proxy key stayed here.
    seen = upstream_server.requests
    assert seen and all(r.headers.get("authorization") == f"Bearer {UPSTREAM_KEY}" for r in seen)
    assert not any(PROXY_KEY.encode() in r.raw for r in seen)
