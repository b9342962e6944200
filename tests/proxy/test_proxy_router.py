"""The proxy app as a router: its route table, the faces' registration, and `Completions`.

Driven through the WSGI callable with a `MockBackend` upstream (no sockets):
what a face registers is what the app serves, 404 and 405 stay the app's, and
the completion path every face receives answers, records and fails as one.
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Iterable
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from llmchat.backends.mock import MockBackend
from llmchat.proxy import ProxyApp, make_app
from llmchat.proxy.answers import Answer
from llmchat.proxy.app import AppOptions
from llmchat.proxy.client_body import ClientError
from llmchat.proxy.client_exchange import ClientExchange, ExchangeContext
from llmchat.proxy.completions import Completions, FaceOptions
from llmchat.proxy.faces import anthropic, gemini, ollama, openai, responses
from llmchat.proxy.router import Route, Router
from llmchat.proxy.upstream import Failure, Upstream
from llmchat.proxy.usage import UsageEvent


class Answered:
    """What one WSGI call answered: status line, headers, body."""

    def __init__(self) -> None:
        self.status = ""
        self.headers: dict[str, str] = {}
        self.body = b""

    def start_response(self, status: str, headers: list[tuple[str, str]], *_: Any) -> None:
        self.status = status
        self.headers = {name.lower(): value for name, value in headers}

    def json(self) -> Any:
        return json.loads(self.body)


def environ(method: str, path: str, body: Any = None, **headers: str) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    env: dict[str, Any] = {}
    setup_testing_defaults(env)
    env.update(REQUEST_METHOD=method, PATH_INFO=path, CONTENT_LENGTH=str(len(data)))
    env["wsgi.input"] = io.BytesIO(data)
    env.update({"HTTP_" + name.upper(): value for name, value in headers.items()})
    return env


def drain(result: Iterable[bytes]) -> bytes:
    """A WSGI body read to its end and closed, as a server does."""
    chunks: list[bytes] = []
    try:
        chunks.extend(result)
    finally:
        getattr(result, "close", lambda: None)()
    return b"".join(chunks)


def call(app: Any, method: str, path: str, body: Any = None, **headers: str) -> Answered:
    answered = Answered()
    answered.body = drain(app(environ(method, path, body, **headers), answered.start_response))
    return answered


class Events:
    """A usage sink keeping every event."""

    def __init__(self) -> None:
        self.events: list[UsageEvent] = []

    def __call__(self, event: UsageEvent) -> None:
        self.events.append(event)


def completions(replies: Iterable[dict[str, Any]] = (), sink: Events | None = None) -> Completions:
    emit = sink if sink is not None else Events()
    upstream = Upstream(MockBackend(list(replies)))
    return Completions(upstream, ExchangeContext(upstream.redactor, emit, 1_000))


# -- the route table ---------------------------------------------------------


def test_router_finds_what_was_registered_and_knows_its_paths() -> None:
    def handler(exchange: ClientExchange) -> list[bytes]:
        return []

    router = Router([Route("GET", "/a", "proxy", handler)])
    router.add([Route("POST", "/a", "openai", handler), Route("GET", "/b", "ollama", handler)])
    found = router.find("POST", "/a")
    assert found is not None and found.face == "openai" and found.handler is handler
    assert router.find("DELETE", "/a") is None
    assert router.knows("/a") and not router.knows("/c")
    assert router.paths == {"/a", "/b"}


def test_a_route_registered_twice_is_refused() -> None:
    route = Route("GET", "/a", "proxy", lambda exchange: [])
    router = Router([route])
    with pytest.raises(ValueError, match="GET /a is registered twice"):
        router.add([route])


def test_the_app_serves_exactly_what_the_faces_register() -> None:
    app = make_app(MockBackend())
    expected = Router()
    for face in (anthropic, ollama, openai, responses, gemini):
        face.register(expected, app.completions)
    own = {"/", "/health", "/api/hello"}
    operator = {"/metrics", "/admin/nodes", "/admin/config", "/admin/usage", "/admin/budgets"}
    assert app.router.paths == expected.paths | own | operator
    assert set(app.router.routes) - set(expected.routes) == {
        ("GET", "/"),
        ("HEAD", "/"),
        ("GET", "/health"),
        ("GET", "/api/hello"),
        ("HEAD", "/api/hello"),
        *(("GET", path) for path in operator),
    }
    faces = {route.face for route in app.router.routes.values()}
    faces |= {route.face for route in app.router.prefixes.values()}
    assert faces == {"proxy", "ollama", "anthropic", "openai", "gemini"}


def test_every_face_receives_the_apps_completions() -> None:
    app = make_app(MockBackend(), ping_interval=0.5, drop_billing_header=True)
    messages = app.router.find("POST", "/v1/messages")
    chat = app.router.find("POST", "/api/chat")
    assert messages is not None and chat is not None
    face: Any = messages.handler.__self__  # type: ignore[attr-defined]
    assert face.completions is app.completions
    assert (face.ping_interval, face.drop_billing_header) == (0.5, True)
    assert chat.handler.__self__.completions is app.completions  # type: ignore[attr-defined]
    assert app.completions.options == FaceOptions(0.5, True)


def test_unknown_path_is_a_404_and_known_path_wrong_method_a_405() -> None:
    app = make_app(MockBackend())
    missing = call(app, "GET", "/nowhere")
    assert missing.status.startswith("404") and "No route for GET /nowhere" in missing.body.decode()
    wrong = call(app, "GET", "/api/chat")
    assert wrong.status.startswith("405")
    assert wrong.json() == {"error": "GET is not allowed on /api/chat"}  # Ollama's shape
    assert call(app, "HEAD", "/").status.startswith("200")
    assert call(app, "GET", "/").body == b"Ollama is running"
    assert call(app, "GET", "/health").json() == {"status": "ok"}


def test_the_key_is_checked_before_the_lookup() -> None:
    app = make_app(MockBackend(), api_key="sekrit-key")
    assert call(app, "GET", "/nowhere").status.startswith("401")  # not 404: routes stay hidden
    assert call(app, "GET", "/health").status.startswith("200")
    ok = call(app, "GET", "/nowhere", X_API_KEY="sekrit-key")
    assert ok.status.startswith("404")


def test_app_options_are_proxy_apps_keywords_and_make_app_shows_them() -> None:
    keywords = [
        name
        for name, param in inspect.signature(ProxyApp).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert keywords == list(AppOptions.__annotations__)
    assert inspect.signature(make_app).parameters == inspect.signature(ProxyApp).parameters


def test_make_app_refuses_a_misspelt_keyword() -> None:
    with pytest.raises(TypeError):
        make_app(MockBackend(), ping_intervall=1.0)  # type: ignore[call-arg]


def test_a_face_registered_by_hand_answers_through_the_app_shape() -> None:
    """A router built as the app builds it serves a new face's route, its errors mapped."""
    app = make_app(MockBackend())

    def teapot(exchange: ClientExchange) -> list[bytes]:
        body = exchange.read_json()
        if "fail" in body:
            raise ClientError(422, "fail: no", "invalid_request")
        return exchange.json(200, {"echo": body})

    app.router.add([Route("POST", "/x/teapot", "openai", teapot)])
    assert call(app, "POST", "/x/teapot", {"a": 1}).json() == {"echo": {"a": 1}}
    refused = call(app, "POST", "/x/teapot", {"fail": 1})
    assert refused.status.startswith("422")
    assert refused.json()["error"]["message"] == "fail: no"


# -- the exchange's helpers --------------------------------------------------


def test_exchange_read_json_keeps_the_bytes_and_the_model_and_holds_the_limit() -> None:
    context = ExchangeContext(max_body_bytes=40)
    answered = Answered()
    exchange = ClientExchange(
        environ("POST", "/api/chat", {"model": "m"}), answered.start_response, "ollama", context
    )
    assert exchange.read_json() == {"model": "m"}
    assert exchange.body_bytes == b'{"model": "m"}' and exchange.event.model == "m"
    big = ClientExchange(
        environ("POST", "/api/chat", {"model": "m" * 50}),
        answered.start_response,
        "ollama",
        context,
    )
    with pytest.raises(ClientError) as refused:
        big.read_json()
    assert refused.value.status == 413


def test_exchange_error_is_in_the_faces_shape_and_recorded_once() -> None:
    sink = Events()
    answered = Answered()
    exchange = ClientExchange(
        environ("POST", "/v1/messages"),
        answered.start_response,
        "anthropic",
        ExchangeContext(emit=sink),
    )
    body = json.loads(b"".join(exchange.error(400, "messages: required", "invalid_request")))
    assert body["type"] == "error" and body["error"]["message"] == "messages: required"
    assert answered.status.startswith("400") and answered.headers["request-id"]
    [event] = sink.events
    assert (event.status, event.ok, event.error_type) == (400, False, "invalid_request")


def test_exchange_failed_answers_a_failure_or_an_abort() -> None:
    sink = Events()
    answered = Answered()
    exchange = ClientExchange(
        environ("POST", "/api/chat"), answered.start_response, "ollama", ExchangeContext(emit=sink)
    )
    exchange.failed(Failure(502, "The upstream failed", "http"))
    assert answered.status.startswith("502") and sink.events[-1].error_type == "http"
    gone = ClientExchange(
        environ("POST", "/api/chat"), answered.start_response, "ollama", ExchangeContext(emit=sink)
    )
    assert gone.failed(Failure(502, "x", "http"), hung_up=True) == []
    assert answered.status.startswith("499") and sink.events[-1].error_type == "client_abort"


# -- the completion path -----------------------------------------------------


class PlainAnswer(Answer):
    """The OpenAI chat answer as is: enough to drive `Completions.complete`."""

    def body(self, response: Any) -> dict[str, Any]:
        return {"text": response.msg}


def run(path: Completions, request: dict[str, Any]) -> tuple[Answered, bytes]:
    answered = Answered()
    exchange = path.exchange(environ("POST", "/x"), answered.start_response, "openai")
    return answered, drain(path.complete(exchange, request, PlainAnswer()))


def test_completions_complete_answers_and_records_the_counts() -> None:
    sink = Events()
    path = completions(
        [{"text": "hello", "usage": {"prompt_tokens": 3, "completion_tokens": 1}}], sink
    )
    answered, data = run(path, {"messages": [{"role": "user", "content": "hi"}]})
    assert answered.status.startswith("200") and json.loads(data) == {"text": "hello"}
    [event] = sink.events
    assert (event.input_tokens, event.output_tokens, event.stream) == (3, 1, False)


def test_completions_turn_an_upstream_failure_into_the_faces_error() -> None:
    sink = Events()
    path = completions([{"error_status": 503, "err": "busy"}], sink)
    answered, data = run(path, {"messages": [{"role": "user", "content": "hi"}]})
    assert answered.status.startswith("503")
    assert "busy" not in data.decode()  # the upstream's words stay in the log
    assert sink.events[-1].ok is False


def test_completions_start_hands_back_the_live_response() -> None:
    path = completions([{"text": "hi"}])
    answered = Answered()
    exchange = path.exchange(environ("POST", "/x"), answered.start_response, "openai")
    started = path.start(exchange, {"messages": [{"role": "user", "content": "x"}]})
    assert not isinstance(started, list)
    response, watch = started
    response.wait()
    watch.stop()
    assert response.msg == "hi" and answered.status == ""  # nothing answered yet


def test_proxy_app_is_still_what_make_app_returns() -> None:
    app = make_app(MockBackend(), max_body_bytes=123)
    assert isinstance(app, ProxyApp)
    assert app.completions.context.max_body_bytes == 123
    assert app.completions.upstream is app.upstream
